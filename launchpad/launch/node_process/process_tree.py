"""What a node's process started ends with it.

A node may start processes of its own (`subprocess.Popen`, a server binary). They belong to the
node: whenever its process ends - its code returned or raised, or it outlived its program's
controller after the launcher was killed - they are ended too, so nothing is orphaned. The
process is made a child subreaper (Linux), so that a grandchild whose parent has died, or that
detached itself (double fork, setsid), is re-parented to the node's process instead of init,
and is found.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import time

_PR_SET_CHILD_SUBREAPER = 36
# How long descendants get between SIGTERM and SIGKILL when their node's process ends.
_TERMINATE_GRACE_SECS = 1.0


def _find_prctl():
    with contextlib.suppress(OSError, AttributeError):  # not Linux
        return ctypes.CDLL(None, use_errno=True).prctl
    return None


# Found once, at import: the fork server imports this module, so its forks only call it.
_prctl = _find_prctl()


def adopt_orphans() -> None:
    """Makes orphaned descendants of this process its children (a no-op off Linux)."""
    if _prctl is not None:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def descendants(pid: int) -> list[int]:
    """Pids of `pid`'s live descendants, parents before their children (from /proc)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in _children(todo.pop()):
            if child not in found and _alive(child):
                found.append(child)
                todo.append(child)
    return found


def end_descendants() -> None:
    """Ends every descendant of this process: SIGTERM, then SIGKILL to what is left after a
    short grace (they have lost the node they served; nothing waits for them)."""
    pids = descendants(os.getpid())
    if not pids:
        return
    exits = _exit_notices(pids)
    # poll, not select: a courier server raises the open-files limit, so these may lie
    # beyond select()'s 1024.
    poller = select.poll()
    for fd in exits:
        poller.register(fd, select.POLLIN)
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + _TERMINATE_GRACE_SECS
    while exits and (left := deadline - time.monotonic()) > 0:
        for fd, _ in poller.poll(left * 1000):
            poller.unregister(fd)
            exits.remove(fd)
            os.close(fd)
    for fd in exits:
        os.close(fd)
    _signal_all(descendants(os.getpid()) + pids, signal.SIGKILL)


def _exit_notices(pids: list[int]) -> list[int]:
    """A pidfd per process, readable once it has ended (none for one already gone, or where
    the kernel has no pidfds: that one gets SIGKILL without the grace)."""
    fds = []
    for pid in pids:
        with contextlib.suppress(OSError):
            fds.append(os.pidfd_open(pid))
    return fds


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _children(pid: int) -> list[int]:
    children: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                children.extend(int(c) for c in f.read().split())
    return children


def _alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie (a zombie has ended; its parent reaps it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
