"""`ReplicatedNode`: a TensorFlow trainer replicated by `launchpad.replicator`, as program nodes.

Added to a program, it becomes one group of tasks, each a node (a process under local_mp):

    mode="sync",  num_workers=N: label/0 .. label/N-1 are TF "worker" tasks; label/0 is chief
    mode="async", num_workers=N, num_ps=P: label/0 is the "chief" (the coordinator), then N
                  "worker" tasks and P "ps" (parameter server) tasks

How a task runs: register a TensorFlow server port with the controller (held by the task until
it ends, so that no other process takes it before TensorFlow binds it: replicator/ports.py),
wait for every other task's (naming any that does not come within `startup_timeout_secs`),
then build the Replicator on the cluster those addresses make. Worker and ps tasks of async
training only serve TensorFlow. The others build the trainer, `cls(replicator, *args,
**kwargs)`, inside `replicator.scope()` (handles in the arguments become clients first) and
serve its public methods with courier, like a CourierNode. With one sync worker there is no
cluster: the task replicates over its own `devices`, and runs under local_mt too.
(TensorFlow's cluster servers listen on every interface and know nothing of the launch's
token: TensorFlow has no setting for either. The trainer's courier server binds and checks
as every node's does.)

Who drives training:
* the trainer has `run()`: every sync worker runs it (the same steps, in lock-step) and the
  node is done when the chief's returns; calls through the handle reach the chief only (use
  them to read, e.g. `get_variables()`);
* it has none: the handle drives it. In sync training a call to the chief is made on every
  worker, in the same order everywhere, and the chief's result is returned, so `step()`
  through the handle runs one replicated step.

Stopping: TensorFlow ignores SIGTERM in its processes, and a sync worker can wait forever in
a collective whose peer has stopped. So each task hands the trainer the stop as usual (stop
event, stop handlers) and gives it until the grace period is nearly over to return; then the
task ends, and with it (as a process) everything TensorFlow started.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from absl import logging

from launchpad import context, courier
from launchpad.nodes import base, dereference, handles, running
from launchpad.nodes.courier.node import (
    CourierHandle,
    client_options,
    run_or_wait,
    server_options,
    serving,
)

_TF_ADDRESS = "tf"  # the name each task registers its TensorFlow server port under
# Of the grace period, what a stopping task keeps for ending its process after its trainer.
_EXIT_MARGIN_SECS = 1.0


@dataclasses.dataclass
class _Plan:
    """What every task of one ReplicatedNode knows: the trainer and the cluster's shape."""

    cls: Callable[..., Any]
    args: tuple
    kwargs: dict
    mode: str
    roles: list[tuple[str, int]]  # (TF job, task index) of each task, in node order
    devices: int | Sequence[str] | None
    startup_timeout_secs: float
    server_kwargs: dict
    mesh: dict | None = None  # mesh mode (launchpad/replicator/mesh.py): over every worker
    layouts: dict | None = None
    first_index: int = -1  # the node index of task 0 in the group, set when added

    @property
    def is_cluster(self) -> bool:
        return len(self.roles) > 1

    def arguments(self, role_index: int) -> Any:
        """What task `role_index` receives: the trainer's arguments where it builds the
        trainer (every sync worker, the async chief); nothing where it only serves TF."""
        builds = self.mode == "sync" or self.roles[role_index][0] == "chief"
        return (self.args, self.kwargs) if builds else ()

    def runs(self, role_index: int) -> str:
        name = base.name_of(self.cls)
        if not self.is_cluster:
            return name
        task_type = self.roles[role_index][0]
        chief = self.mode == "sync" and role_index == 0
        return f"{name} ({task_type}, chief)" if chief else f"{name} ({task_type})"


