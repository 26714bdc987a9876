"""Keeps glibc from returning freed memory to the system after every large message.

Every large courier message allocates and frees buffers of its size (the joined message, gRPC's
copy of it, the received bytes, a part copied out of shared memory). glibc's defaults make each
of them cost page faults:

* freeing leaves enough free space at the top of the heap for glibc to give it back, and the
  next message takes it again, page fault by page fault. Keeping 16 MiB of padding at the top
  of each heap (M_TOP_PAD) stops that churn; memory above that is still returned.
* setting any such option turns off glibc's dynamic mmap threshold, which otherwise rises to
  the size of freed large blocks (up to 32 MiB). Without it every block over 128 KiB is a
  fresh mapping: copying 1 MiB took 760 us instead of 36 us. So the threshold is set to the
  ceiling the dynamic one would reach (M_MMAP_THRESHOLD, 32 MiB).

On a 2-core machine the churn doubled the CPU cost of echoing a 1 MiB array (measured with
benchmarks/courier_rpc.py). A user who sets MALLOC_TOP_PAD_ or MALLOC_MMAP_THRESHOLD_ in the
environment keeps that setting; other C libraries (musl, macOS) are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import threading

TOP_PAD_BYTES = 16 << 20
MMAP_THRESHOLD_BYTES = 32 << 20
# From glibc's malloc.h: option, and the environment variable that sets it at start-up.
_OPTIONS = ((-2, TOP_PAD_BYTES, "MALLOC_TOP_PAD_"),
            (-3, MMAP_THRESHOLD_BYTES, "MALLOC_MMAP_THRESHOLD_"))
_done = threading.Event()
_lock = threading.Lock()


def retain_freed_memory() -> None:
    """Sets glibc's top padding and mmap threshold once per process (see the module doc)."""
    if _done.is_set():
        return
    with _lock:
        if _done.is_set():
            return
        _done.set()
        if platform.libc_ver()[0] != "glibc":
            return
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        for option, value, variable in _OPTIONS:
            if variable not in os.environ:
                libc.mallopt(option, value)
