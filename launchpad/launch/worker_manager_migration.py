"""Launchpad's switch between its two worker managers (Launchpad's path): one here."""

from __future__ import annotations

from launchpad.launch.worker_manager_v2 import (
    WorkerManager,
    get_worker_manager,
    register_stop_handler,
    stop_event,
    unregister_stop_handler,
    wait_for_stop,
)

__all__ = ["WorkerManager", "get_worker_manager", "register_stop_handler", "stop_event",
           "unregister_stop_handler", "wait_for_stop"]
