"""Helpers of tests that watch processes: which descendants live, and scripts run as their own
process whose output is read line by line as it comes."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def live_descendants(root: int | None = None) -> set[int]:
    """Pids of the live (not zombie) descendants of process `root` (default: this one)."""
    children: dict[int, list[int]] = {}
    states = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
        states[int(entry)] = fields[0]
    found, todo = set(), [os.getpid() if root is None else root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid for pid in found if states.get(pid) != "Z"}


class Script:
    """`python ARGS...` as its own process (stdout and stderr together), read as it prints.

    Args:
      args: the interpreter's arguments (`["-m", "module", ...]` or a script and its flags).
      timeout: how long each wait may take, in seconds.
      env: variables added to this process's environment (None: the variable removed).
      cwd: where it runs (the repository's root by default).
      new_session: run it in a session of its own, which `kill_session()` ends whole.
      python: the interpreter (this one by default; e.g. another venv's).
    """

    def __init__(self, args: Sequence[str], *, timeout: float = 60,
                 env: Mapping[str, str | None] | None = None, cwd: str = ROOT,
                 new_session: bool = False, python: str = sys.executable):
        self.timeout = timeout
        environment = {**os.environ, **(env or {})}
        self.process = subprocess.Popen(
            [python, *args], cwd=cwd,
            env={name: value for name, value in environment.items() if value is not None},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=new_session)
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float | None = None) -> re.Match:
        """Reads lines until one matches the regular expression `pattern`; returns the match."""
        timeout = self.timeout if timeout is None else timeout
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"nothing matched {pattern!r} within {timeout}s; output:"
                                     f"\n{self.output[-5000:]}") from None
            if line is None:
                self._queue.put(None)
                raise AssertionError(f"the script ended before {pattern!r}; output:\n"
                                     f"{self.output[-5000:]}")
            self.lines.append(line)
            match = re.search(pattern, line)
            if match:
                return match

    def finish(self, timeout: float | None = None) -> int:
        """Waits for the process to end; returns its exit status, all its output read."""
        timeout = self.timeout if timeout is None else timeout
        returncode = self.process.wait(timeout=timeout)
        while (line := self._queue.get(timeout=timeout)) is not None:
            self.lines.append(line)
        self.process.stdout.close()
        return returncode

    def kill(self) -> None:
        """Ends the process at once (a test that failed midway cleans up with this)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def kill_session(self, timeout: float = 30) -> None:
        """SIGKILLs every process of the script's session (started with new_session) and
        waits until none is left. A launcher's nodes run in process groups of their own
        (in its session), so killing the launcher's group alone would leave them running."""
        deadline = time.monotonic() + timeout
        killed = set()
        while members := session_members(self.process.pid):  # until nothing forks any more
            assert time.monotonic() < deadline, f"still alive after SIGKILL: {members}"
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    kill_and_wait(pid, max(0.0, deadline - time.monotonic()))
                    killed.add(pid)
        self.process.wait(timeout)
        for pid in killed - {self.process.pid}:  # orphans re-parented to this subreaper
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        self.process.stdout.close()

    @property
    def output(self) -> str:
        return "".join(self.lines)


def session_members(session: int) -> list[int]:
    """Pids of the live (not zombie) processes of `session`, from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if entry.isdigit():
                with open(f"/proc/{entry}/stat") as f:
                    state, _, _, sid = f.read().rsplit(")", 1)[1].split()[:4]
                if int(sid) == session and state != "Z":
                    members.append(int(entry))
    return members


def command_line(pid: int) -> list[str]:
    """Process `pid`'s arguments, from /proc ([] once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def parent_of(pid: int) -> int:
    """Process `pid`'s parent, from /proc (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def kill_and_wait(pid: int, timeout: float) -> None:
    """SIGKILLs process `pid` through a pidfd (no pid reuse race) and waits for it to end."""
    pidfd = os.pidfd_open(pid)
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        ended, _, _ = select.select([pidfd], [], [], timeout)
        assert ended, f"process {pid} did not end within {timeout:.3g} s of SIGKILL"
    finally:
        os.close(pidfd)
