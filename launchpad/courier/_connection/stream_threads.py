"""What a connection's stream threads do (connection.py): send the calls queued on their
stream, as one message, and deliver the replies; look, while idle, whether the stream and its
server are still there.

A future, or a blocking call past `connection.MAX_DRIVEN`, joins the stream that is filling;
that stream's thread sends every call queued by the time it wakes as one message, in two
halves on two streams when there are many (`HALVE_FROM`), so that the server runs one half
while this process settles the other.
"""

from __future__ import annotations

import queue
import threading

from launchpad.courier._connection.in_flight import PooledStream
from launchpad.courier._connection.stream_pool import StreamPool

# A stream thread with nothing to send checks this often that its server is still there, so
# that a connection whose server went away ends (and its threads with it) by itself.
_CHECK_IDLE_SECS = 1.0

# A stream's thread that finds this many queued calls or more, while no other queued message
# of its connection is out, sends the first half and hands the second to another stream: the
# server runs one half while this process settles the other (64 futures in flight, local
# socket: 33.0k calls/s to 39.4k; gRPC 35.4k to 38.3k). Halves of 8 lost as much as the
# overlap gave (16 futures: 32.1k calls/s to 30.0k).
HALVE_FROM = 32


class StreamThreads:
    """The stream threads' part of a `Connection`, which provides what they use: its lock,
    pool, filling stream, queued messages out, `_exchange`, `close` and `_went_away`."""

    _lock: threading.Lock
    _pool: StreamPool
    _filling: PooledStream | None
    _queued_out: set[PooledStream]

    def _serve_queue(self, stream: PooledStream) -> None:
        """A stream's thread: sends the calls queued on it, as one message, and waits for
        their replies; then waits for the next calls."""
        while True:
            try:
                frames = stream.outbox.get(timeout=_CHECK_IDLE_SECS)
            except queue.Empty:
                if self._found_dead(stream):
                    return
                continue
            if frames is None:
                return
            dead: list[PooledStream] = []
            with self._lock:
                while not stream.outbox.empty():
                    more = stream.outbox.get()
                    if more is None:
                        return
                    frames = frames + more
                if self._filling is stream:  # later calls must go elsewhere
                    self._filling = None
                if (len(frames) >= HALVE_FROM and not self._queued_out
                        and self._pool.channel.kind != "in-process"):  # (one GIL: no overlap)
                    frames = self._halve(stream, frames, dead)
                self._queued_out.add(stream)
            for ended in dead:
                ended.let_go()
            if not self._exchange(stream, frames):
                return

    def _halve(self, stream: PooledStream, frames: list, dead: list) -> list:
        """The first half of `frames`, for this stream's message; the second half goes to
        another stream, which becomes the filling one (lock held; `dead` as in StreamPool.take)."""
        other = self._pool.take(dead)
        if other is None:
            return frames  # (the server is gone: this stream's message finds it out)
        keep = (len(frames) + 1) // 2
        stream.hand_over(frames[keep:], other)
        other.start_thread(self._serve_queue)
        self._filling = other
        return frames[:keep]

    def _found_dead(self, stream: PooledStream) -> bool:
        """For a stream's thread with nothing to send: whether its stream, idle, has ended;
        it is then let go, and the connection closed if its server is gone too. A stream a
        caller drives is not looked at (see the module doc): that caller sees how it ends."""
        with self._lock:  # held while looking: no caller takes the stream meanwhile
            if stream not in self._pool.idle or stream.transport.alive():
                return False
            self._pool.idle.remove(stream)
            self._pool.streams.discard(stream)
        stream.let_go()
        if not self._pool.channel.reachable():
            self.close(self._went_away())
        return True
