"""Launchpad's second worker manager's stop functions (Launchpad's path): the same as
launch/worker_manager.py's, since one runtime serves every launch here."""

from __future__ import annotations

from launchpad.launch.worker_manager import ThreadWorker, WorkerManager, get_worker_manager
from launchpad.stopping import (
    register_stop_handler,
    stop_event,
    unregister_stop_handler,
    wait_for_stop,
)

__all__ = ["ThreadWorker", "WorkerManager", "get_worker_manager", "register_stop_handler",
           "stop_event", "unregister_stop_handler", "wait_for_stop"]
