"""`ThreadInterrupt`: ends a thread's Python code from another thread, by raising in it.

A node's `run()` is its own loop; when the node fails from outside that loop (a save of its
state failed, state_store.py), the failure must end the loop, not wait for it to return,
which a learner's loop never does. CPython can raise an exception in another thread
(`PyThreadState_SetAsyncExc`); the thread meets it at its next bytecode. A thread blocked in
one call into C (a lock's wait without a timeout, a `recv`) meets it when that call returns.

The exception raised is a `BaseException` (`Interrupted`), so that a loop's
`except Exception:` does not swallow it; the failure it stands for is the caller's to raise
once it is caught. An interrupt is fired at most once, and never after `disarm()`: one
pending then is withdrawn, and one already raised is the disarming thread's to catch.
"""

from __future__ import annotations

import ctypes
import threading

from launchpad.nodes.errors import Interrupted


class ThreadInterrupt:
    """Raises `Interrupted` in the thread that made it, once `fire()`d from any thread,
    until `disarm()`ed by that thread."""

    def __init__(self):
        self._thread_id = threading.get_ident()
        self._lock = threading.Lock()
        self._armed = True
        self.fired = False

    def fire(self) -> None:
        with self._lock:
            if not self._armed or self.fired:
                return
            self.fired = True
            _set_async_exc(self._thread_id, Interrupted)

    def disarm(self) -> None:
        """No interrupt after this returns (one pending is withdrawn); call it from the
        interrupted thread, which may meet `Interrupted` while it disarms."""
        with self._lock:
            self._armed = False
            if self.fired:
                _set_async_exc(self._thread_id, None)


def _set_async_exc(thread_id: int, exception: type[BaseException] | None) -> None:
    """Sets the exception pending in thread `thread_id` (None: withdraws it; a C NULL)."""
    pending = ctypes.py_object(exception) if exception is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), pending)
