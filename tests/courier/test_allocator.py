"""glibc settings for large messages: freed memory is kept, and large blocks come from the heap.

Each case runs in a fresh interpreter, since the settings are made once per process.
"""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or not hasattr(ctypes.CDLL(None), "mallinfo2"),
    reason="needs glibc 2.33 or newer")

# Prints how many bytes more glibc serves as separate mappings while an 8 MiB block is held.
_MAPPED_BLOCKS = textwrap.dedent("""
    import ctypes
    import sys
    from launchpad.courier._process import allocator

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]

    if sys.argv[1] == "set":
        allocator.retain_freed_memory()
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = Mallinfo2
    before = libc.mallinfo2().hblkhd
    block = bytearray(8 << 20)
    print(libc.mallinfo2().hblkhd - before)
""")


def _mapped_bytes(setting: str, **env: str) -> int:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    result = subprocess.run([sys.executable, "-c", _MAPPED_BLOCKS, setting], env=clean | env,
                            capture_output=True, text=True, timeout=60, check=True)
    return int(result.stdout)


def test_large_blocks_come_from_the_heap_once_set():
    assert _mapped_bytes("unset") >= 8 << 20  # glibc's default: a fresh mapping
    assert _mapped_bytes("set") == 0


def test_a_users_own_malloc_setting_wins():
    assert _mapped_bytes("set", MALLOC_MMAP_THRESHOLD_="131072") >= 8 << 20
