"""local_mt: every node of the program is a thread of the launching process.

Each thread runs the node runner's thread mode (runner.run_in_thread): the node in its own
context, reporting how it ended to the controller. A thread cannot be killed: a node that
ignores the stop event past the grace period is left behind, with a warning naming it.
"""

from __future__ import annotations

import threading

import cloudpickle

from launchpad.launch.local import live_status
from launchpad.launch.node_process import runner
from launchpad.launch.runtime import serialization
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.ending import NodeWorker
from launchpad.launch.runtime.launcher import Launcher, Plan
from launchpad.nodes.base import Node
from launchpad.program import Program


class ThreadWorker(NodeWorker):
    """A node running in a thread of this process."""

    spawned_at = None  # its runner reports the start before any of the node's code runs

    def __init__(self, controller: Controller, node: Node):
        self.name = node.name
        self._controller = controller
        self._node = node
        self._context = controller.node_context(node.label, node.index)
        self.returncode: int | None = None
        self.attempt = 0
        self.ended_by_launcher = False  # a thread is never ended from outside
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._ended_unstarted = False  # the program ended before its thread was started
        self._thread = self._new_thread()

    def _new_thread(self) -> threading.Thread:
        return threading.Thread(target=self._run, daemon=True,
                                name=f"lp:{self._controller.program_name}:{self.name}")

    def start(self) -> None:
        """Starts the node's thread, unless the program has ended already (a node of it
        failed while the launcher was still starting the others)."""
        with self._lock:
            if not self._ended_unstarted:
                self._thread.start()

    def restart(self) -> None:
        self.returncode = None
        self.attempt += 1
        self._thread = self._new_thread()
        self._thread.start()

    def _run(self) -> None:
        try:
            error = runner.run_in_thread(self._node, self._context)
        except BaseException as e:  # noqa: BLE001 - the controller could not be told it started
            error = e
        self.returncode = 0 if error is None else 1
        self._error = error
        self._controller.worker_ended(self)

    def describe_end(self) -> str:
        """Why the thread's node failed, if its report never reached the controller."""
        error = self._error
        return "finished" if error is None else f"{type(error).__name__}: {error}"

    def join(self, timeout: float) -> bool:
        with self._lock:
            if self._thread.ident is None:  # never started: it never will be
                self._ended_unstarted = True
                return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def retire(self) -> None:
        self._context.notify_stop()

    def terminate(self) -> bool:
        return False

    def kill(self) -> None:
        """A thread cannot be killed: it ends when its node's code returns."""


class ThreadsLauncher(Launcher):
    """local_mt: every node a thread of the launching process."""

    name = "local_mt"
    where_nodes_run = "a thread of this process"
    recorded = True
    live_status = True
    serialize_by_default = False  # (test_mt pickles each node first, as a process would)

    def start(self, plan: Plan, controller: Controller) -> None:
        serialize = plan.options.serialize_py_nodes
        start_threads(plan.program, controller, self.serialize_by_default if serialize is None
                      else serialize)
        if plan.options.live_status:
            live_status.start(controller)


def start_threads(program: Program, controller: Controller, serialize: bool) -> None:
    """Starts one thread per node of `program` under `controller`; with `serialize`, each
    node is pickled and unpickled first, as a process launcher would."""
    nodes = program.get_all_nodes()
    for node in nodes:
        for inner in node.all_nodes():
            reason = inner.needs_own_process()
            if reason:
                raise ValueError(f"Node {inner.name} cannot run as a thread: {reason}. Launch "
                                 "the program with local_mp (or test_mp)")
    def start(nodes: list) -> None:
        if serialize:  # unpicklable nodes fail here, named
            nodes = [cloudpickle.loads(serialization.pickle_node(node, node.label, node.name,
                                                                 threads=True))
                     for node in nodes]
        workers = [ThreadWorker(controller, node) for node in nodes]
        for worker in workers:
            controller.add_worker(worker)
        for worker in workers:
            worker.start()

    start(nodes)
    controller.scaling.start_nodes = start
