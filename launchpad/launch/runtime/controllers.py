"""What `lp.launch` returns: a `ProgramController` for one program, `Controllers` for several.

`ProgramController` is the one type a user's code and the CLI hold, wherever the program's
controller runs: `lp.Controller` (in the launching process: local launches, attached cluster
launches) and every `RemoteController` (each engine's proxy of a program whose controller
runs in its cluster, returned by `lp.launch(..., detach=True)` and `lp.attach(run_id)`)
implement it, as does a dry run's `DryRun`. Every one waits with the same arguments:
Launchpad's, then `timeout=`. `Controllers` is the controllers of programs launched together,
a list, which also waits for and stops them all (Launchpad's launch of a list returned one
object, whose `wait()` code written for it calls).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from launchpad import control, courier, telemetry
from launchpad.courier import TLS
from launchpad.launch.runtime import serialization
from launchpad.launch.runtime.errors import NodeFailedError, ProgramStoppedError
from launchpad.program import Program

_Answer = TypeVar("_Answer")


@runtime_checkable
class ProgramController(Protocol):
    """A launched program, as its launcher's caller holds it."""

    run_id: str  # what `lp.attach` and `launchpad status` name it by ('' if not recorded)
    program_name: str
    stop_reason: str  # why it was stopped from outside, if it was

    @property
    def failure(self) -> NodeFailedError | None:
        """The first node failure, once the program has failed."""

    def wait(self, labels_to_wait_for: Sequence[str] | str | None = None,
             raise_error: bool = True, return_on_first_completed: bool = False, *,
             timeout: float | None = None) -> bool:
        """Blocks until the program has ended (Launchpad's arguments: see Controller.wait);
        False if `timeout` seconds passed first.

        Raises:
          NodeFailedError: a node failed (the first one), with its traceback (unless
            `raise_error` is False).
        """

    def stop(self, reason: str = "") -> None:
        """Asks the program to stop; returns at once."""

    def stop_and_wait(self) -> bool:
        """Stops the program and waits for it."""

    def kill(self) -> None:
        """Ends the program at once."""

    def status(self) -> telemetry.ProgramStatus | None:
        """Every node of the program now (None while its controller cannot be reached)."""

    def exit_codes(self) -> dict[str, int | None]:
        """'label/index' -> how each node's run ended (None: running)."""

    def restarts(self) -> dict[str, int]:
        """'label/index' -> how many times the node was restarted by its group's policy."""

    def scale(self, label: str, count: int) -> list[str]:
        """Makes group `label` `count` nodes while the program runs (Controller.scale); the
        names of the nodes added or removed."""

    def plan(self, program: Program) -> Any:
        """What `apply(program)` would do (Controller.plan): a ProgramPlan."""

    def apply(self, program: Program) -> Any:
        """Changes the running program into `program`, its next version (Controller.apply;
        `only=` the groups to change); the ProgramPlan applied."""

    def __enter__(self) -> ProgramController: ...

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None: ...


