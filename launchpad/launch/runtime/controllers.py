"""What `lp.launch` returns: a `ProgramController` for one program, `Controllers` for several.

`ProgramController` is the one type a user's code and the CLI hold, wherever the program's
controller runs: `lp.Controller` (in the launching process: local launches, attached cluster
launches) and every `lp.RemoteController` (a detached Slurm or Ray run, a Kubernetes
launch) implement it, as does a dry run's `DryRun`. `Controllers` is the controllers of
programs launched together, a list, which also waits for and stops them all (Launchpad's
launch of a list returned one object, whose `wait()` code written for it calls).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from launchpad import telemetry
from launchpad.launch.runtime.errors import NodeFailedError


@runtime_checkable
class ProgramController(Protocol):
    """A launched program, as its launcher's caller holds it."""

    run_id: str  # what `lp.attach` and `launchpad status` name it by ('' if not recorded)
    program_name: str
    stop_reason: str  # why it was stopped from outside, if it was

    @property
    def failure(self) -> NodeFailedError | None:
        """The first node failure, once the program has failed."""

    def wait(self, *, timeout: float | None = None) -> bool:
        """Blocks until the program has ended; False if `timeout` seconds passed first.

        Raises:
          NodeFailedError: a node failed (the first one), with its traceback.
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

    def __enter__(self) -> ProgramController: ...

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None: ...


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
