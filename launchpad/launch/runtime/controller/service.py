"""The controller protocol (control.py), served: what each method means is said there.

Each method hands its call to the controller's parts (the registry, the supervisor, the node
book); methods that wait return a Future, which courier answers when it completes, so a
waiting call holds no server thread. Every argument is checked against the type its method
declares before anything is done with it: a call of another type (another version of the
protocol, a bug) gets a TypeError naming the argument, and nothing of it is kept.
"""

from __future__ import annotations

import concurrent.futures
import functools
import inspect
import typing
from typing import TYPE_CHECKING

import cloudpickle
from absl import logging

from launchpad import control, telemetry
from launchpad.launch.runtime.controller.program_change import ProgramPlan
from launchpad.launch.runtime.controller.registry import AddressRegistry
from launchpad.launch.runtime.controller.supervisor import Supervisor
from launchpad.program import Program

if TYPE_CHECKING:
    from launchpad.launch.runtime.controller import Controller


def _of_type(value: object, expected: type) -> bool:
    """Whether `value` is what a parameter annotated `expected` takes (a bool is not an
    int; an int is a float, as in annotations)."""
    if expected is float:
        expected = (int, float)
    if expected is not bool and isinstance(value, bool):
        return False
    return isinstance(value, expected)


def _checked(method: typing.Callable) -> typing.Callable:
    """`method`, refusing calls whose arguments are not of the types it declares."""
    signature = inspect.signature(method)
    hints = typing.get_type_hints(method)

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        arguments = signature.bind(self, *args, **kwargs).arguments
        for name, value in list(arguments.items())[1:]:
            if not _of_type(value, hints[name]):
                raise TypeError(f"The controller protocol's {method.__name__} takes {name} as "
                                f"{hints[name].__name__}, not {type(value).__name__}")
        return method(self, *args, **kwargs)

    return call


def _checked_methods(cls: type) -> type:
    """Checks the arguments of every public method of `cls` (see `_checked`)."""
    for name, method in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(method):
            setattr(cls, name, _checked(method))
    return cls


def _entries(values: list, method: str, types: tuple[type, ...]) -> list[tuple]:
    """The entries of a batched call, each checked against `types`.

    Raises:
      TypeError: naming the first entry that is not, and nothing of the call is kept.
    """
    entries = []
    for i, entry in enumerate(values):
        if (not isinstance(entry, (list, tuple)) or len(entry) != len(types)
                or not all(_of_type(v, t) for v, t in zip(entry, types, strict=True))):
            raise TypeError(f"The controller protocol's {method} takes entries of "
                            f"({', '.join(t.__name__ for t in types)}); entry {i} is "
                            f"{entry!r:.200}")
        entries.append(tuple(entry))
    return entries


@_checked_methods
class ControllerService:
    """The controller protocol, served (see control.py for what each method means): the
    addresses from the controller's registry, the runs' reports to its supervisor, the rest
    through the controller's public methods."""

    def __init__(self, controller: "Controller", registry: AddressRegistry,
                 supervisor: Supervisor):
        self._controller = controller
        self._registry = registry
        self._supervisor = supervisor

    def hello(self, version: int) -> int:
        if version != control.PROTOCOL_VERSION:
            logging.error("A process speaking controller protocol version %s called the "
                          "controller of %s (version %s)", version,
                          self._controller.program_name, control.PROTOCOL_VERSION)
        return control.PROTOCOL_VERSION

    def register(self, label: str, index: int, name: str, address: str,
                 host_id: str) -> None:
        self._registry.register(label, index, name, address, host_id)

    def host_of(self, label: str, index: int, name: str) -> str:
        return self._registry.host_of(label, index, name)

    def resolve(self, label: str, index: int, name: str,
                timeout: float) -> concurrent.futures.Future:
        return self._registry.future(label, index, name, timeout)

    def node_started(self, label: str, index: int, instance: str, host: str, pid: int,
                     heartbeats: bool) -> None:
        self._supervisor.started(self._registry.check_node(label, index), instance, host, pid,
                                 heartbeats)

    def heartbeat(self, label: str, index: int, instance: str) -> bool:
        return self._supervisor.heartbeat(self._registry.check_node(label, index), instance)

    def heartbeats(self, runs: list) -> list:
        checked = [(self._registry.check_node(label, index), instance)
                   for label, index, instance in _entries(runs, "heartbeats", (str, int, str))]
        return [self._supervisor.heartbeat(unit, instance) for unit, instance in checked]

    def node_finished(self, label: str, index: int, instance: str) -> None:
        self._supervisor.reported(self._registry.check_node(label, index), instance, None)

    def node_failed(self, label: str, index: int, instance: str, reason: str,
                    node_traceback: str, exception: bytes) -> None:
        unit = self._registry.check_node(label, index)
        self._controller.log_failure(f"{label}/{index}", node_traceback)
        self._supervisor.reported(unit, instance, (reason, node_traceback, exception))

    def request_stop(self, reason: str) -> None:
        if reason:
            logging.warning("Program %s stops: %s", self._controller.program_name, reason)
        self._controller.stop(reason)

    def exit_codes(self) -> dict[str, int | None]:
        return self._controller.exit_codes()

    def restarts(self) -> dict[str, int]:
        return self._controller.restarts()

    def wait_for_stop(self, label: str | None = None,
                      index: int = 0) -> concurrent.futures.Future:
        if label is None:
            return self._controller.stop_future()
        return self._controller.node_stop_future(label, index)

    def wait_group_change(self, label: str, known: int) -> concurrent.futures.Future:
        return self._controller.group_size_future(label, known)

    def scale(self, label: str, count: int) -> list[str]:
        return self._controller.scale(label, count)

    def change(self, program: bytes, fingerprints: dict, apply: bool,
               only: list) -> ProgramPlan:
        new = cloudpickle.loads(program)  # (its caller holds the token)
        if not isinstance(new, Program) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in fingerprints.items()
        ) or not all(isinstance(label, str) for label in only):
            raise TypeError("The controller protocol's change takes a pickled lp.Program, "
                            "its nodes' fingerprints (name -> str) and group labels")
        change = self._controller.apply if apply else self._controller.plan
        return change(new, fingerprints, only or None)

    def wait_for_end(self) -> concurrent.futures.Future:
        return self._controller.end_future()

    def report(self, label: str, index: int, instance: str,
               sample: telemetry.NodeSample) -> None:
        self._controller.report(label, index, instance, sample)

    def reports(self, samples: list) -> None:
        entries = _entries(samples, "reports", (str, int, str, telemetry.NodeSample))
        for label, index, _, sample in entries:  # all checked before any is kept
            self._registry.check_node(label, index)
            telemetry.check_sample(sample)
        for label, index, instance, sample in entries:  # a run's report is its heartbeat too
            self._supervisor.heartbeat(self._registry.check_node(label, index), instance)
            self._controller.report(label, index, instance, sample)

    def status(self) -> telemetry.ProgramStatus:
        return self._controller.status()

    def read_log(self, label: str, index: int, offset: int,
                 max_bytes: int) -> tuple[bytes, bool]:
        return self._controller.read_log(label, index, offset, max_bytes)
