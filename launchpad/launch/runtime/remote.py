"""`lp.RemoteController`: what every proxy of a program whose controller runs in a cluster has.

A detached Slurm run, a detached Ray run and a Kubernetes launch each have their own proxy
(slurm/detached.py, ray/detached.py, kubernetes/launcher.py), returned by `lp.launch(...,
detach=True)` and `lp.attach(run_id)`. They answer as `lp.Controller` does - `wait()`,
`stop()`, `kill()`, `exit_codes()`, `restarts()`, `status()`, `stop_and_wait()`, `with` -
and name their run with `run_id` (controllers.ProgramController, the one type a user's code
and the CLI hold); this base holds what they share.
"""

from __future__ import annotations

import abc

from launchpad import telemetry
from launchpad.launch.runtime import errors


class RemoteController(abc.ABC):
    """The controller of a program that lives in a cluster (see the module doc)."""

    run_id: str
    program_name: str
    failure: errors.NodeFailedError | None
    stop_reason: str

    @abc.abstractmethod
    def stop(self, reason: str = "") -> None:
        """Asks the program to stop; returns at once."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Ends the program at once (`wait()` then returns True)."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the program has ended; False if `timeout` seconds passed first.

        Raises:
          NodeFailedError: a node failed (the first one), with its traceback.
          LaunchError: the cluster lost the program's controller before it said how the
            program did.
        """

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

    def stop_and_wait(self) -> bool:
        self.stop()
        return self.wait()

    def __enter__(self) -> RemoteController:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()
        if exc_type is None:
            self.wait()
