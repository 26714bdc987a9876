"""`python reaper.py COMMAND...`: runs COMMAND as its child and reaps every orphan below it.

Why: slurmd starts each job step's slurmstepd through a double fork (and srun forks a helper
that outlives it), so these are orphaned at once. Under pytest the test process is a child
subreaper (tests/conftest.py), so orphans would be re-parented to it, and Python never reaps
processes it did not start: every finished step would stay a zombie of the test process. Run
below this (itself a subreaper), they are re-parented here and reaped as they end. It exits,
with COMMAND's status, once COMMAND has ended and no descendant is left; SIGTERM and SIGINT are
passed on to COMMAND.

Should the process that started it die (a test process killed midway), it gets SIGTERM
(PR_SET_PDEATHSIG), passes it on, and once COMMAND has ended it SIGKILLs whatever is left below
it, so a crashed test leaves no daemon or job step running.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    """Runs `argv`, reaps until nothing is left below; returns `argv`'s exit status."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    state = {"child": 0, "orphaned": os.getppid() == 1}
    if state["orphaned"]:  # the parent died before the line above
        return 1

    def on_signal(number: int, _frame: object) -> None:
        if number == signal.SIGTERM and os.getppid() != parent:
            state["orphaned"] = True
        if state["child"]:
            try:
                os.kill(state["child"], number)
            except ProcessLookupError:
                pass
        elif state["orphaned"]:
            _kill_children()

    parent = os.getppid()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    state["child"] = os.posix_spawnp(argv[0], argv, os.environ)
    status = 1
    while True:
        if state["orphaned"] and not state["child"]:
            _kill_children()
        try:
            pid, wait_status = os.waitpid(-1, 0)
        except ChildProcessError:
            return status
        if pid == state["child"]:
            status = os.waitstatus_to_exitcode(wait_status)
            status = 128 - status if status < 0 else status
            state["child"] = 0


def _kill_children() -> None:
    """SIGKILLs this process's children (their own children are then re-parented here)."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if fields[1] == me and fields[0] != "Z":
                    os.kill(int(entry), signal.SIGKILL)
            except (OSError, IndexError):
                continue


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
