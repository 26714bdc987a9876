"""Launchpad's WorkerManager (Launchpad's path): what Launchpad's local launches returned,
and the stop functions its code calls through this module.

Here every launch returns its `Controller`, which answers as a WorkerManager did (`wait(
labels_to_wait_for, raise_error, return_on_first_completed)`, `stop_and_wait()`, and, for
code that reached into it, `_active_workers` and `_kill()`: runtime/launchpad_workers.py). The stop
functions (`wait_for_stop`, `stop_event`, `register_stop_handler`, ...) are launchpad's own.

`WorkerManager` itself is kept for code that runs workers without a program, as Launchpad's
unit tests do: threads (`thread_worker`) and processes (`process_worker`) in groups, waited
for as a launch's nodes are. Its workers run in a standalone context of its own (see
launchpad/context.py), so `lp.wait_for_stop()` and `lp.stop()` work in them; it stops on
SIGTERM and on Ctrl+C (the second one kills), and after the stop each process gets
--lp_termination_notice_secs to end before it is killed. Unlike Launchpad's, it never kills
the process it runs in: a thread that does not end is left, named in a warning.
"""

from __future__ import annotations

import collections
import os
import select
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from typing import Any

from absl import logging

from launchpad import context
from launchpad import flags as lp_flags
from launchpad.launch.runtime import terminals
from launchpad.stopping import (  # noqa: F401 - Launchpad's names, through this module
    register_stop_handler,
    stop_event,
    unregister_stop_handler,
    wait_for_stop,
)

ThreadWorker = collections.namedtuple("ThreadWorker", ["thread", "future"])

_HAS_MAIN_MANAGER = False  # whether a manager of this process counts down to kills
# signal number -> the handlers of the managers that take it (called by one dispatcher).
_SIGNAL_HANDLERS: dict[int, set] = {}
_managers: dict[int, WorkerManager] = {}  # id of a manager's context -> the manager
_lock = threading.Lock()


def get_worker_manager() -> WorkerManager:
    """The WorkerManager whose worker this thread is (or that registered it).

    Raises:
      RuntimeError: this thread belongs to no WorkerManager (nodes of a launch have their
        controller instead; the stop functions of this module work there).
    """
    found = context.current_or_none()
    with _lock:
        manager = _managers.get(id(found)) if found is not None else None
    if manager is None:
        raise RuntimeError("This thread belongs to no WorkerManager: a node of a launched "
                           "program stops with lp.wait_for_stop() / lp.stop_event()")
    return manager


def _dispatch(sig: int, frame: Any) -> None:
    with _lock:
        handlers = list(_SIGNAL_HANDLERS.get(sig, ()))
    for handler in handlers:
        handler()


def _register_signal_handler(sig: int, handler: Callable[[], None]) -> None:
    with _lock:
        if sig not in _SIGNAL_HANDLERS:
            _SIGNAL_HANDLERS[sig] = set()
            try:
                signal.signal(sig, _dispatch)
            except ValueError:  # not the main thread: the signal is left as it is
                logging.warning("WorkerManager made outside the main thread: it does not "
                                "handle signal %s", signal.Signals(sig).name)
        _SIGNAL_HANDLERS[sig].add(handler)


def _remove_signal_handler(sig: int, handler: Callable[[], None]) -> None:
    with _lock:
        _SIGNAL_HANDLERS.get(sig, set()).discard(handler)


