"""The batch step of a cluster job: it holds the allocation while its program's controller runs.

A cluster job must never outlive its program, even when the launching process is killed
(SIGKILL, a lost login node) and so cannot cancel it. The job's batch step is this holder:
it waits for the controller to end every node, or to vanish (gone, or silent for the
liveness timeout), and then returns; Slurm ends a job whose batch step has ended, and with it
every step still running. A job that starts after its launcher died ends at once.
"""

from __future__ import annotations

import dataclasses
import pickle
import threading
import time

from launchpad import control
from launchpad.courier import TLS
from launchpad.launch.runtime import private_files

_CHECK_SECS = 2.0


@dataclasses.dataclass
class HolderSpec:
    """How the holder reaches its program's controller."""

    controller_address: str
    token: str
    tls: TLS | None
    liveness_timeout_secs: float


def write(path: str, holder: HolderSpec) -> None:
    private_files.write_private(path, pickle.dumps(holder))


def hold(path: str) -> int:
    """Holds until the controller has ended the program or is lost; the exit status (0)."""
    holder = pickle.loads(private_files.read_private(path))
    if not isinstance(holder, HolderSpec):
        raise TypeError(f"{path} holds a {type(holder).__name__}, not a job holder's spec")
    client = control.ControllerClient(holder.controller_address, holder.token, holder.tls)
    ended = threading.Event()

    def wait_for_end() -> None:
        try:
            client.wait_for_end()
        except Exception:  # noqa: BLE001 - gone: the job has nothing left to run for
            pass
        ended.set()

    threading.Thread(target=wait_for_end, daemon=True).start()
    silent_since = None
    while not ended.wait(_CHECK_SECS):  # a clock: the controller is asked if it is there
        try:
            client.ping(timeout=_CHECK_SECS)
            silent_since = None
        except TimeoutError:
            silent_since = silent_since or time.monotonic()
            if time.monotonic() - silent_since > holder.liveness_timeout_secs:
                break
        except Exception:  # noqa: BLE001 - refused: the controller has gone
            break
    return 0
