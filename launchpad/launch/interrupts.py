"""Ctrl+C in the launching process: the first stops the running programs gracefully, a second
kills their nodes at once.

The handler is installed by the first launch made from the main thread and stays; when no
program launched from this process is running, Ctrl+C does what it did before (by default,
KeyboardInterrupt).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_running: "weakref.WeakSet[Any]" = weakref.WeakSet()
_previous: Any = None
_installed = False
_presses = 0
# How often a wait of the main thread wakes to let a Ctrl+C in (see wait_in_slices).
_WAIT_SLICE_SECS = 0.2


def watch(controller: Any) -> None:
    """Lets Ctrl+C stop `controller`'s program while it runs."""
    global _installed, _previous
    with _lock:
        _running.add(controller)
        if not _installed and threading.current_thread() is threading.main_thread():
            _previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, _on_interrupt)
            _installed = True
    controller.on_finish(lambda: _forget(controller))


def _forget(controller: Any) -> None:
    global _presses
    with _lock:
        _running.discard(controller)
        if not _running:
            _presses = 0


def _on_interrupt(signum: int, frame: Any) -> None:
    global _presses
    with _lock:
        running = list(_running)
        _presses += 1 if running else 0
        presses = _presses
    if not running:
        if callable(_previous):
            _previous(signum, frame)
        elif _previous != signal.SIG_IGN:
            raise KeyboardInterrupt
        return
    names = ", ".join(c.program_name for c in running)
    if presses == 1:
        print(f"\nlaunchpad: stopping {names} (Ctrl+C again to kill the nodes now)",
              file=sys.stderr, flush=True)
        for controller in running:
            controller.stop()
    else:
        print(f"\nlaunchpad: killing the nodes of {names}", file=sys.stderr, flush=True)
        for controller in running:
            controller.kill()


def wait_in_slices(wait: Callable[[float], bool], timeout: float | None) -> bool:
    """`wait(timeout)` (a wait that returns True once done), waking every `_WAIT_SLICE_SECS`:
    the kernel may give a Ctrl+C to any thread of the process, and Python runs its handler in
    the main thread only when that thread next runs Python code, which a wait without a
    timeout never does (a script waiting for its program at exit ignored Ctrl+C so)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = _WAIT_SLICE_SECS if deadline is None else deadline - time.monotonic()
        if wait(max(0.0, min(left, _WAIT_SLICE_SECS))):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False

