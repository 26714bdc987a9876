"""What code written for Launchpad read of the WorkerManager its launches returned, which a
`Controller` answers too (Launchpad's `WorkerManager` itself: launch/worker_manager.py)."""

from __future__ import annotations

from launchpad.launch.runtime import ending


class LaunchpadWorkers:
    """What code written for Launchpad read of the WorkerManager `lp.launch` returned: a
    Controller has it too."""

    @property
    def _active_workers(self) -> dict[str, list]:
        """group label -> the workers of its nodes (each with `wait(timeout=None)` -> how
        it ended: 0 done, > 0 its exit code, < 0 the signal that ended it)."""
        groups: dict[str, list] = {label: [] for label in self.program.groups}
        for worker in self._supervisor.workers():
            groups[worker.name.rpartition("/")[0]].append(_Worker(worker))
        return groups

    _process_workers = _active_workers  # Launchpad's second WorkerManager's name

    def _kill(self) -> None:
        self.kill()


class _Worker:
    """A node's worker as Launchpad's code handled one (a `subprocess.Popen`'s face)."""

    def __init__(self, worker: ending.NodeWorker):
        self._worker = worker

    @property
    def pid(self) -> int | None:
        return self._worker.pid or None

    _pid = pid

    @property
    def returncode(self) -> int | None:
        return self._worker.returncode

    def poll(self) -> int | None:
        return self._worker.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        while not self._worker.join(60.0 if timeout is None else timeout):
            if timeout is not None:
                return None
        return self._worker.returncode
