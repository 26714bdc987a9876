"""Stopping a program: `lp.stop()` and the ways a node learns that its program stops.

All of these work from any thread of a node; `stop()` also works in the launching process.
Stopping goes through the program's controller, which tells every node (their stop events
are set and their stop handlers run), waits for them to finish for a grace period, then ends
whatever is left. The launching process is never killed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from launchpad import context


def stop() -> None:
    """Asks the program this code belongs to to stop; returns at once."""
    context.current().request_stop()


def wait_for_stop(timeout_secs: float | None = None) -> bool:
    """Blocks until the program is stopping (True) or `timeout_secs` pass (False)."""
    return context.current().stop_event.wait(timeout_secs)


def stop_event() -> threading.Event:
    """The event set when the program starts stopping."""
    return context.current().stop_event


def register_stop_handler(handler: Callable[[], None]) -> None:
    """Calls `handler()` once when the program starts stopping (in a stopping thread)."""
    context.current().add_stop_handler(handler)


def unregister_stop_handler(handler: Callable[[], None]) -> None:
    """Removes a handler added with `register_stop_handler`.

    Raises:
      ValueError: the handler is not registered.
    """
    context.current().remove_stop_handler(handler)