class ReplicatedNode(base.Node):
    """A trainer, `cls(replicator, *args, **kwargs)`, replicated over devices and workers.

    Args:
      cls: the trainer class (or factory). Its first argument is the
        `launchpad.replicator.Replicator`; it is called inside `replicator.scope()`.
      num_workers: worker tasks (processes); 1 trains in one process over `devices`.
      mode: "sync" (all-reduce over every worker's replicas each step) or "async" (a chief
        schedules steps on the workers; variables live on the parameter servers).
      devices: devices per worker: None (its GPUs, else its CPU), a count (GPUs, or logical
        CPU devices with one worker) or device names.
      num_ps: parameter-server tasks (async only; default 1).
      mesh, layouts: mesh mode (sync only, without `devices`): the trainer's weights split
        over a mesh of devices, whose size the workers divide equally among them (each its
        GPUs, else logical devices of its CPU); see `Replicator`.
      startup_timeout_secs: how long a task waits for the others to come up.
      courier_kwargs, courier_client_kwargs: as for CourierNode.

    The handle reaches the chief's trainer (see the module doc for who drives the steps).
    """

    def __init__(self, cls: Callable[..., Any], *args, num_workers: int = 1,
                 mode: str = "sync", devices: int | Sequence[str] | None = None,
                 num_ps: int | None = None, startup_timeout_secs: float = 120.0,
                 mesh: dict | None = None, layouts: dict | None = None,
                 courier_kwargs: dict | None = None,
                 courier_client_kwargs: dict | None = None, **kwargs):
        super().__init__()
        if not callable(cls):
            raise TypeError(f"ReplicatedNode needs a trainer class, got {cls!r}")
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers must be an int >= 1, got {num_workers!r}")
        if mode not in ("sync", "async"):
            raise ValueError(f"mode must be 'sync' or 'async', got {mode!r}")
        if mode == "sync" and num_ps:
            raise ValueError("num_ps is for mode='async': sync training has no parameter "
                             "servers")
        num_ps = (1 if num_ps is None else num_ps) if mode == "async" else 0
        if mode == "async" and (not isinstance(num_ps, int) or num_ps < 1):
            raise ValueError(f"num_ps must be an int >= 1, got {num_ps!r}")
        if (mesh is not None or layouts is not None) and (mode != "sync" or devices is not None):
            raise ValueError("mesh= is for mode='sync' without devices=: the mesh's size says "
                             "how many devices, which the workers divide among them")
        if startup_timeout_secs <= 0:
            raise ValueError(f"startup_timeout_secs must be positive, got "
                             f"{startup_timeout_secs}")
        roles = [("worker", i) for i in range(num_workers)]
        if mode == "async":
            roles = [("chief", 0), *roles, *(("ps", i) for i in range(num_ps))]
        self._plan = _Plan(cls, args, kwargs, mode, roles, devices, startup_timeout_secs,
                           server_options(courier_kwargs), mesh, layouts)
        self._client_kwargs = client_options(courier_client_kwargs)
        self._tasks = [self] + [_ReplicaTask(self._plan, i) for i in range(1, len(roles))]

    def bind_to_program(self, program: Any, label: str, index: int) -> None:
        super().bind_to_program(program, label, index)
        self._plan.first_index = index

    def companion_nodes(self) -> list[base.Node]:
        return self._tasks[1:]

    def create_handle(self) -> handles.Handle:
        return CourierHandle(self, self._client_kwargs)

    def default_label(self) -> str:
        return "trainer"

    def arguments(self) -> Any:
        return self._plan.arguments(0)

    def runs(self) -> str:
        return self._plan.runs(0)

    def needs_own_process(self) -> str | None:
        return _own_process_reason(self._plan)

    def run(self) -> None:
        _run_task(self._plan, 0)

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "_tasks": []}  # each task pickles on its own


class _ReplicaTask(base.Node):
    """Task `role_index` (> 0) of a ReplicatedNode: added to the program with it."""

    def __init__(self, plan: _Plan, role_index: int):
        super().__init__()
        self._plan = plan
        self._role_index = role_index

    def create_handle(self) -> handles.Handle:
        return handles.UnservedHandle(self)

    def default_label(self) -> str:
        return "trainer"

    def arguments(self) -> Any:
        return self._plan.arguments(self._role_index)

    def kind(self) -> str:
        return "ReplicatedNode"

    def runs(self) -> str:
        return self._plan.runs(self._role_index)

    def needs_own_process(self) -> str | None:
        return _own_process_reason(self._plan)

    def run(self) -> None:
        _run_task(self._plan, self._role_index)


def _own_process_reason(plan: _Plan) -> str | None:
    if plan.is_cluster:
        return ("it is a task of a TensorFlow cluster (a ReplicatedNode with num_workers > 1 or "
                "mode='async'), and TensorFlow allows one cluster task per process")
    return None


# --- running a task ------------------------------------------------------------------------


def _task_name(plan: _Plan, label: str, role_index: int) -> str:
    task_type, task_index = plan.roles[role_index]
    return f"{label}/{plan.first_index + role_index} ({task_type} {task_index})"


def _cluster_of(plan: _Plan, node: context.NodeContext, role_index: int, port: int) -> Any:
    """Registers this task's TensorFlow port, then waits for every task's."""
    from launchpad.replicator.cluster import Cluster
    node.controller.register(node.label, node.index, _TF_ADDRESS, node.endpoint(port))
    deadline = time.monotonic() + plan.startup_timeout_secs
    jobs: dict[str, list[str]] = {}
    for other, (task_type, _) in enumerate(plan.roles):
        try:
            address = node.controller.resolve(node.label, plan.first_index + other, _TF_ADDRESS,
                                              max(0.0, deadline - time.monotonic()))
        except TimeoutError as e:
            raise TimeoutError(
                f"Task {_task_name(plan, node.label, other)} of ReplicatedNode "
                f"{node.label!r} did not come up within {plan.startup_timeout_secs:g} s") from e
        jobs.setdefault(task_type, []).append(address)
    task_type, task_index = plan.roles[role_index]
    return Cluster(jobs, task_type, task_index)


