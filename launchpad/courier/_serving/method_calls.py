"""How a server runs one call of its object's methods: within its call slots, in its context,
counted, and answered into the outbox of the stream that asked (or returned, to a caller of
this process: `run_here`).

At most `thread_pool_size` calls run at once, however many streams are open (each takes a
call slot). A method that returns a `concurrent.futures.Future` (a batched handler does) is
answered when the future completes, without holding a call slot meanwhile. A server can start
before its object exists (`serve` later): calls that arrive early wait for it, so a node can
publish its address before it builds the object that answers.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from launchpad.courier import errors, metrics
from launchpad.courier._process.threads import DaemonThreadPool
from launchpad.courier._serving import replies, served_methods
from launchpad.courier._wire import serialization


class MethodCalls:
    """Runs the calls of `obj`'s methods (see the module doc); `answered(call)` is told of
    each call answered, once its reply is in its outbox."""

    def __init__(self, obj: Any, thread_pool_size: int,
                 answered: Callable[[Any], None]):
        self.address = ""  # the server's, for errors; set when it starts
        self._name = ""  # what a caller's errors call the server ('': its address)
        self.metrics = metrics.CallMetrics()  # every answered call, by method
        self._obj = obj
        self._ready = threading.Event()
        if obj is not None:
            self._ready.set()
        self._answered = answered
        # Tokens of the calls that may run at once (a C-level queue: cheap on the hot path).
        self._call_slots: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(thread_pool_size):
            self._call_slots.put(None)
        self._context = contextvars.copy_context()
        self.workers: DaemonThreadPool | None = None

    def start(self, address: str, name: str = "") -> None:
        """Calls run from now on in the context of this thread (the server's starter), so
        code served by a node sees that node's context on every handler thread. A message's
        calls but its last run on workers: no more threads than calls may run at once, so a
        message of thousands of calls (a burst of futures) waits in the pool's queue, not in
        thousands of threads."""
        self.address = address
        self._name = name
        self._context = contextvars.copy_context()
        self.workers = DaemonThreadPool(self._call_slots.qsize(),
                                        thread_name_prefix="courier-worker")

    def serve(self, obj: Any) -> None:
        """Sets the object to serve; calls waiting for it proceed."""
        if obj is None:
            raise ValueError("Cannot serve None")
        self._obj = obj
        self._ready.set()

    def stop_waiting(self) -> None:
        """Calls waiting for an object to serve fail now (the server stops)."""
        self._ready.set()

    def close(self) -> None:
        """Drops the calls queued for workers (the server has stopped)."""
        if self.workers is not None:
            self.workers.shutdown(wait=False, cancel_futures=True)

    def run(self, frame: serialization.Frame, outbox: queue.SimpleQueue) -> None:
        """Runs a stream's call, its reply put in `outbox` (now, or when its Future is done)."""
        token = self._call_slots.get()
        try:
            self._context.copy().run(self._handle, frame, outbox)
        finally:
            self._call_slots.put(token)

    def run_here(self, name: str, args: tuple, kwargs: dict) -> Any:
        """Runs a call on this thread for a client of this process (direct_calls.py), as a
        stream's call runs: in the server's context, within its call slots, counted; its
        arguments copied by the caller. Returns its result, or raises what it raised."""
        started = time.perf_counter()
        slot = self._call_slots.get()
        try:
            result = self._context.copy().run(self._invoke, name, lambda: (args, kwargs),
                                              started)
        finally:
            self._call_slots.put(slot)
        if isinstance(result, concurrent.futures.Future):  # waited for without a slot
            return self._result_of(name, result, started)
        self.metrics.record(name, time.perf_counter() - started, False)
        return result

    def _handle(self, frame: serialization.Frame, outbox: queue.SimpleQueue) -> None:
        started = time.perf_counter()
        try:
            result = self._invoke(frame.name, lambda: replies.load_arguments(frame), started)
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the caller
            self._reply(outbox, frame, replies.error_frame(frame.call_id, e))
            return
        if isinstance(result, concurrent.futures.Future):
            result.add_done_callback(lambda f: self._reply_later(outbox, frame, f, started))
        else:
            self._reply(outbox, frame, replies.result_frame(frame.call_id, frame.name, result))
            self.metrics.record(frame.name, time.perf_counter() - started, False)

    def _invoke(self, name: str, arguments: Callable[[], tuple[tuple, dict]],
                started: float) -> Any:
        """What method `name` returns for `arguments()` (a Future: answered later); a
        failure is counted (under UNKNOWN_METHOD if there is no such method) and raised."""
        counted = name
        try:
            self._wait_for_object(name)
            counted = metrics.UNKNOWN_METHOD
            method = served_methods.method_of(self._obj, name, self._name or self.address)
            counted = name
            args, kwargs = arguments()
            return method(*args, **kwargs)
        except BaseException:
            self.metrics.record(counted, time.perf_counter() - started, True)
            raise

    def _reply_later(self, outbox: queue.SimpleQueue, call: serialization.Frame,
                     future: concurrent.futures.Future, started: float) -> None:
        self._reply(outbox, call, replies.future_frame(call.call_id, call.name, future))
        failed = future.cancelled() or future.exception() is not None
        self.metrics.record(call.name, time.perf_counter() - started, failed)

    def _reply(self, outbox: queue.SimpleQueue, call: serialization.Frame, frames: list) -> None:
        outbox.put(frames)
        self._answered(call)

    def _result_of(self, name: str, future: concurrent.futures.Future, started: float) -> Any:
        """What a direct call's future (a batched handler's) comes to, counted then."""
        try:
            result = replies.future_result(name, future)
        except BaseException:
            self.metrics.record(name, time.perf_counter() - started, True)
            raise
        self.metrics.record(name, time.perf_counter() - started, False)
        return result

    def _wait_for_object(self, name: str) -> None:
        if not self._ready.is_set():  # (a set event's wait still takes its lock)
            self._ready.wait()
        if self._obj is None:
            raise errors.ServerUnavailableError(
                f"Courier server at {self.address} stopped before serving {name!r}")
