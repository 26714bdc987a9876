"""The launching process's connection to Ray, shared by its Ray launches.

The first launch connects: to the process's own `ray.init()` if it made one (left as it is),
else to `RaySettings.address` or `$RAY_ADDRESS`, else to a Ray started here for the launch
(`ray.init(address="local")`, never an unrelated one found on the machine). When the last
launch of this process ends, a connection made here is closed, which also stops a Ray started
here; a cluster that was joined keeps running, less the program's actors.
"""

from __future__ import annotations

import logging
import os
import threading

from launchpad.launch.ray.settings import RaySettings
from launchpad.launch.runtime import interrupts
from launchpad.launch.runtime.errors import LaunchError

_lock = threading.Lock()
_launches = 0
_connected_here = False


def connect(settings: RaySettings) -> str:
    """Connects unless connected; returns the cluster's GCS address ("host:port").

    Raises:
      LaunchError: the cluster cannot be reached (named, with Ray's reason).
    """
    import ray
    global _connected_here
    with _lock:
        if not ray.is_initialized():
            address = settings.address or os.environ.get("RAY_ADDRESS") or "local"
            where = ("a Ray started for this launch" if address == "local"
                     else f"the Ray cluster at {address}")
            options = {"include_dashboard": False} if address == "local" else {}
            try:
                ray.init(address=address, logging_level=logging.WARNING, **options)
            except Exception as e:
                raise LaunchError(f"launch_type='ray' cannot connect to {where}: "
                                  f"{type(e).__name__}: {e}") from e
            _connected_here = True
            interrupts.take_back()
        return ray.get_runtime_context().gcs_address


def hold() -> None:
    """A launch uses the connection (until its `release()`)."""
    global _launches
    with _lock:
        _launches += 1


def release() -> None:
    """A launch has ended; the last one closes a connection made here."""
    import ray
    global _launches, _connected_here
    with _lock:
        _launches -= 1
        if _launches == 0 and _connected_here:
            _connected_here = False
            ray.shutdown()
