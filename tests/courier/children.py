"""Servers in child processes, for tests (and benchmarks) that need another process.

A child prints the port it serves on as one line of stdout and ends when its stdin closes,
so it never outlives the process that started it, even one that was killed.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import textwrap
from collections.abc import Iterator, Sequence
from typing import IO

PORT_TIMEOUT_SECS = 30.0

# A child serving `ping`, `identity` and `nbytes` (of a buffer), with the token of its first
# argument (for child_server: `[sys.executable, "-c", ECHO_SERVER, token]`).
ECHO_SERVER = textwrap.dedent("""
    import sys
    from launchpad import courier

    class Echo:
        def ping(self):
            return "pong"

        def identity(self, value):
            return value

        def nbytes(self, value):
            return memoryview(value).nbytes

    server = courier.Server(Echo(), token=sys.argv[1])
    server.start()
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()
""")


@contextlib.contextmanager
def child_server(argv: Sequence[str], *, env: dict[str, str] | None = None,
                 cwd: str | None = None,
                 stderr: IO | None = None) -> Iterator[tuple[int, int]]:
    """Runs `argv`; yields (pid, port) once it has printed its port; ends it afterwards
    (its stdin closed, then killed if it lingers past 10 s)."""
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr, env=env, cwd=cwd)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], PORT_TIMEOUT_SECS)
        line = proc.stdout.readline() if ready else b""
        if not line:
            raise RuntimeError(f"{' '.join(argv)} printed no port within "
                               f"{PORT_TIMEOUT_SECS:.0f} s (exit status {proc.poll()})")
        yield proc.pid, int(line)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def memory_regions(pid: int | str = "self") -> int:
    """How many courier memory regions (its probe included) process `pid` holds: its own, and
    its peers' it has mapped. Distinct files, as a mapping keeps a descriptor of its own
    (counted through /proc: files `memfd:launchpad-courier` the process holds open)."""
    regions = set()
    for name in os.listdir(f"/proc/{pid}/fd"):
        path = f"/proc/{pid}/fd/{name}"
        with contextlib.suppress(OSError):
            if os.readlink(path).startswith("/memfd:launchpad-courier"):
                regions.add(os.stat(path).st_ino)
    return len(regions)
