"""The controller of a launched program: addresses, health, stop and wait.

One per launch, in the launching process (a courier service, so nodes in other processes
reach it the same way as nodes in this one)::

    node starts -> binds its port -> register(label, index, name, address)
    handle used -> address_of(label, index, name)  (answered as soon as the node registers)
    node ends   -> node_finished / node_failed      (fail fast: the first failure stops all)
    stop()      -> every node's stop event and stop handlers -> grace period -> terminate
                   what is left -> wait() returns (raising NodeFailedError if a node failed)

The controller owns the workers (threads, processes) its launcher started; `wait()` returns
only once each has finished or been ended. The launching process itself is never killed.
"""

from __future__ import annotations

import concurrent.futures
import secrets
import threading
import traceback

from absl import logging

from launchpad import context
from launchpad.courier import server as courier_server
from launchpad.courier.connection import settle
from launchpad.launch import ending, errors, process
from launchpad.launch.ending import NodeWorker
from launchpad.launch.registry import AddressRegistry
from launchpad.program import Program


class Controller:
    """Controls one launched program; returned by `lp.launch`.

    Use `wait()` to block until the program stops, `stop()` to stop it, or `with` to do both.
    """

    def __init__(self, program: Program, *, termination_notice_secs: float = 10.0):
        if termination_notice_secs < 0:
            raise ValueError(
                f"termination_notice_secs must be >= 0, got {termination_notice_secs}")
        self.program_name = program.name
        self._grace = termination_notice_secs
        self._token = secrets.token_hex(16)
        self._lock = threading.Lock()
        self._node_ended = threading.Condition(self._lock)
        # Every node that has an address, and the node the program runs it in (itself, or
        # the colocation holding it): those are what run, end, fail and restart.
        self._registry = AddressRegistry(program.name, {
            (inner.label, inner.index): (node.label, node.index)
            for node in program.get_all_nodes() for inner in node.all_nodes()})
        self._running = {(n.label, n.index) for n in program.get_all_nodes()}
        self._failure: errors.NodeFailedError | None = None
        self._workers: list[NodeWorker] = []
        self._contexts: list[context.NodeContext] = []
        self._stop_waiters: list[concurrent.futures.Future] = []
        self._finish_callbacks: list = []
        self._end_waiters: list[concurrent.futures.Future] = []
        self._ended_nodes = False
        self._restart_policies = program.restart_policies
        self._restarts: dict[tuple, int] = {}  # (label, index) -> restarts so far
        self._restart_timers: list[threading.Timer] = []
        self._stopping = threading.Event()
        self._finished = threading.Event()
        # Starts the processes of MultiProcessingColocation nodes run as threads here.
        self._process_starter = process.ChildProcessStarter(None, termination_notice_secs,
                                                            in_worker=False)
        self._server = courier_server.Server(_ControllerService(self), token=self._token,
                                             thread_pool_size=8)
        self.address = self._server.start()
        self.launcher_context = self.node_context(None, 0)
        context.add_process_context(self.launcher_context)

    # --- what launchers use -------------------------------------------------------------

    def node_context(self, label: str | None, index: int) -> context.NodeContext:
        """A context for code of this program running in this process (None: the launcher)."""
        node_context = context.NodeContext(
            program_name=self.program_name, label=label, index=index,
            controller_address=self.address, token=self._token, addresses=self,
            request_stop=self.stop, process_starter=self._process_starter,
            termination_notice_secs=self._grace)
        with self._lock:
            self._contexts.append(node_context)
            stopping = self._stopping.is_set()
        if stopping:
            node_context.notify_stop()
        return node_context

    @property
    def termination_notice_secs(self) -> float:
        return self._grace

    @property
    def token(self) -> str:
        """The program's secret: nodes' servers refuse calls without it."""
        return self._token

    def add_worker(self, worker: NodeWorker) -> None:
        with self._lock:
            self._workers.append(worker)

    def on_finish(self, callback) -> None:
        """Calls `callback()` once every node has ended, before `wait()` returns."""
        with self._lock:
            self._finish_callbacks.append(callback)

    def wait_for_node(self, name: str, timeout: float | None = None) -> bool:
        """Blocks until node `name` ('label/index') has ended (finished, or failed for good);
        False if `timeout` seconds passed first."""
        label, _, index = name.rpartition("/")
        unit = self._registry.check_node(label, int(index) if index.isdigit() else -1)
        with self._node_ended:
            return self._node_ended.wait_for(lambda: unit not in self._running, timeout)

    def pids(self) -> dict[str, int]:
        """'label/index' -> pid of each node's (current) process; nodes run as threads have
        none. For attaching a profiler or debugger."""
        with self._lock:
            return {w.name: w.pid for w in self._workers if getattr(w, "pid", 0)}

    def exit_codes(self) -> dict[str, int | None]:
        """'label/index' -> how each node's process (or thread) ended: 0 done, > 0 its exit
        code, < 0 the signal that killed it, None still running."""
        with self._lock:
            return {w.name: w.returncode for w in self._workers}

    def node_finished(self, label: str, index: int) -> None:
        """A node's code returned: the node is done; when every node is, the program is."""
        with self._lock:
            self._running.discard((label, index))
            self._node_ended.notify_all()
            self._registry.node_ended((label, index), f"node {label}/{index} has finished")
            all_done = not self._running
        if all_done:
            self.stop()

    def node_failed(self, label: str, index: int, reason: str,
                    node_traceback: str = "", cause: BaseException | None = None) -> None:
        """A node failed: unless the program is already stopping, the program stops and
        `wait()` raises NodeFailedError for the first node that failed."""
        name = f"{label}/{index}"
        if self._restart_if_allowed(label, index, reason):
            return
        with self._lock:
            self._running.discard((label, index))
            self._node_ended.notify_all()
            self._registry.node_ended((label, index), f"node {name} failed")
            restarts = self._restarts.get((label, index), 0)
            if restarts:
                reason += f" (after {restarts} restart{'s' if restarts > 1 else ''})"
            if self._stopping.is_set() or self._failure is not None:
                logging.warning("Node %s of %s failed while the program was stopping: %s",
                                name, self.program_name, reason)
                return
            self._failure = errors.NodeFailedError(self.program_name, name, reason,
                                                   node_traceback)
            self._failure.__cause__ = cause
        logging.error("Node %s of program %s failed: %s", name, self.program_name, reason)
        self.stop()

    def _restart_if_allowed(self, label: str, index: int, reason: str) -> bool:
        """Schedules a restart of the failed node if its group's policy allows one."""
        policy = self._restart_policies.get(label)
        with self._lock:
            restarts = self._restarts.get((label, index), 0)
            if policy is None or restarts >= policy.max_restarts or self._stopping.is_set():
                return False
            worker = next((w for w in self._workers if w.name == f"{label}/{index}"), None)
            if worker is None:
                return False
            self._restarts[(label, index)] = restarts + 1
            self._node_ended.notify_all()
            # Lookups of the node now wait for it to register again; its clients reconnect.
            self._registry.node_restarting((label, index))
            delay = policy.delay(restarts + 1)
            timer = threading.Timer(delay, self._restart, (worker,))
            timer.daemon = True
            self._restart_timers.append(timer)
        logging.warning("Node %s/%s of program %s failed: %s; restarting it in %gs "
                        "(restart %d of %d)", label, index, self.program_name, reason, delay,
                        restarts + 1, policy.max_restarts)
        timer.start()
        return True

    def _restart(self, worker: NodeWorker) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
        try:
            worker.restart()
        except Exception as e:  # noqa: BLE001 - a node that cannot restart has failed
            label, index = worker.name.rsplit("/", 1)
            self.node_failed(label, int(index), f"restart failed: {type(e).__name__}: {e}")

    def wait_for_restarts(self, name: str, count: int, timeout: float | None = None) -> bool:
        """Blocks until node `name` ('label/index') has been restarted `count` times by its
        group's policy; False if `timeout` seconds passed first."""
        label, _, index = name.rpartition("/")
        self._registry.check_node(label, int(index) if index.isdigit() else -1)
        key = (label, int(index))
        with self._node_ended:
            return self._node_ended.wait_for(lambda: self._restarts.get(key, 0) >= count,
                                             timeout)

    def restarts(self) -> dict[str, int]:
        """'label/index' -> how many times the node was restarted by its group's policy."""
        with self._lock:
            return {f"{lb}/{i}": n for (lb, i), n in self._restarts.items()}

    def node_raised(self, label: str, index: int, exc: BaseException) -> None:
        self.node_failed(label, index, f"{type(exc).__name__}: {exc}",
                         "".join(traceback.format_exception(exc)), exc)

    # --- addresses (the context.AddressBook of this program) ------------------------------

    def register(self, label: str, index: int, name: str, address: str) -> None:
        self._registry.register(label, index, name, address)

    def address_future(self, label: str, index: int, name: str,
                       timeout: float) -> concurrent.futures.Future:
        """A future of the node's address: set when it registers, failed after `timeout`."""
        return self._registry.future(label, index, name, timeout)

    def address_of(self, label: str, index: int, name: str, timeout: float) -> str:
        return self.address_future(label, index, name, timeout).result()

    # --- stop and wait --------------------------------------------------------------------

    def stop_future(self) -> concurrent.futures.Future:
        """A future set when the program starts stopping (for nodes in other processes)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if not self._stopping.is_set():
                self._stop_waiters.append(future)
                return future
        future.set_result(True)
        return future

    def end_future(self) -> concurrent.futures.Future:
        """A future set when the stop sequence has ended every node (a node process still
        alive then was missed, and ends itself)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if not self._ended_nodes:
                self._end_waiters.append(future)
                return future
        future.set_result(True)
        return future

    def stop(self) -> None:
        """Asks the program to stop; returns at once. Safe to call any number of times."""
        with self._lock:
            if self._stopping.is_set():
                return
            self._stopping.set()
            self._registry.program_stopping()
        threading.Thread(target=self._stop_sequence, name=f"lp-stop-{self.program_name}",
                         daemon=True).start()

    def kill(self) -> None:
        """Stops the program without a grace period: node processes are killed now (threads,
        which cannot be killed, get the stop event as usual)."""
        self.stop()
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            worker.kill()

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the program has stopped and every node has ended.

        Returns:
          True once the program has stopped; False if `timeout` seconds passed first.
        Raises:
          NodeFailedError: a node failed (the first one), with its traceback.
        """
        if not self._finished.wait(timeout):
            return False
        if self._failure is not None:
            raise self._failure
        return True

    def stop_and_wait(self) -> bool:
        """Stops the program and blocks until every node has ended (Launchpad's name).

        Raises:
          NodeFailedError: a node failed before the stop.
        """
        self.stop()
        return self.wait()

    @property
    def failure(self) -> errors.NodeFailedError | None:
        """The failure that stopped the program, if any."""
        return self._failure

    def __enter__(self) -> "Controller":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()
        if exc_type is None:
            self.wait()
        else:
            self._finished.wait()

    def _stop_sequence(self) -> None:
        with self._lock:
            contexts = list(self._contexts)
            stop_waiters, self._stop_waiters = self._stop_waiters, []
        for future in stop_waiters:
            settle(future, True)
        for node_context in contexts:
            node_context.notify_stop()
        self._end_workers()
        with self._lock:
            for node in list(self._running):
                self._registry.node_ended(node, "the program stopped")
            self._running.clear()
            self._node_ended.notify_all()
            callbacks = list(self._finish_callbacks)
            self._ended_nodes = True
            end_waiters, self._end_waiters = self._end_waiters, []
        for future in end_waiters:
            settle(future, True)
        self._server.stop()
        self._process_starter.close()
        for callback in callbacks:
            try:
                callback()
            except Exception:  # noqa: BLE001 - cleanup of one launcher must not block wait()
                logging.exception("Cleanup of program %s failed", self.program_name)
        context.remove_process_context(self.launcher_context)
        self._finished.set()


    def _end_workers(self) -> None:
        with self._lock:
            workers = list(self._workers)
            for timer in self._restart_timers:
                timer.cancel()
        ending.end_workers(workers, self._grace, f"of program {self.program_name}")


class _ControllerService:
    """The controller's methods that nodes in other processes may call."""

    def __init__(self, controller: Controller):
        self._controller = controller

    def register(self, label: str, index: int, name: str, address: str) -> None:
        self._controller.register(label, index, name, address)

    def address_of(self, label: str, index: int, name: str,
                   timeout: float) -> concurrent.futures.Future:
        return self._controller.address_future(label, index, name, timeout)

    def request_stop(self) -> None:
        self._controller.stop()

    def wait_for_stop(self) -> concurrent.futures.Future:
        return self._controller.stop_future()

    def wait_for_end(self) -> concurrent.futures.Future:
        return self._controller.end_future()

