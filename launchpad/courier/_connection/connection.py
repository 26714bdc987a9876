"""A client's connection to one courier server: one channel and a pool of streams
(stream_pool.py).

A connection thread reaches the server (dialer.py: the address resolved, the fastest
transport's channel, a bounded wait); calls made meanwhile wait and then travel together.
Once connected, a call goes one of three ways:

* driven (a blocking call): the calling thread takes an idle stream, sends its call and
  waits for the reply itself, which costs no thread hand-off at all;
* queued (a future, or a blocking call while `MAX_DRIVEN` others are driven): the call joins
  the stream that is filling, whose own thread sends every call queued by the time it wakes
  as one message (in two halves on two streams when there are many, `HALVE_FROM`) and sets
  their futures as replies come;
* started (a group call's, group.py; socket transports only): the calling thread sends it,
  then reads its reply itself, waiting on many calls' sockets at once (`StartedCall`).

A call is sent on a stream only when every call sent on it before is answered: that is what
lets the server run each call on the stream's own thread (see server.py). Concurrent calls
therefore use more streams. When a stream fails under a call the connection is `broken`: its
calls fail, and the client opens a new connection (resolving the address again) for later
calls.

An idle stream may have ended meanwhile: with its server, or alone (the server ended just
that stream). The stream tells (`alive`), cheaply, and one found dead, by the call about to
use it or by the stream's own thread, is let go; a call then takes another stream or opens
a new one. Only when the server is gone (a new stream cannot be opened: its socket refuses
connections, gRPC's channel is not ready) does the connection break, as gRPC's channels
do. A stream's thread looks only at its stream while it is idle, never while a caller drives
it: the reply of that caller's call, waiting to be read, would look like the server's end of
the stream.

To a server on this host but not in this process, a stream may carry large parts through
shared memory (its transport's lane, see _wire/messages.py). Its region is reused from the
start for every message sent, which is safe because of the rule above: by then the server
has answered, so it has read every part of the previous message.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
from collections.abc import Callable

from launchpad.courier import errors
from launchpad.courier._connection import in_flight
from launchpad.courier._connection.dialer import Dialer
from launchpad.courier._connection.in_flight import (
    After,
    PooledStream,
    StartedCall,
    settle,
    settle_replies,
)
from launchpad.courier._connection.stream_pool import StreamPool
from launchpad.courier._connection.stream_threads import StreamThreads
from launchpad.courier._in_process import direct_calls
from launchpad.courier._wire import serialization, streams

# Blocking calls driven at once, at most: each stream's server thread is woken per call and
# must take the GIL; calls past it join the filling message, one for the server to read (16
# threads sharing a client: 3.8k calls/s, 6.1k with 3; docs/performance.md, "Courier calls").
MAX_DRIVEN = 3



class Connection(StreamThreads):
    """One channel to one server, and the streams open on it (see the module doc).

    `mode` narrows the transports (channels.py); with `deadlines` (the client's calls have
    a timeout) no call runs on its caller's thread, so that a timeout ends its wait.
    """

    _ids = itertools.count(1)

    def __init__(self, address, token, wait_for_ready, connect_timeout, compress, tls,
                 mode: str = "auto", deadlines: bool = False):
        self.broken = False
        self.error: Exception | None = None  # why it broke
        # Blocking calls straight into a server of this process (none with deadlines).
        self.direct: direct_calls.DirectCalls | None = None
        self._dialer = Dialer(address, wait_for_ready, connect_timeout, compress, tls, mode)
        self._token = token
        self._wait_for_ready = wait_for_ready
        self._deadlines = deadlines
        self._lock = threading.Lock()
        self._pool = StreamPool(token, wait_for_ready, self._dialer)
        self._early: list | None = []  # calls made before the server was reached
        self._filling: PooledStream | None = None
        self._driven = 0  # blocking calls driven now (see MAX_DRIVEN)
        self._queued_out: set[PooledStream] = set()  # sent queued calls not all answered
        threading.Thread(target=self._connect, name="courier-connect", daemon=True).start()

    def send(self, method: str, parts: list, future: in_flight.Settleable, *,
             drive: bool = False) -> bool:
        """Sends a call; False if the connection broke meanwhile (the caller retries). With
        `drive`, a connected connection makes the call on this thread (settled on return)
        unless `MAX_DRIVEN` others are driven; otherwise it is queued (see the module doc)."""
        call_id = next(self._ids)
        frame = serialization.encode_frame(serialization.Kind.CALL, call_id, method, parts)
        with self._lock:
            if self.broken:
                return False
            if self._early is not None:
                self._early.append((call_id, frame, future))
                return True
            drive = drive and self._driven < MAX_DRIVEN
            stream = None if drive else self._filling
            dead: list[PooledStream] = []
            if stream is None:
                stream = self._pool.take(dead)
            if stream is not None:
                stream.pending[call_id] = future
                self._driven += drive
                if not drive:
                    self._filling = stream
                    stream.start_thread(self._serve_queue)
                    # Queued before the lock is let go: the stream's thread takes what is
                    # queued under this lock, so a call it counts as pending is one it sends.
                    stream.outbox.put([frame])
        for ended in dead:
            ended.let_go()
        if stream is None:
            self.close(self._went_away())
            return False
        if drive:
            self._drive(stream, call_id, frame, future)
        return True

    def start(self, method: str, parts: list,
              future: concurrent.futures.Future) -> StartedCall | None:
        """Sends a call whose reply this thread reads later (see the module doc); None if
        this connection cannot (not connected yet, no socket to wait on, deadlines): `send`
        the call then, which also finds a server that is gone."""
        if self._deadlines:
            return None
        dead: list[PooledStream] = []
        with self._lock:
            if self.broken or self._early is not None or not self._pool.channel.selectable:
                return None
            stream = self._pool.take(dead)
            call_id = next(self._ids)
            if stream is not None:
                stream.pending[call_id] = future
        for ended in dead:
            ended.let_go()
        if stream is None:
            return None
        frames = [serialization.encode_frame(serialization.Kind.CALL, call_id, method, parts)]
        def send() -> bool:
            stream.transport.send(stream.chunks(frames))
            return True
        started = StartedCall(self, stream, call_id, future)
        started.done = not self._guarded(stream, send)  # (failed: the connection closed)
        return started

    def read_reply(self, stream: PooledStream) -> bool:
        """Reads a started call's reply (its socket is readable) and settles its future, or
        fails it if the stream ended; False if the reply has not begun to come."""
        waiting = False

        def read() -> bool:
            nonlocal waiting
            reply = stream.transport.receive_if_ready()
            waiting = reply is None
            return waiting or self._take_replies(stream, reply)

        self._guarded(stream, read)
        return not waiting

    def give_up(self, stream: PooledStream, call_id: int) -> None:
        """Stops waiting for a started call's reply: its stream ends (the call may run)."""
        with self._lock:
            stream.pending.pop(call_id, None)
            stream.abandoned = True
            self._pool.streams.discard(stream)
        stream.let_go()

    def close(self, error: Exception) -> None:
        """Fails every call not yet answered with `error` and ends the streams and channel."""
        with self._lock:
            if self.broken:
                return
            self.error = error
            self.broken = True
            early, self._early = self._early or [], None
            idle, self._pool.idle = self._pool.idle, []
            self._filling = None
            streams = list(self._pool.streams)
            pending = [future for stream in streams for future in stream.pending.values()]
            for stream in streams:
                stream.pending = {}
        self._dialer.cancel()  # a dial under way ends
        for _, _, future in early:
            settle(future, exception=error)
        for future in pending:
            settle(future, exception=error)
        for stream in streams:
            stream.outbox.put(None)  # ends its thread, if it has one
            if stream in idle:
                stream.transport.finish()  # nobody drives an idle stream: this thread ends it
            else:
                stream.transport.cancel()  # its driver sees the break and ends it
        if self._pool.channel is not None:
            self._pool.channel.close()

    # ------------------------------------------------------------------ connecting

    def _connect(self) -> None:
        try:
            self._pool.channel = self._dialer.dial()
        except Exception as e:  # noqa: BLE001 - e.g. a resolver failed: report, do not hang
            self.close(e)
            return
        if self._pool.channel.kind == "in-process" and not self._deadlines:
            self.direct = self._pool.channel.direct_calls(self._token)
        with self._lock:
            early, self._early = self._early, None
            if self.broken:
                self._pool.channel.close()  # close() came before the channel existed
                return
            if not early:
                return
            stream = self._pool.open()  # the early calls travel together
            if stream is None:
                self._early = early  # failed by close(), below
            else:
                for call_id, _, future in early:
                    stream.pending[call_id] = future
                stream.start_thread(self._serve_queue)
        if stream is None:
            self.close(self._went_away())
            return
        stream.outbox.put([frame for _, frame, _ in early])

    @property
    def address(self) -> str:
        """The server's address: the one given, or the last one resolved ("" before)."""
        return self._dialer.address

    @property
    def kind(self) -> str | None:
        """The transport this connection uses ('in-process', 'local', 'tcp', 'grpc'), once known."""
        channel = self._pool.channel
        return channel.kind if channel is not None else None

    # ------------------------------------------------------------------ streams

    def _went_away(self) -> errors.ServerUnavailableError:
        return errors.ServerUnavailableError(f"Courier server at {self.address} went away")

    def _drive(self, stream: PooledStream, call_id: int, frame: serialization.OutFrame,
               future: in_flight.Settleable) -> None:
        """Makes one call on this thread (see the module doc)."""
        # A deadline passed abandons the stream: this thread stops waiting (as a close does).
        if self._deadlines:
            future.add_done_callback(lambda _: self._abandon_if_waiting(stream, call_id))
        try:
            self._exchange(stream, [frame], caller_waits=not self._deadlines)
        except BaseException as e:  # e.g. KeyboardInterrupt while waiting: the stream is lost
            with self._lock:
                self._pool.streams.discard(stream)
                stream.pending = {}
            settle(future, exception=errors.ServerUnavailableError(
                f"Call to {self.address} was interrupted: {type(e).__name__}"))
            raise
        finally:
            with self._lock:
                self._driven -= 1

    def _abandon_if_waiting(self, stream: PooledStream, call_id: int) -> None:
        with self._lock:
            if call_id not in stream.pending:
                return
            del stream.pending[call_id]
            stream.abandoned = True
        stream.transport.cancel()

    def _exchange(self, stream: PooledStream, frames: list[serialization.OutFrame],
                  caller_waits: bool = False) -> bool:
        """Sends the frames as one message on the stream and delivers the replies to their
        calls. True when the stream is idle again; False when it ended. With
        `caller_waits`, this thread waits for nothing else (see streams.ClientStream)."""
        return self._guarded(stream, lambda: self._take_replies(stream, stream.transport.exchange(
            stream.chunks(frames), caller_waits, len(frames))))

    def _guarded(self, stream: PooledStream, work: Callable[[], bool]) -> bool:
        """`work()` on the stream; False, its calls failed, if the stream ended under it."""
        try:
            return work()
        except errors.StreamBroken as e:
            self._stream_broke(stream, streams.error_for_broken_stream(e, self.address))
        except Exception as e:  # noqa: BLE001 - a malformed reply: fail, do not hang
            stream.transport.finish()
            self._stream_broke(stream, e)
        return False

    def _take_replies(self, stream: PooledStream, reply: bytes | memoryview) -> bool:
        """Delivers `reply` and the stream's further ones until none is due; True when
        the stream is idle again."""
        while True:
            after = self._deliver(stream, reply)
            if after is After.LEAVE:
                return True
            if after is After.FINISH:
                stream.transport.finish()
                return False
            reply = stream.transport.receive()

    def _stream_broke(self, stream: PooledStream, error: Exception) -> None:
        with self._lock:
            abandoned = stream.abandoned and not stream.pending
        if not abandoned:  # a real failure, not a call given up by its caller
            self.close(error)
        with self._lock:
            self._pool.streams.discard(stream)
            self._queued_out.discard(stream)
        stream.outbox.put(None)  # its thread, if it has one and a caller drove it, ends too

    def _deliver(self, stream: PooledStream, message: bytes) -> After:
        frames = stream.transport.messages.frames(message)
        with self._lock:
            futures = [stream.pending.pop(frame.call_id, None) for frame in frames]
            if stream.pending:
                after = After.RECEIVE
            elif self.broken or stream.abandoned:
                after = After.FINISH
                self._pool.streams.discard(stream)
                stream.outbox.put(None)  # as in _stream_broke
            else:
                after = After.LEAVE
                self._pool.idle.append(stream)
            if after is not After.RECEIVE:
                self._queued_out.discard(stream)
        settle_replies(frames, futures, self.address)
        return after
