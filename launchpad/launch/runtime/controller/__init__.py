"""A launched program's controller, built of explicit parts, one job each:

    program_controller.py  `Controller`: its public API, the parts below made and joined
    registry.py            the nodes' addresses (register, bounded lookups, forgotten)
    supervisor.py          how each run of a unit ended, and what follows (policy)
    node_book.py           each unit's state and telemetry, as the supervisor decides it
    program_stop.py        the one stop sequence, and who is told at each step
    service.py             the controller protocol served over courier, given the parts

Launchers import `Controller` from here; nothing outside imports the parts.
"""

from launchpad.launch.runtime.controller.program_controller import (
    DEFAULT_STARTUP_TIMEOUT_SECS,
    Controller,
)

__all__ = ["Controller", "DEFAULT_STARTUP_TIMEOUT_SECS"]