def _run_task(plan: _Plan, role_index: int) -> None:
    if not plan.is_cluster:
        _run_replicator(plan, role_index, None)
        return
    from launchpad.replicator.ports import ReservedPort
    with ReservedPort() as tf_port:  # held while the task runs: see ports.py
        _run_replicator(plan, role_index,
                        _cluster_of(plan, context.current(), role_index, tf_port.port))


def _run_replicator(plan: _Plan, role_index: int, cluster: Any) -> None:
    """Runs this task's part: serving TensorFlow only (an async worker or ps), or the trainer
    on a Replicator of `cluster` (None: this task's own devices), served by courier."""
    node = context.current()
    from launchpad.replicator import replicator as replicator_lib
    if cluster is not None and cluster.mode == "async" and not cluster.is_chief:
        replicator_lib.serve_task(cluster)  # serves the chief until this process ends
        node.stop_event.wait()
        return
    with serving(node, **plan.server_kwargs) as server:
        replicator = replicator_lib.Replicator(plan.devices, cluster, plan.startup_timeout_secs,
                                               mesh=plan.mesh, layouts=plan.layouts)
        with replicator.scope():
            trainer = plan.cls(replicator, *dereference.dereference_all(plan.args),
                               **dereference.dereference_all(plan.kwargs))
        runs = isinstance(trainer, running.Runnable)
        if role_index == 0 and not runs and cluster is not None and cluster.mode == "sync":
            server.serve(_ReplayOnPeers(trainer, [
                node.client_of(node.label, plan.first_index + other)
                for other in range(1, len(plan.roles))]))
        else:
            server.serve(trainer)
        run_or_wait(functools.partial(_run_until_stopped, trainer.run, node, _peer_is_gone)
                    if runs else None, node)


def _peer_is_gone(error: BaseException) -> bool:
    """Whether `error` is how a TensorFlow step fails when another task of its cluster ended
    (its collective or remote call was aborted)."""
    import tensorflow as tf
    return isinstance(error, (tf.errors.UnavailableError, tf.errors.AbortedError,
                              tf.errors.CancelledError))


def _run_until_stopped(run: Callable[[], Any], node: context.NodeContext,
                       expected_at_stop: Callable[[BaseException], bool]) -> None:
    """Runs `run()`; once the program stops, waits for it only until the grace period is
    nearly over (a TensorFlow step can block forever on a peer that has stopped), then
    returns, which ends the task. An error `expected_at_stop` (a peer that stopped first)
    raised after the stop ends the task quietly; any other error is the node's failure."""
    done, woken = threading.Event(), threading.Event()
    raised: list[BaseException] = []

    def target():
        try:
            run()
        except BaseException as e:  # noqa: BLE001 - raised again in the node's thread
            raised.append(e)
        finally:
            done.set()
            woken.set()

    threading.Thread(target=target, name="lp-trainer-run", daemon=True).start()
    node.add_stop_handler(woken.set)
    woken.wait()
    with contextlib.suppress(ValueError):  # it ran already if the program is stopping
        node.remove_stop_handler(woken.set)
    if not done.is_set():
        budget = max(0.0, node.termination_notice_secs - _EXIT_MARGIN_SECS)
        if not done.wait(budget):
            logging.warning("The trainer of %s did not return within %.3g s of the stop; "
                            "ending the task without it", node.name, budget)
            return
    if raised and node.stop_event.is_set() and expected_at_stop(raised[0]):
        logging.info("The trainer of %s ended at the stop: %s", node.name, raised[0])
    elif raised:
        raise raised[0]


class _ReplayOnPeers:
    """The chief's face of a sync trainer that the handle drives: each call runs on every
    worker (the peers through courier, at once), one call at a time, so every worker makes
    the same replicated steps in the same order; the chief's result is returned."""

    def __init__(self, trainer: Any, peers: list[courier.Client]):
        self._trainer = trainer
        self._peers = peers
        self._lock = threading.Lock()
        for name in courier.public_methods(trainer):
            if name != "__call__":
                setattr(self, name, functools.partial(self._replay, name))

    def _replay(self, name: str, *args, **kwargs) -> Any:
        with self._lock:
            pending = [getattr(peer.futures, name)(*args, **kwargs) for peer in self._peers]
            result = getattr(self._trainer, name)(*args, **kwargs)
            for future in pending:
                future.result()
            return result