class WorkerManager:
    """Runs thread and process workers in named groups (see the module doc).

    Args:
      kill_main_thread: Launchpad's: kill this process after the workers when they do not
        stop; here this process is never killed, so it only says whether a SIGQUIT ends it.
      register_in_thread: make this thread one of the manager's (its code then sees the
        manager's stop, as `get_worker_manager()` and `lp.wait_for_stop()` do).
    """

    def __init__(self, kill_main_thread: bool = True, register_in_thread: bool = False):
        global _HAS_MAIN_MANAGER
        self._termination_notice_secs = -1.0
        with _lock:
            if not _HAS_MAIN_MANAGER:  # only the first manager counts down to kills
                self._termination_notice_secs = float(
                    lp_flags.value("lp_termination_notice_secs"))
                _HAS_MAIN_MANAGER = True
        self._kill_main_thread = kill_main_thread
        self._changed = threading.Condition()
        self._active_workers: dict[str, list] = collections.defaultdict(list)
        self._workers_count: dict[str, int] = collections.defaultdict(int)
        self._first_failure: BaseException | None = None
        self._thread_failure: BaseException | None = None
        self._stopping = False
        self._user_stops = 0
        self._context = context.standalone("worker-manager")
        self._context.add_stop_handler(self._stop_workers)
        with _lock:
            _managers[id(self._context)] = self
        _register_signal_handler(signal.SIGTERM, self._sigterm)
        _register_signal_handler(signal.SIGQUIT, self._sigquit)
        _register_signal_handler(signal.SIGINT, self._stop_by_user)
        # The thread that registered, and how to let its context go at the cleanup.
        self._registered = (threading.get_ident(), context.enter(self._context)
                            ) if register_in_thread else None

    # --- stopping ---------------------------------------------------------------------------

    def wait_for_stop(self, timeout_secs: float | None = None) -> bool:
        """Blocks until the manager stops (True) or `timeout_secs` pass (False)."""
        return self._context.stop_event.wait(timeout_secs)

    def stop_event(self) -> threading.Event:
        """The event set when the manager stops."""
        return self._context.stop_event

    def _sigterm(self) -> None:
        self._stop()

    def _sigquit(self) -> None:
        self._kill()
        if self._kill_main_thread:  # what SIGQUIT would have done without the manager
            signal.signal(signal.SIGQUIT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGQUIT)

    def _stop_by_user(self) -> None:
        self._user_stops += 1
        if self._user_stops > 1 and self._termination_notice_secs >= 0:
            self._kill()
            return
        terminals.say("stop requested: asking the workers to stop (Ctrl+C again kills them)")
        self._stop()

    def _stop(self) -> None:
        """Stops every worker: the stop event and handlers, SIGTERM to the processes, and,
        after the notice, SIGKILL."""
        self._context.notify_stop()

    def _stop_workers(self) -> None:  # the manager's context's stop handler
        with self._changed:
            self._stopping = True
            processes = [w for ws in self._active_workers.values() for w in ws
                         if not isinstance(w, ThreadWorker)]
        for process in processes:
            _signal(process, signal.SIGTERM)
        if self._termination_notice_secs > 0:
            threading.Timer(self._termination_notice_secs, self._kill_late).start()
        elif self._termination_notice_secs == 0:
            self._kill()

    def _kill_late(self) -> None:
        late = [label for label, ws in self._active_workers.items()
                for w in ws if _running(w)]
        if late:
            logging.error("Worker groups that did not stop in time: %s", sorted(set(late)))
            self._kill()

    def _kill(self) -> None:
        """Kills every process worker now (threads cannot be killed: each is named)."""
        with self._changed:
            workers = [(label, w) for label, ws in self._active_workers.items() for w in ws]
        for label, worker in workers:
            if isinstance(worker, ThreadWorker):
                if worker.thread.is_alive():
                    logging.warning("Worker %s (a thread) cannot be killed; it is left",
                                    label)
            else:
                _signal(worker, signal.SIGKILL)

    # --- workers ----------------------------------------------------------------------------

    def thread_worker(self, name: str, function: Callable[[], Any]) -> None:
        """Runs `function()` in a thread of group `name`, in the manager's context."""
        future: futures.Future = futures.Future()

        def run() -> None:
            context.enter(self._context)
            try:
                future.set_result(function())
            except BaseException as e:  # noqa: BLE001 - the manager's wait() reports it
                future.set_exception(e)
            self._ended(name, worker, future.exception())

        worker = ThreadWorker(threading.Thread(target=run, name=name, daemon=True), future)
        self._add(name, worker)
        worker.thread.start()

    def process_worker(self, name: str, command: Sequence[str],
                       env: dict[str, str] | None = None, **kwargs: Any) -> None:
        """Runs `command` as a process of group `name` (`kwargs` go to subprocess.Popen;
        `env`, as in Launchpad, is the whole environment)."""
        process = subprocess.Popen(command, env=env or {}, **kwargs)
        self._add(name, process)
        threading.Thread(target=self._watch, args=(name, process), daemon=True).start()

    def register_existing_process(self, name: str, pid: int) -> None:
        """Counts process `pid`, started elsewhere, as a worker of group `name`: waited for
        and stopped as the others are (how it ended cannot be known: it ends well)."""
        process = _Existing(pid)
        self._add(name, process)
        threading.Thread(target=self._watch, args=(name, process), daemon=True).start()

    def _watch(self, name: str, process: Any) -> None:
        code = process.wait()
        failure = RuntimeError(f"One of the workers exited with code {code}.") if code else None
        self._ended(name, process, failure)

    def _add(self, name: str, worker: Any) -> None:
        with self._changed:
            self._workers_count[name] += 1
            self._active_workers[name].append(worker)

    def _ended(self, name: str, worker: Any, failure: BaseException | None) -> None:
        with self._changed:
            self._active_workers[name].remove(worker)
            stop = failure is not None and not self._stopping and self._first_failure is None
            if stop:
                self._first_failure = failure
            if isinstance(worker, ThreadWorker) and self._thread_failure is None:
                self._thread_failure = failure
            self._changed.notify_all()
        if stop:
            logging.error("Worker of group %s failed: %s", name, failure)
            self._stop()

    # --- waiting ----------------------------------------------------------------------------

    def wait(self, labels_to_wait_for: Sequence[str] | None = None, raise_error: bool = True,
             return_on_first_completed: bool = False) -> None:
        """Blocks until the workers of groups `labels_to_wait_for` (default all) have ended,
        or with `return_on_first_completed` one of them.

        Raises:
          the first failure (a thread's exception; a RuntimeError for a process that
          exited non-zero), at once, unless `raise_error` is False; raised once.
        """
        def done() -> bool:
            if raise_error and self._first_failure is not None:
                return True
            labels = labels_to_wait_for or list(self._active_workers)
            if return_on_first_completed and any(
                    len(self._active_workers[label]) < self._workers_count[label]
                    for label in labels):
                return True
            return not any(self._active_workers[label] for label in labels)

        with self._changed:
            self._changed.wait_for(done)
            failure, self._first_failure = self._first_failure, (
                None if raise_error else self._first_failure)
        if raise_error and failure is not None:
            raise failure

    def join(self) -> None:
        self.wait()

    def stop_and_wait(self) -> None:
        """Stops every worker and waits for them all."""
        self._stop()
        self.wait(raise_error=False)

    def check_for_thread_worker_exception(self) -> None:
        """Raises the exception of a thread worker that has failed, if one has."""
        with self._changed:
            failure = self._thread_failure
        if failure is not None:
            raise failure

    def cleanup_after_test(self, test_case: Any) -> None:
        """Stops the workers, waits for them, and raises the first failure (a test's
        cleanup, Launchpad's)."""
        del test_case
        self._stop()
        for sig, handler in ((signal.SIGTERM, self._sigterm), (signal.SIGQUIT, self._sigquit),
                             (signal.SIGINT, self._stop_by_user)):
            _remove_signal_handler(sig, handler)
        self.wait(raise_error=False)
        with self._changed:
            failure, self._first_failure = self._first_failure, None
        with _lock:
            _managers.pop(id(self._context), None)
        if self._registered is not None and self._registered[0] == threading.get_ident():
            context.leave(self._registered[1])  # this thread is none of the manager's now
            self._registered = None
        if failure is not None:
            raise failure


class _Existing:
    """A process this one did not start, as a worker: waited for through a pidfd."""

    def __init__(self, pid: int):
        self.pid = pid
        self._fd = os.pidfd_open(pid)
        self._code: int | None = None

    def wait(self) -> int:
        select.select([self._fd], [], [])
        os.close(self._fd)
        self._code = 0
        return 0

    def poll(self) -> int | None:
        return self._code

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)


def _signal(process: Any, sig: int) -> None:
    try:
        process.send_signal(sig)
    except (ProcessLookupError, OSError):
        pass


def _running(worker: Any) -> bool:
    if isinstance(worker, ThreadWorker):
        return worker.thread.is_alive()
    return worker.poll() is None


__all__ = ["ThreadWorker", "WorkerManager", "get_worker_manager", "register_stop_handler",
           "stop_event", "unregister_stop_handler", "wait_for_stop"]