class RemoteController(abc.ABC):
    """The controller of a program that lives in a cluster (see the module doc): what every
    engine's proxy shares. A proxy says where its controller listens (`_controller_at`) and
    how to wait for the whole program (`_wait`)."""

    run_id: str
    program_name: str
    failure: NodeFailedError | None
    stop_reason: str

    @abc.abstractmethod
    def stop(self, reason: str = "") -> None:
        """Asks the program to stop; returns at once."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Ends the program at once (`wait()` then returns True)."""

    def wait(self, labels_to_wait_for: Sequence[str] | str | None = None,
             raise_error: bool = True, return_on_first_completed: bool = False, *,
             timeout: float | None = None) -> bool:
        """Blocks until the program has ended; False if `timeout` seconds passed first.
        A detached program is waited for whole: Launchpad's `labels_to_wait_for` and
        `return_on_first_completed` are refused.

        Raises:
          NodeFailedError: a node failed (the first one), with its traceback (unless
            `raise_error` is False: the wait returns True, the failure in `failure`).
          LaunchError: the cluster lost the program's controller before it said how the
            program did.
          TypeError: a number given first (`wait(30)`): the timeout is `timeout=`.
          ValueError: labels, or the first to complete, asked of a detached program.
        """
        check_wait_arguments(labels_to_wait_for, timeout)
        if labels_to_wait_for is not None or return_on_first_completed:
            raise ValueError(f"Program {self.program_name!r} runs detached: its wait() waits "
                             "for the whole program (no labels_to_wait_for, no "
                             "return_on_first_completed)")
        try:
            return self._wait(timeout)
        except NodeFailedError:
            if raise_error:
                raise
            return True

    @abc.abstractmethod
    def _wait(self, timeout: float | None) -> bool:
        """Waits for the whole program (see `wait`), raising its failure."""

    @abc.abstractmethod
    def exit_codes(self) -> dict[str, int | None]:
        """'label/index' -> how each node's run ended (None: running)."""

    @abc.abstractmethod
    def restarts(self) -> dict[str, int]:
        """'label/index' -> how many times the node was restarted by its group's policy."""

    @abc.abstractmethod
    def status(self) -> telemetry.ProgramStatus | None:
        """Every node of the program now, as its controller sees it (telemetry.py); None
        while its controller cannot be reached (not started yet, or ended)."""

    def scale(self, label: str, count: int) -> list[str]:
        """As Controller.scale, asked of the program's controller in its cluster.

        Raises:
          ProgramStoppedError: its controller cannot be reached (not started yet, or ended).
        """
        return self._asked(lambda client: client.scale(label, count))

    def plan(self, program: Program, only: Sequence[str] = ()) -> Any:
        """As Controller.plan: what `apply(program)` would do; changes nothing."""
        shipped = serialization.pickle_program_change(program)
        return self._asked(lambda client: client.change(*shipped, apply=False, only=only))

    def apply(self, program: Program, only: Sequence[str] = ()) -> Any:
        """As Controller.apply: the running program changed into `program`, its next
        version (`only` these groups, if any); returns the plan applied. Its code goes to
        the controller with it.

        Raises:
          ValueError: a change that cannot be made live (nothing applied).
          ProgramStoppedError: its controller cannot be reached.
        """
        shipped = serialization.pickle_program_change(program)
        return self._asked(lambda client: client.change(*shipped, apply=True, only=only))

    def controller_client(self) -> Any:
        """A client of its controller's protocol (a control.ControllerClient, or what asks as
        one: `scale`, `change`, `status`), for questions of its own; close it after.

        Raises:
          ProgramStoppedError: its controller cannot be reached (not started yet, or ended).
        """
        where = self._controller_at()
        if where is None:
            raise self._gone()
        return control.ControllerClient(*where)

    def _asked(self, question: Callable[[control.ControllerClient], _Answer]) -> _Answer:
        """`question(client)` of its controller, which must be reachable.

        Raises:
          ProgramStoppedError: it cannot be reached (not started yet, or ended).
        """
        client = self.controller_client()
        try:
            return question(client)
        except courier.ServerUnavailableError:
            raise self._gone() from None
        finally:
            client.close()

    def _gone(self) -> ProgramStoppedError:
        return ProgramStoppedError(f"Program {self.program_name!r} (run {self.run_id}) has "
                                   "no controller to reach: it is not running")

    def _controller_at(self) -> tuple[str, str, TLS | None] | None:
        """Where its controller listens: (address, token, TLS); None while it is not known
        (not started yet) or it has gone. A proxy that asks its controller says."""
        return None

    def _ask(self, question: Callable[[control.ControllerClient], _Answer]) -> _Answer | None:
        """`question(client)` of its controller over the protocol; None while its controller
        is not known, or once it has gone (the program ended as it was asked)."""
        try:
            return self._asked(question)
        except Exception:  # noqa: BLE001 - the program has ended and its controller gone
            return None

    def stop_and_wait(self) -> bool:
        self.stop()
        return self.wait()

    def __enter__(self) -> RemoteController:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()
        if exc_type is None:
            self.wait()


def check_wait_arguments(labels_to_wait_for: Any, timeout: float | None) -> None:
    """Refuses a number given as Launchpad's `labels_to_wait_for` (`wait(30)`): the timeout
    is a keyword, as every controller's wait takes it.

    Raises:
      TypeError: `labels_to_wait_for` is a number.
    """
    if isinstance(labels_to_wait_for, (int, float)) and not isinstance(
            labels_to_wait_for, bool):
        raise TypeError(f"wait({labels_to_wait_for!r}): the timeout is a keyword, "
                        f"wait(timeout={labels_to_wait_for!r}); the first argument is "
                        "Launchpad's labels_to_wait_for (group labels)")


class Controllers(list):
    """The controllers of programs launched together, in the order given."""

    def wait(self, *args: Any, **kwargs: Any) -> bool:
        """`wait(...)` of each (Controller.wait's arguments); True once every one is done."""
        return all([controller.wait(*args, **kwargs) for controller in self])

    def stop(self) -> None:
        for controller in self:
            controller.stop()

    def kill(self) -> None:
        for controller in self:
            controller.kill()

    def stop_and_wait(self) -> bool:
        self.stop()
        return self.wait()
