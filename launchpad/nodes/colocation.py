"""Colocation nodes: several nodes run as one node of the program.

`MultiThreadingColocation(nodes)` runs each node in a thread of its own process;
`MultiProcessingColocation(nodes)` runs each in a child process of its own. Either is added to
the program as one node (one process under local_mp, one thread under local_mt); the nodes it
holds are not added themselves. Their handles - from `node.create_handle()` or
`colocation.add_node(node)` - work as usual: colocated node i of colocation `label/index` is
node `label/index/i` of the program, with its own context and address. Colocations nest.

Outside any launch (Launchpad's unit tests call `colocation.run()` themselves), a
MultiThreadingColocation runs its nodes as threads in the standalone context, and a
MultiProcessingColocation each node in a child process (`python -m launchpad.launch
--standalone`, its node in a private file, a private temporary folder of its own).
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent import futures
from typing import Any

import cloudpickle
from absl import logging

from launchpad import context
from launchpad.nodes import base, handles, running
from launchpad.nodes.errors import ColocationError
from launchpad.program import Program, RestartPolicy


class _Colocation(base.Node):
    """What both colocations share: the nodes they hold and their names in the program."""

    def __init__(self, nodes: Sequence[base.Node]):
        super().__init__()
        self._nodes: list[base.Node] = []
        for node in nodes:
            self.add_node(node)

    def add_node(self, node: base.Node) -> handles.Handle:
        """Adds `node` to this colocation (before the colocation joins a program); returns
        its handle."""
        if not isinstance(node, base.Node):
            raise TypeError(f"{type(self).__name__} holds launchpad nodes, got {node!r}")
        if node.is_added() or any(node is n for n in self._nodes):
            raise ValueError(f"{node!r} is already in a program or a colocation")
        if self.is_added():
            raise ValueError(f"Nodes cannot be added to {self!r} once it is in a program")
        if node.companion_nodes():
            raise ValueError(f"{node!r} is several nodes (one per task) and cannot be "
                             "colocated; add it to the program itself")
        self._nodes.append(node)
        self.addresses.extend(node.addresses)  # bound with the colocation's, as Launchpad's
        return node.create_handle()

    @property
    def nodes(self) -> list[base.Node]:
        return list(self._nodes)

    def bind_to_program(self, program: "Program", label: str, index: int) -> None:
        super().bind_to_program(program, label, index)
        for i, node in enumerate(self._nodes):
            node.bind_to_program(program, f"{label}/{index}", i)

    def inner_nodes(self) -> list[base.Node]:
        return list(self._nodes)

    def create_handle(self) -> handles.Handle:
        return handles.UnservedHandle(self)

    def default_label(self) -> str:
        return "colocation"

    def _check_not_empty(self) -> None:
        if not self._nodes:
            raise ValueError(f"{self!r} holds no nodes")


class MultiThreadingColocation(_Colocation):
    """Runs several nodes as threads of one process.

    The colocation ends when every node has ended, or, with `return_on_first_completed`, when
    the first one does. A node that raises fails the colocation (and so, by default, the
    program) with a ColocationError naming it.
    """

    def __init__(self, nodes: Sequence[base.Node], return_on_first_completed: bool = False):
        super().__init__(nodes)
        self._return_on_first_completed = return_on_first_completed

    def heavy_imports(self) -> tuple[str, ...]:
        """Its nodes' (they run in its process)."""
        modules = {m for node in self._nodes for m in node.heavy_imports()}
        return tuple(sorted(modules.union(super().heavy_imports())))

    def run(self) -> None:
        self._check_not_empty()
        with running.running_context() as parent:
            self._run_threads(parent)

    def _run_threads(self, parent: context.NodeContext) -> None:
        ended: queue.SimpleQueue = queue.SimpleQueue()

        def run(node: base.Node, node_context: context.NodeContext) -> None:
            ended.put((node, running.run_in_context(node, node_context)))

        for node in self._nodes:
            threading.Thread(target=run, args=(node, parent.child(node.label, node.index)),
                             name=f"lp:{parent.program_name}:{node.name}", daemon=True).start()
        for _ in self._nodes:
            node, error = ended.get()
            if error is not None:
                raise ColocationError(f"colocated node {node.name} failed: "
                                      f"{type(error).__name__}: {error}") from error
            if self._return_on_first_completed:
                return


