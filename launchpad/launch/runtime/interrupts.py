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

Python runs a handler in the main thread between two of its bytecodes, wherever that thread
is: inside a controller's locked section, inside a print to stderr, or inside the handler
of the signal before. So the handler takes no lock and does no work: it puts the signal on a
queue whose `put` is safe there, and one thread of ours stops or kills the programs.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from launchpad.launch.runtime import terminals

_lock = threading.Lock()
_running: "weakref.WeakSet[Any]" = weakref.WeakSet()
# How many programs `_running` holds, read by the handler without the lock (one int read).
_running_count = 0
_SIGNALS = {signal.SIGINT: "Ctrl+C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
_previous: dict[int, Any] = {}
_installed = False
_presses = 0
# Signals for the thread that acts on them; None ends that thread. It runs while programs do.
_signals: "queue.SimpleQueue[int | None]" = queue.SimpleQueue()
_acting = False
# How often a wait of the main thread wakes to let a Ctrl+C in (see wait_in_slices).
_WAIT_SLICE_SECS = 0.2


def watch(controller: Any) -> None:
    """Lets Ctrl+C, SIGTERM and SIGHUP stop `controller`'s program while it runs."""
    global _installed, _running_count, _acting
    with _lock:
        _running.add(controller)
        _running_count = len(_running)
        if not _installed and threading.current_thread() is threading.main_thread():
            for signum in _SIGNALS:
                _previous[signum] = signal.getsignal(signum)
                signal.signal(signum, _on_signal)
            _installed = True
        if _installed and not _acting:
            threading.Thread(target=_act_on_signals, name="launchpad-signals",
                             daemon=True).start()
            _acting = True
    controller.on_finish(lambda: _forget(controller))


def take_back() -> None:
    """Takes the signals back from a library that took them during a launch (`ray.init()`
    sets a SIGTERM handler that exits the process); theirs runs when no program is running."""
    with _lock:
        if not _installed or threading.current_thread() is not threading.main_thread():
            return
        for signum in _SIGNALS:
            handler = signal.getsignal(signum)
            if handler is not _on_signal:
                _previous[signum] = handler
                signal.signal(signum, _on_signal)


def _forget(controller: Any) -> None:
    global _presses, _running_count, _acting
    with _lock:
        _running.discard(controller)
        _running_count = len(_running)
        if not _running and _acting:
            _presses = 0
            _signals.put(None)
            _acting = False


def _on_signal(signum: int, frame: Any) -> None:
    if _running_count:
        _signals.put_nowait(signum)
    else:
        _pass_on(signum, frame)


def _act_on_signals() -> None:
    """The first signal stops every running program, each later one kills their nodes."""
    global _presses
    while (signum := _signals.get()) is not None:
        with _lock:
            running = list(_running)
            _presses += 1 if running else 0
            presses = _presses
        if not running:  # they ended as it came: what it did before, in the main thread
            signal.raise_signal(signum)
            continue
        names = ", ".join(c.program_name for c in running)
        what = _SIGNALS[signum]
        on = "" if signum == signal.SIGINT else f" on {what}"
        if presses == 1:
            terminals.say(f"stopping {names}{on} ({what} again to kill the nodes now)",
                          fresh_line=True)
            for controller in running:
                controller.stop()
        else:
            terminals.say(f"killing the nodes of {names}{on}", fresh_line=True)
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
