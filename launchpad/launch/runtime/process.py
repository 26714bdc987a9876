"""Node processes on this host: start one, learn how it ended, end it.

A `NodeProcess` is one node's process as its launcher sees it (an `ending.NodeWorker`)::

    start()  -> a spawner runs the node runner (launch/node_process/runner.py) on the
                node's spec file, with the stdin/stdout/stderr its terminal gives, in a
                process group of its own
    exits    -> on_exit(process): its exit code (the node itself reports why to the controller;
                a colocated child, to its parent through a failure report)
    terminate() / kill() -> SIGTERM / SIGKILL to the whole process group
    ended    -> whatever is left in its process group is killed (a node killed from outside
                could not end what it started)

Spawners: a fresh interpreter (`python -m launchpad.launch`), or a fork of the launch's
fork server (fork_server.py), which has the core already imported and starts a node in
milliseconds. Groups that need their own interpreter or interpreter arguments always get a
fresh one.
"""

from __future__ import annotations

import abc
import concurrent.futures
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from absl import logging

from launchpad.launch.runtime import ending, private_files, spec
from launchpad.nodes.python.local_multi_processing import PythonProcess

Stdio = tuple[int, int, int]  # stdin, stdout, stderr file descriptors
_START_TIMEOUT_SECS = 60.0
EXIT_NOT_STARTED = 127  # as a shell reports a command it could not run


def own_process_group() -> dict[str, Any]:
    """`subprocess.Popen` keywords that start the child in a process group of its own.

    A group, not a session (`start_new_session`): signals still reach the node and whatever it
    started as one, but the node stays in the launcher's session, so Linux's scheduler
    autogroups (one per session) put the whole program in one group. A session per node
    gives every node a CPU share of its own: 100 nodes then crowd out the rest of the desktop,
    and a node's wake-ups compete with its clients' across groups (Reverb inserts through a
    node ran 10-20% slower than through a plain server started with Popen's defaults)."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # Python 3.10 has no process_group


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


class Spawner(abc.ABC):
    """What starts node runners: a fresh interpreter, the launch's fork server, or a Slurm
    host's agent (which starts them on its host, and signals them there)."""

    @abc.abstractmethod
    def spawn(self, spec_path: str, settings: PythonProcess, stdio: Stdio, own_group: bool,
              on_exit: Callable[[int], None],
              imports: tuple[str, ...] = ()) -> concurrent.futures.Future:
        """Starts the runner on `spec_path`; returns a future of its pid (so that many starts
        can be under way at once). `on_exit(returncode)` is called once when it has ended
        (negative: killed by that signal). The stdio descriptors may be closed on return.
        `imports` are the node's heavy imports (`Node.heavy_imports`), which a spawner that
        forks may have imported before the fork."""

    def signal_group(self, pid: int, sig: int) -> None:
        """Signals the process group of a runner it started (here: this host's)."""
        os.killpg(pid, sig)


class ExecSpawner(Spawner):
    """Starts each runner as a fresh interpreter."""

    def spawn(self, spec_path: str, settings: PythonProcess, stdio: Stdio, own_group: bool,
              on_exit: Callable[[int], None],
              imports: tuple[str, ...] = ()) -> concurrent.futures.Future:
        argv = [settings.interpreter or sys.executable, *(settings.interpreter_args or ()),
                "-m", "launchpad.launch", "--spec", spec_path]
        env = {**os.environ, **(settings.env or {})}
        popen = subprocess.Popen(argv, env=env, stdin=stdio[0], stdout=stdio[1],
                                 stderr=stdio[2], **(own_process_group() if own_group else {}))
        threading.Thread(target=lambda: on_exit(popen.wait()), daemon=True,
                         name=f"lp-wait-{popen.pid}").start()
        started: concurrent.futures.Future = concurrent.futures.Future()
        started.set_result(popen.pid)
        return started


