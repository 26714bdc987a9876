"""`lp.RaySettings`: where and how a program's actors are placed (`lp.launch(..., ray=...)`).

What each node needs is said once for every engine, with `lp.Resources`; what is Ray's own -
the cluster to join, the runtime environment, packing or spreading a group - is said here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


@dataclasses.dataclass(frozen=True)
class RaySettings:
    """Ray options of a launch.

    Args:
      address: the Ray cluster to join: its head's "host:port", or "auto" (the cluster
        started on this machine). Default: `$RAY_ADDRESS` (Ray's own convention), else a Ray
        is started for this launch, and stopped with it. A process that has called
        `ray.init()` itself launches on that connection.
      runtime_env: the Ray runtime environment of every node's actor (e.g. {"pip": [...],
        "env_vars": {...}}); nodes themselves travel pickled by value either way.
      placement: group label -> how its nodes are placed, as one Ray placement group:
        "PACK" (as few Ray nodes as possible), "SPREAD" (as many), or their STRICT_ forms.
        A placed group needs `resources=` for it (a bundle must reserve something).
      placement_timeout_secs: how long a placement group may wait for room before the launch
        fails, naming the group.
    """

    address: str | None = None
    runtime_env: Mapping[str, Any] | None = None
    placement: Mapping[str, str] = dataclasses.field(default_factory=dict)
    placement_timeout_secs: float = 60.0

    def __post_init__(self):
        if self.address is not None and not isinstance(self.address, str):
            raise TypeError(f"RaySettings.address must be a str, got {self.address!r}")
        if self.runtime_env is not None and not isinstance(self.runtime_env, Mapping):
            raise TypeError(f"RaySettings.runtime_env must be a dict, got {self.runtime_env!r}")
        if not isinstance(self.placement, Mapping):
            raise TypeError(f"RaySettings.placement must map group labels to strategies, got "
                            f"{self.placement!r}")
        for group, strategy in self.placement.items():
            if strategy not in STRATEGIES:
                raise ValueError(f"RaySettings.placement[{group!r}] must be one of "
                                 f"{', '.join(STRATEGIES)}, got {strategy!r}")
        if self.placement_timeout_secs <= 0:
            raise ValueError("RaySettings.placement_timeout_secs must be > 0, got "
                             f"{self.placement_timeout_secs!r}")
