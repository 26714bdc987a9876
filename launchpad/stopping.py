"""Stopping a program: `lp.stop()` and the ways a node learns that its program stops.

All of these work from any thread of a node; `stop()` also works in the launching process.
Stopping goes through the program's controller, which tells every node (their stop events
are set and their stop handlers run), waits for them to finish for a grace period, then ends
whatever is left. The launching process is never killed.

Stop handlers may also be registered outside any program (Acme's environment loops do, run
or not under a launch): they then belong to the process's standalone context and run when
the interpreter exits, or when a `WorkerManager` this process made stops.
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
    context.current_or_outside().add_stop_handler(handler)


def unregister_stop_handler(handler: Callable[[], None]) -> None:
    """Removes a handler added with `register_stop_handler`.

    Raises:
      ValueError: the handler is not registered.
    """
    context.current_or_outside().remove_stop_handler(handler)


class ProgramStopper:
    """A callable that stops the program of the code calling it (picklable, so it can be
    passed to nodes; Launchpad's `make_program_stopper`)."""

    def __init__(self, launch_type: context.LaunchType | str):
        self.launch_type = launch_type

    def __call__(self, mark_as_completed: bool = False) -> None:
        del mark_as_completed  # Launchpad's XManager launches only
        stop()

    def __repr__(self) -> str:
        return f"ProgramStopper({str.__str__(self.launch_type)!r})"


def make_program_stopper(launch_type: context.LaunchType | str) -> ProgramStopper:
    """A callable that stops the running program when a node (or its launcher) calls it.

    Raises:
      ValueError: `launch_type` is no launch type.
    """
    return ProgramStopper(context.LaunchType(launch_type))
