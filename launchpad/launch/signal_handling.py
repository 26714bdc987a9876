"""Exiting cleanly on Ctrl+C or SIGQUIT in an interactive launch (Launchpad's path).

`exit_gracefully_on_sigint()` makes the first Ctrl+C exit the interpreter normally (exit
status 0, exit handlers run) and ignores the ones that follow, so cleanup is not cut short;
`exit_gracefully_on_sigquit()` does the same for SIGQUIT.
"""

from __future__ import annotations

import atexit
import signal
import sys
from collections.abc import Callable
from typing import Any


def _exit_gracefully(signum: int, frame: Any) -> None:
    if signum == signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl+C cannot cut cleanup
        print("Control-C pressed. Exiting ...", flush=True)
    else:
        print("SIGQUIT received. Exiting ...", flush=True)
    sys.exit(0)


def exit_gracefully_on_sigint() -> None:
    signal.signal(signal.SIGINT, _exit_gracefully)


def exit_gracefully_on_sigquit() -> None:
    signal.signal(signal.SIGQUIT, _exit_gracefully)


def register_exit_handler(handler: Callable[..., None], *args: Any,
                          **kwargs: Any) -> Callable[..., None]:
    """Runs `handler(*args, **kwargs)` when the interpreter exits."""
    return atexit.register(handler, *args, **kwargs)


def register_exit_handler_and_exit_gracefully_on_sigint(
        handler: Callable[..., None], *args: Any, **kwargs: Any) -> Callable[..., None]:
    """Both: `handler` runs at the exit, which the first Ctrl+C makes a normal one."""
    registered = register_exit_handler(handler, *args, **kwargs)
    exit_gracefully_on_sigint()
    return registered
