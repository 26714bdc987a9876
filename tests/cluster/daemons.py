"""What the test clusters share to run their daemons: each below reaper.py, on a free port,
awaited by polling their state (they signal readiness no other way), and found again by
descent from the process that started them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

REAPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")


def under_reaper(argv: Sequence[str]) -> list[str]:
    """`argv` run below reaper.py, which reaps what it orphans and, should the test process
    die, ends what is left below it."""
    return [sys.executable, "-I", "-S", REAPER, *argv]


def free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as error:
        return f"({error})\n"


def descendants(root: int) -> list[int]:
    """Live (non-zombie) descendants of `root`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def wait_for(condition: Callable[[], bool], timeout: float, what: str, where: str,
             logs: Callable[[], str]) -> None:
    """Polls `condition` until true; raises RuntimeError naming `what`, `where` and the logs
    if it is not within `timeout` s, or if it raises (a daemon exited, a command timed out)."""
    deadline = time.monotonic() + timeout
    try:
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {timeout} s")
            time.sleep(0.1)  # the daemons' state has no event to wait on
    except (TimeoutError, RuntimeError, subprocess.TimeoutExpired) as error:
        raise RuntimeError(f"{where}: {error}; logs:\n{logs()}") from error
