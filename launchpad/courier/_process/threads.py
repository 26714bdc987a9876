"""Courier's threads: a pool that never holds up the interpreter's exit, and pollers.

`DaemonThreadPool` runs work handed to it. `Pollers` are threads that wait for events in one
place (a server's epoll, its completion queue) and each handle the event they take.


`concurrent.futures.ThreadPoolExecutor` joins its threads when the interpreter exits, so one
call stuck in user code (a handler blocked on a server that has stopped) keeps the process
alive for ever after its program has stopped. Courier runs user code on its pool threads
(handlers, batched functions), and a stopped server has already given each such call its grace
period and named it; so its threads are daemon threads: the process can end, and whatever a
stuck call holds ends with it.

The pool grows on demand up to `max_workers` and reuses idle threads, as ThreadPoolExecutor
does; it also runs work submitted while the interpreter exits (ThreadPoolExecutor refuses it),
which lets a program still stopping at exit finish in order.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any

from absl import logging

_STOP = None  # a work item that tells one idle thread to end


class DaemonThreadPool:
    """Runs submitted callables on daemon threads (see the module doc).

    Args:
      max_workers: at most this many threads run at once; further work waits for one.
      thread_name_prefix: names the threads (`prefix_N`), for stack dumps and profilers.
    """

    def __init__(self, max_workers: int, thread_name_prefix: str):
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self._max_workers = max_workers
        self._prefix = thread_name_prefix
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._shutdown = False

    def submit(self, fn: Callable[..., Any], /, *args: Any,
               **kwargs: Any) -> concurrent.futures.Future:
        """Runs `fn(*args, **kwargs)` on a pool thread; returns the future of its result.

        Raises:
          RuntimeError: the pool was shut down.
        """
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError(f"The {self._prefix} thread pool is shut down")
            self._work.put((future, fn, args, kwargs))
            if self._idle:
                self._idle -= 1  # that thread takes this item
                return future
            if self._threads < self._max_workers:
                self._threads += 1
                name = f"{self._prefix}_{self._threads - 1}"
                threading.Thread(target=self._serve, name=name, daemon=True).start()
        return future

    def shutdown(self, wait: bool = False, *, cancel_futures: bool = False) -> None:
        """Takes no more work; each thread ends once the work queued before has run.

        Args:
          wait: accepted for ThreadPoolExecutor's signature; a daemon pool never waits for
            its threads (that is its purpose).
          cancel_futures: cancel the work not yet started.
        """
        del wait
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
            threads = self._threads
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item is not _STOP:
                    item[0].cancel()
        for _ in range(threads):
            self._work.put(_STOP)

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is _STOP:
                return
            future, fn, args, kwargs = item
            del item
            settle = None
            if future.set_running_or_notify_cancel():
                try:
                    settle = (future.set_result, fn(*args, **kwargs))
                except BaseException as e:  # noqa: BLE001 - the future carries it to its owner
                    settle = (future.set_exception, e)
            del fn, args, kwargs  # hold nothing of the work while idle
            with self._lock:
                # Idle before the result is out: the owner's next submit reuses this thread.
                self._idle += 1
            if settle is not None:
                settle[0](settle[1])
            del future, settle


ENDED = object()  # what a Pollers' wait returns once its threads are to end


class Pollers:
    """Threads that all wait for events in one place, each handling the event it takes.

    A server's streams wait in one epoll or completion queue, not on a thread each: with a
    thread per stream, each message wakes one of thousands of threads, each to take the GIL,
    and idle ones cost too (a gRPC completion queue's waiter wakes every 200 ms to look for
    signals: 1,250 of them took a tenth of a core doing nothing). The thread that takes an
    event handles it itself, with no hand-off. A thread is added whenever the last one
    waiting takes an event, so that one blocked in a long call never holds up the next
    event, up to `max_threads`; and a thread that has handled its event ends if `spare`
    others wait already. So a burst of slow events (thousands of nodes registering) grows
    the threads, and they are gone as soon as it has passed: an idle timeout alone never
    ended them, each taking an event now and then.

    With `relief_secs`, no thread is added as an event is taken. An overseer thread adds
    one only when none has waited for `relief_secs` while the same events were being handled
    (none was taken meanwhile), and a thread ends once it has handled its event if another
    waits. So a server of quick calls from many streams runs them on one thread, one after
    another, woken only when none is ready, instead of waking a thread per message that must
    then take the GIL from the others (16 streams calling at once: 1.7x the calls, at 40% of
    the server's CPU per call); a call that blocks holds up the others for `relief_secs`.

    Args:
      name: the threads' name.
      wait: `wait()` returns the next event, or ENDED once the threads are to end (each one
        that waits then ends).
      handle: handles one event; what it raises is logged.
      ended: called once, by the last thread to end.
      max_threads: at most this many threads.
      spare: without `relief_secs`, a thread that has handled its event ends if this many
        others wait.
      relief_secs: see above; None adds a thread whenever the last one waiting takes an
        event.
    """

    def __init__(self, name: str, wait: Callable[[], Any], handle: Callable[[Any], None],
                 ended: Callable[[], None], max_threads: int, spare: int = 4,
                 relief_secs: float | None = None):
        self._name = name
        self._wait = wait
        self._handle = handle
        self._ended = ended
        self._max_threads = max_threads
        self._spare = 1 if relief_secs is not None else spare
        self._relief_secs = relief_secs
        self._lock = threading.Lock()
        self._overseer_wakes = threading.Condition(self._lock)
        self._overseer_asleep = False
        self._threads = 0
        self._waiting = 0
        self._taken = 0  # events taken so far
        self._over = False  # the last thread has ended

    def start(self) -> None:
        """Starts the first thread (and the overseer, with `relief_secs`)."""
        with self._lock:
            self._threads += 1
        self._add()
        if self._relief_secs is not None:
            threading.Thread(target=self._oversee, name=f"{self._name}-overseer",
                             daemon=True).start()

    def _add(self) -> None:
        threading.Thread(target=self._run, name=self._name, daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._waiting += 1
            event = self._wait()
            with self._lock:
                self._waiting -= 1
                self._taken += 1
                if event is ENDED:
                    break
                more = (not self._waiting and self._threads < self._max_threads
                        and self._relief_secs is None)
                if more:
                    self._threads += 1
                elif not self._waiting and self._overseer_asleep:
                    self._overseer_wakes.notify()
            if more:
                self._add()  # so that a next event never waits for a thread
            try:
                self._handle(event)
            except Exception:  # noqa: BLE001 - one event's failure ends no thread
                logging.exception("Courier %s thread failed on an event", self._name)
            del event
            with self._lock:
                if self._waiting >= self._spare:
                    break
        with self._lock:
            self._threads -= 1
            last = self._threads == 0
            if last:
                self._over = True
                self._overseer_wakes.notify()
        if last:
            self._ended()

    def _oversee(self) -> None:
        """Adds a thread when none has waited for `relief_secs` and no event was taken
        meanwhile (see the class doc). Asleep while a thread waits; awake, it looks once per
        `relief_secs`, so a busy server wakes it that often, not once per event."""
        while True:
            with self._lock:
                while self._waiting and not self._over:
                    self._overseer_asleep = True
                    self._overseer_wakes.wait()
                    self._overseer_asleep = False
                if self._over:
                    return
                taken = self._taken
                self._overseer_wakes.wait(self._relief_secs)
                add = (not self._waiting and self._taken == taken and not self._over
                       and self._threads < self._max_threads)
                if add:
                    self._threads += 1
            if add:
                self._add()