class NodeProcess(ending.NodeWorker):
    """One node's process (see the module doc); restartable."""

    def __init__(self, name: str, spec_path: str, settings: PythonProcess,
                 spawner: Spawner, open_stdio: Callable[[], tuple[Stdio, bool]],
                 own_group: bool = True,
                 on_exit: Callable[[NodeProcess], None] | None = None, report_path: str = "",
                 imports: tuple[str, ...] = ()):
        self.name = name
        self.report_path = report_path  # a colocated child's failure report
        self.attempt = -1  # how many times it was restarted (0: the first run)
        self._spec_path = spec_path
        self._settings = settings
        self._spawner = spawner
        self._open_stdio = open_stdio
        self._own_group = own_group
        self._imports = imports
        self._on_exit = on_exit
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._pid: concurrent.futures.Future | None = None
        self.returncode: int | None = None
        self.ended_by_launcher = False
        self.spawned_at: float | None = None  # when the current run's process was made
        self._start_error = ""

    @property
    def pid(self) -> int:
        """The process's pid (0 if it never started)."""
        try:
            return self._pid.result(timeout=_START_TIMEOUT_SECS) if self._pid else 0
        except Exception:  # noqa: BLE001 - the start failed: there is no process
            return 0

    def start(self) -> None:
        """Starts (or, once ended, restarts) the process."""
        with self._lock:
            self._ended.clear()
            self.returncode = None
            self.ended_by_launcher = False
            self.spawned_at = None  # (before the attempt: see Supervisor._never_came_up)
            self.attempt += 1
            if self.report_path and os.path.exists(self.report_path):
                os.unlink(self.report_path)
            self._start_error = ""
            stdio, close_after = self._open_stdio()
            try:
                self._pid = self._spawner.spawn(
                    self._spec_path, self._settings, stdio, self._own_group,
                    functools.partial(self._run_exited, self.attempt), self._imports)
            except Exception as e:
                # Nothing runs: whoever ends or waits for this process must not wait for it.
                self._start_error = f"could not start: {e}"
                self.returncode = EXIT_NOT_STARTED
                self._ended.set()
                raise RuntimeError(f"Cannot start the process of node {self.name}: {e}") from e
            finally:
                if close_after:  # the child holds its own copies now
                    for fd in set(stdio):
                        os.close(fd)
        self._pid.add_done_callback(self._check_started)

    restart = start

    def _check_started(self, pid: concurrent.futures.Future) -> None:
        """A process that could not be started has ended, as far as anyone waits for it; one
        that was started is timed until its runner reports (Supervisor's startup timeout)."""
        if pid.exception() is not None:
            self._start_error = f"could not start: {pid.exception()}"
            self._exited(EXIT_NOT_STARTED)
        else:
            self.spawned_at = time.monotonic()

    def _run_exited(self, attempt: int, returncode: int) -> None:
        """Run `attempt` has ended: the current run, unless it is an earlier one whose end
        comes late (a lost host's agent reporting its runs killed once a restart is under
        way), which ended long ago as far as anyone waits for it."""
        if attempt == self.attempt:
            self._exited(returncode)

    def _exited(self, returncode: int) -> None:
        self._end_group()
        with self._lock:
            self.returncode = returncode
            self._ended.set()
        if self._on_exit is not None:
            try:
                self._on_exit(self)
            except Exception:  # noqa: BLE001 - the thread that reports exits must go on
                logging.exception("Reporting the exit of node %s failed", self.name)

    def _end_group(self) -> None:
        """Ends what the node started and left in its process group: a runner ends its
        node's descendants when it exits, but a node killed (SIGKILL, a crash) cannot."""
        started = self._pid
        if not self._own_group or started is None or not started.done() or started.exception():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):  # nothing is left
            self._signal_group(started.result(), signal.SIGKILL)

    def _signal_group(self, pid: int, sig: int) -> None:
        """Signals the node's process group, through its spawner (which knows its host)."""
        self._spawner.signal_group(pid, sig)

    def wait(self, timeout: float | None = None) -> int | None:
        """Waits up to `timeout` seconds; the exit code once ended, else None."""
        self._ended.wait(timeout)
        return self.returncode

    def join(self, timeout: float) -> bool:
        return self._ended.wait(timeout)

    def terminate(self) -> bool:
        self._signal(signal.SIGTERM)
        return True

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        pid = self.pid
        with self._lock:
            if self._ended.is_set() or not pid:
                return
            self.ended_by_launcher = True
            try:
                if self._own_group:
                    self._signal_group(pid, sig)  # the node and whatever it started
                else:
                    os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def describe_end(self) -> str:
        """How the ended process ended, as its launcher saw it."""
        if self._start_error:
            return self._start_error
        return describe_exit(self.returncode if self.returncode is not None else 0)

    def failure(self) -> tuple[str, str, BaseException | None]:
        """(reason, traceback, exception) of an ended colocated child, from its report."""
        how = self.describe_end()
        report = spec.read_report(self.report_path) if self.report_path else None
        if report is None or self._start_error:
            return how, "", None
        return f"{report.reason} ({how})", report.traceback, report.exception


class ChildProcessStarter:
    """Starts colocated nodes as child processes of this one (a context.ProcessStarter).

    Children share this process's stdin/stdout/stderr and start as fresh interpreters. In a
    node's process they stay in its process group, so ending the node ends them too; in the
    launching process (under local_mt) each gets a group of its own, out of reach of the
    terminal's Ctrl+C. Their spec files and failure reports go to a private folder made on
    first use (removed by `close()`).
    """

    def __init__(self, termination_notice_secs: float, in_worker: bool):
        self._run_dir: str | None = None
        self._grace = termination_notice_secs
        self._in_worker = in_worker
        self._spawner = ExecSpawner()
        self._lock = threading.Lock()

    def start(self, node: Any, node_context: Any,
              on_exit: Callable[[NodeProcess], None]) -> NodeProcess:
        with self._lock:
            if self._run_dir is None:
                self._run_dir = private_files.make_work_dir("children-")
        label, index = node_context.label, node_context.index
        report_path = os.path.join(self._run_dir, spec.file_name(label, index, ".failure"))
        child_spec = spec.make_spec(node, node_context, label, index,
                                    termination_notice_secs=self._grace,
                                    bind_host=node_context.bind_host, report_path=report_path)
        process = NodeProcess(f"{label}/{index}", spec.write_spec_file(child_spec, self._run_dir),
                              PythonProcess(), self._spawner, lambda: ((0, 1, 2), False),
                              own_group=not self._in_worker, on_exit=on_exit,
                              report_path=report_path)
        process.start()
        return process

    def end(self, processes: list[NodeProcess], graceful: bool) -> None:
        ending.end_workers(processes, self._grace if graceful else 0.0, "(colocated)")

    def close(self) -> None:
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
