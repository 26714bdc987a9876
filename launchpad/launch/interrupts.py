"""Ctrl+C, SIGTERM and SIGHUP of the launching process: the first stops the running programs
gracefully (a cluster launch's job is cancelled, pending or running), a second kills their
nodes at once.

SIGTERM is what `timeout`, CI runners and `kill` send, SIGHUP what a closed terminal sends: a
launcher ended so must not leave its program or its cluster job behind, so they do what Ctrl+C
does (and what Launchpad's worker manager did with SIGTERM); the process lives on until its
script returns, as after Ctrl+C. The handlers are installed by the first launch made from the
main thread and stay; when no program launched from this process is running, each signal
does what it did before (by default: KeyboardInterrupt for Ctrl+C, the end of the process for
the others).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_running: "weakref.WeakSet[Any]" = weakref.WeakSet()
_SIGNALS = {signal.SIGINT: "Ctrl+C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
_previous: dict[int, Any] = {}
_installed = False
_presses = 0
# How often a wait of the main thread wakes to let a Ctrl+C in (see wait_in_slices).
_WAIT_SLICE_SECS = 0.2


def watch(controller: Any) -> None:
    """Lets Ctrl+C, SIGTERM and SIGHUP stop `controller`'s program while it runs."""
    global _installed
    with _lock:
        _running.add(controller)
        if not _installed and threading.current_thread() is threading.main_thread():
            for signum in _SIGNALS:
                _previous[signum] = signal.getsignal(signum)
                signal.signal(signum, _on_signal)
            _installed = True
    controller.on_finish(lambda: _forget(controller))


def _forget(controller: Any) -> None:
    global _presses
    with _lock:
        _running.discard(controller)
        if not _running:
            _presses = 0


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # a terminal gone (SIGHUP), a closed file
        print(text, file=sys.stderr, flush=True)


def _on_signal(signum: int, frame: Any) -> None:
    global _presses
    with _lock:
        running = list(_running)
        _presses += 1 if running else 0
        presses = _presses
    if not running:
        _pass_on(signum, frame)
        return
    names = ", ".join(c.program_name for c in running)
    what = _SIGNALS[signum]
    on = "" if signum == signal.SIGINT else f" on {what}"
    if presses == 1:
        _say(f"\nlaunchpad: stopping {names}{on} ({what} again to kill the nodes now)")
        for controller in running:
            controller.stop()
    else:
        _say(f"\nlaunchpad: killing the nodes of {names}{on}")
        for controller in running:
            controller.kill()


def _pass_on(signum: int, frame: Any) -> None:
    """What the signal did before a launch took it."""
    previous = _previous.get(signum)
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    elif signum == signal.SIGINT:
        raise KeyboardInterrupt
    else:  # SIG_DFL: the process ends by the signal, as it would have
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)


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
