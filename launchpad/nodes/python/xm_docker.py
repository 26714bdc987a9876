"""`lp.DockerConfig`: Launchpad's per-group settings for launches through XManager.

Code written for Launchpad builds these for its `xm_resources=` (Acme's
`lp_utils.make_xm_docker_resources` makes one per group). This project has no XManager
launcher: local launch types accept and ignore them, so such code runs unchanged; cluster
launch types take `lp.Resources` instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class DockerConfig:
    """A group's Docker image and hardware for XManager (Launchpad's fields, same order).

    Attributes:
      code_directory: folder of user code to copy into the image.
      docker_requirements: requirements.txt of the Python packages to install in the image.
      hw_requirements: XManager's `xm.JobRequirements` (kept as given).
      python_path: folders to put on PYTHONPATH before the entry point runs.
    """

    code_directory: str | None = None
    docker_requirements: str | None = None
    hw_requirements: Any = None
    python_path: list[str] | None = None