class MultiProcessingColocation(_Colocation):
    """Runs several nodes as child processes of one node.

    A node whose process fails is started again, up to `num_retries_on_failure` times in all
    (as in Launchpad; the budget is kept as an lp.RestartPolicy, the one way retries are
    said); then the colocation fails with a ColocationError naming it, after its other
    processes are ended. The colocation ends when every process has ended well.
    """

    def __init__(self, nodes: Sequence[base.Node], num_retries_on_failure: int = 0):
        super().__init__(nodes)
        if not isinstance(num_retries_on_failure, int) or num_retries_on_failure < 0:
            raise ValueError(f"num_retries_on_failure must be an int >= 0, got "
                             f"{num_retries_on_failure!r}")
        self._retries = RestartPolicy(max_restarts=num_retries_on_failure, backoff_secs=0.0)

    def run(self) -> None:
        self._check_not_empty()
        with running.running_context() as parent:
            if parent.process_starter is None:
                self._run_standalone()
            else:
                self._run_children(parent)

    def _run_children(self, parent: context.NodeContext) -> None:
        starter = parent.process_starter
        ended: queue.SimpleQueue = queue.SimpleQueue()
        parent.add_stop_handler(lambda: ended.put(None))
        children: dict[Any, base.Node] = {}
        for node in self._nodes:
            child = starter.start(node, parent.child(node.label, node.index), ended.put)
            children[child] = node
        try:
            self._wait(children, ended, parent)
        finally:
            starter.end(list(children), parent.stop_event.is_set())

    def _wait(self, children: dict, ended: queue.SimpleQueue,
              parent: context.NodeContext) -> None:
        running = set(children)
        retries = 0
        while running:
            child = ended.get()
            if child is None:  # the program stops: each child stops by itself
                continue
            running.discard(child)
            if child.returncode == 0 or parent.stop_event.is_set():
                continue
            reason, node_traceback, exception = child.failure()
            if retries < self._retries.max_restarts:
                retries += 1
                if parent.stop_event.wait(self._retries.delay(retries)):
                    continue
                child.restart()
                running.add(child)
                continue
            error = ColocationError(
                f"colocated node {children[child].name} failed: {reason}; "
                f"{self._budget_spent()}" + (f"\n{node_traceback}" if node_traceback else ""))
            raise error from exception

    def _budget_spent(self) -> str:
        return f"num_retries_on_failure (={self._retries.max_restarts}) is reached."

    def _run_standalone(self) -> None:
        """Each node in a child process of this one, all at once; a failed one is started
        again while the retries last (one budget for all, as in Launchpad)."""
        retries = [0]
        lock = threading.Lock()
        with futures.ThreadPoolExecutor(len(self._nodes)) as pool:
            runs = [pool.submit(self._run_standalone_child, node, retries, lock)
                    for node in self._nodes]
            for run in futures.as_completed(runs):
                run.result()

    def _run_standalone_child(self, node: base.Node, retries: list, lock: threading.Lock):
        handle, path = tempfile.mkstemp(prefix="launchpad-node-")  # this user's only
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(cloudpickle.dumps(node))
            while True:
                own_tmp = tempfile.mkdtemp(prefix="launchpad-child-")
                try:
                    process = subprocess.Popen(
                        [sys.executable, "-m", "launchpad.launch", "--standalone", path],
                        env={**os.environ, "TMPDIR": own_tmp})
                    code = process.wait()
                finally:
                    shutil.rmtree(own_tmp, ignore_errors=True)
                if code == 0:
                    return
                with lock:
                    if retries[0] >= self._retries.max_restarts:
                        raise ColocationError(f"colocated node {node!r} exited with code "
                                              f"{code}; {self._budget_spent()}")
                    retries[0] += 1
                logging.warning("Colocated node %r (pid %s) exited with code %s; starting "
                                "it again", node, process.pid, code)
        finally:
            os.unlink(path)
