"""How the calls of one message run: quick ones one after another on the thread that read
it, others on the server's workers.

A message holds many calls when a client keeps many futures in flight: its stream sends
every call queued by the time it writes as one message (connection.py). Handing each call
to a worker costs a thread's wake-up and a pass of the interpreter's lock, several times
what a small call costs itself. So when every call of a message is of a method known to be
quick (its calls so far took `QUICK_SECS` on average: metrics.py), the thread that read
the message runs them itself, in order (measured with 16 futures in flight, against an
echo child: the server's CPU per call from 68-85 us to 45-46 us). Otherwise every call but
the last runs on a worker at once, and the last on this thread: one that blocks holds up no
other.

A quick method may still block, on another call of the same message even: so the calls
left of a message that has run inline for `INLINE_SECS` go to the workers, where they run
at once (their replies leave with the blocked call's, when it returns: a message's replies
are sent by the thread that read it). One overseer thread per server looks at the messages
under way every `INLINE_SECS`, and only while there are any: it sleeps on a condition
otherwise.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any

from launchpad.courier import metrics

# How long a message's calls may run on the thread that read it before the calls left are
# handed to workers.
INLINE_SECS = 2e-3
# A method whose calls took at most this long on average, over this many calls at least,
# runs inline.
QUICK_SECS = 200e-6
_KNOWN_AFTER_CALLS = 8


class _Message:
    """The calls of a message not yet started, when the first one started, and how to hand
    one off."""

    __slots__ = ("left", "started", "hand_off")

    def __init__(self, frames: list, hand_off: Callable[[Any], None]):
        self.left = collections.deque(frames)  # (popleft is atomic: either side takes each)
        self.started = time.perf_counter()
        self.hand_off = hand_off


class CallBatches:
    """Runs messages' calls (see the module doc), those of methods that `call_metrics`
    knows as quick inline."""

    def __init__(self, call_metrics: metrics.CallMetrics):
        self._metrics = call_metrics
        self._changed = threading.Condition()
        self._messages: set[_Message] = set()
        self._overseer: threading.Thread | None = None
        self._closed = False

    def run(self, frames: list, run: Callable[[Any], None],
            hand_off: Callable[[Any], None]) -> None:
        """Runs the calls of `frames`: with `run` on this thread, or with `hand_off` on a
        worker (see the module doc)."""
        *others, last = frames
        if not others:
            run(last)
            return
        if not all(self._metrics.is_quick(frame.name, QUICK_SECS, _KNOWN_AFTER_CALLS)
                   for frame in frames):
            for frame in others:
                hand_off(frame)
            run(last)
            return
        message = _Message(frames, hand_off)
        self._watch(message)
        try:
            while True:
                try:
                    frame = message.left.popleft()
                except IndexError:
                    return
                run(frame)
        finally:
            with self._changed:
                self._messages.discard(message)

    def close(self) -> None:
        """Ends the overseer (the calls under way go on; none is handed off any more)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _watch(self, message: _Message) -> None:
        with self._changed:
            self._messages.add(message)
            if self._overseer is None and not self._closed:
                self._overseer = threading.Thread(target=self._oversee, daemon=True,
                                                  name="courier-call-overseer")
                self._overseer.start()
            elif len(self._messages) == 1:
                self._changed.notify()

    def _oversee(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._messages or self._closed)
                if not self._closed:  # a look every INLINE_SECS (close() ends it at once)
                    self._changed.wait(INLINE_SECS)
                if self._closed:
                    return
            late = time.perf_counter() - INLINE_SECS
            with self._changed:
                messages = [m for m in self._messages if m.started < late]
            for message in messages:
                while True:
                    try:
                        frame = message.left.popleft()
                    except IndexError:
                        break
                    message.hand_off(frame)
