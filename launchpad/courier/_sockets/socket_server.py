"""The socket transports' server side: a server's Unix socket (or TCP port), its streams
on few threads.

See unix_sockets.py for the transport, its sockets and who may use them; tcp_sockets.py
for the same records over TCP, between hosts, which this server serves the same way but for
who may connect (anyone: the hello's token decides) and shared memory (never).

* **Accepting.** One thread accepts connections, checks each peer's uid at once, and looks
  at (peeks) its hello as its bytes come, within `HANDSHAKE_SECS`: a connection without its
  hello holds no thread. At most `MAX_HANDSHAKES` wait for theirs at once; the one that has
  waited longest is let go for a newer one (a client sends its hello at once, so the oldest
  is the likeliest to be a peer that says nothing), and so is it when accepting finds no
  file descriptor left.
* **Serving.** A stream whose hello is whole joins the server's epoll, where its socket
  waits for its next message (once: `EPOLLONESHOT`). The server's stream threads wait in
  that epoll (mostly one, see below), and the one that takes a stream with a message
  answers it (the token checked first, for a stream's first message) with the server's
  handler, running the calls as server.py says, and goes on with the next message while
  one comes within `_NEXT_MESSAGE_SPIN_SECS` (only for a stream that calls back to back
  while no other stream has a message); then it hands the stream back to the epoll.
  A thread is added when none has waited for `_RELIEF_SECS` and none has taken a stream
  meanwhile (threads.Pollers): streams calling at once are served one after another by one
  thread, which the GIL would have made them anyway, with no wake-up while one is ready.

So a thread serves a stream only while a message of it is being answered. A server of
thousands of idle or slow streams (a controller of thousands of nodes) runs on a few
threads, with at most one wake-up per message: a thread per stream made every message
wake one of thousands of threads, each to take the GIL in turn, and stopped at 4,096.
"""

from __future__ import annotations

import collections
import errno
import os
import select
import socket
import threading
import time

from absl import logging

from launchpad.courier import errors
from launchpad.courier._process import threads
from launchpad.courier._sockets import records, socket_wire, tcp_sockets, unix_sockets
from launchpad.courier._sockets.served_streams import ServedStream, SocketPeer
from launchpad.courier._status import Status
from launchpad.courier._wire import streams
from launchpad.courier.tls import TLS

HANDSHAKE_SECS = 5.0
MAX_HANDSHAKES = 1024
_MAX_THREADS = 4096  # streams being answered at once (a call that blocks holds one)
_BACKLOG = 4096
_ACCEPTS_PER_WAKE = 64  # then hellos that came meanwhile are looked at
_ACCEPT_RETRY_SECS = 0.05
# How long a stream's thread polls for the next message after a reply before it hands the
# stream back (records.Reader.ready; socket_client.py says why a poll is worth it), if the
# stream's last message came within `_HOT_GAP_SECS` of the reply before it. A stream whose
# client calls now and then (a node's heartbeat) is not polled: with thousands of them,
# polling cost a third of the server's CPU and found nothing.
_NEXT_MESSAGE_SPIN_SECS = 50e-6
_HOT_GAP_SECS = 1e-3
_HOT_HOLD_SECS = 0.05
_RELIEF_SECS = 2e-3  # how long streams may wait for a thread while all are busy
_WAITING = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLONESHOT
_GREETING = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET


class SocketServer:
    """Listens on a server's Unix socket and TCP port and serves their streams (see the
    module doc)."""

    def __init__(self, service: streams.SocketService,
                 listeners: list[tuple[socket.socket, str | None]]):
        """Serves the streams that each listener (listening, non-blocking) accepts: on a
        Unix socket (with its path, removed at stop) this user's alone; on a TCP port
        (tcp_sockets.py) anyone's, their hello's token deciding. One accepting thread and
        one pool of stream threads serve them all."""
        self._service = service
        self._listeners = {listener.fileno(): listener for listener, _ in listeners}
        self.path = next((path for _, path in listeners if path is not None), None)
        self.port = next((listener.getsockname()[1] for listener, _ in listeners
                          if listener.family != socket.AF_UNIX), None)
        self._stopped = False
        self._lock = threading.Lock()
        self._streams: dict[int, ServedStream] = {}  # fd -> every connection not yet closed
        self._greeting: collections.OrderedDict[int, ServedStream] = collections.OrderedDict()
        self._running = 2  # the accepting thread, and the stream threads (all of them)
        self._greeter = select.epoll()  # the listeners and connections without their hello
        self._served = select.epoll()  # streams waiting for their next message
        # Written by stop(), for the accepting thread; and once the server and its last
        # stream have ended, for the stream threads (level-triggered: every one sees it).
        self._stop_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._end_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._inode = os.stat(self.path).st_ino if self.path is not None else None
        for fd in self._listeners:
            self._greeter.register(fd, select.EPOLLIN)
        self._greeter.register(self._stop_fd, select.EPOLLIN)
        self._stop_signal = select.poll()  # stop() alone, for the accepting thread's waits
        self._stop_signal.register(self._stop_fd, select.POLLIN)
        self._served.register(self._end_fd, select.EPOLLIN)
        self._thread = threading.Thread(target=self._accept_and_greet,
                                        name="courier-local-accept", daemon=True)
        self._stream_threads = threads.Pollers("courier-local", self._next_ready, self._serve,
                                               ended=self._thread_ends,
                                               max_threads=_MAX_THREADS,
                                               relief_secs=_RELIEF_SECS)
        self._last_served = -1  # the stream whose message was read last
        self._others_served = 0.0  # when another stream's message was read (perf_counter)

    @classmethod
    def bind(cls, service: streams.SocketService, host: str, port: int,
             tls: TLS | None, tcp: bool = True) -> SocketServer | None:
        """The listeners of the server at host:port: its Unix socket, where this host has a
        usable socket directory, and without TLS (and with `tcp`) its TCP port; None if it
        gets neither (it is then reached through gRPC alone)."""
        listeners: list[tuple[socket.socket, str | None]] = []
        path = unix_sockets.server_path(host, port, tls)
        try:
            if path is not None:
                listeners.append((unix_sockets.listen(path, _BACKLOG), path))
        except OSError as e:
            logging.warning("Courier server on port %d has no local socket (%s); same-host "
                            "clients use another transport", port, e)
        try:
            if tls is None and tcp:
                listeners.append((tcp_sockets.listen(host, _BACKLOG), None))
        except OSError as e:
            logging.warning("Courier server on port %d has no TCP port for its records (%s); "
                            "other hosts' clients use gRPC", port, e)
        return cls(service, listeners) if listeners else None

    def start(self) -> None:
        self._thread.start()
        self._stream_threads.start()

    def stop(self) -> None:
        """Stops accepting and lets go of connections still without a hello. Open streams
        go on until the server ends them (through their peers) or their clients do; the
        stream threads end with the last of them."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            ended = not self._streams
        try:
            if self.path is not None and os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)  # (not a newer server's socket)
        except OSError:
            pass
        self._signal(self._stop_fd)
        if ended:
            self._signal(self._end_fd)

    # ------------------------------------------------------------- the accepting thread

    def _accept_and_greet(self) -> None:
        while not self._stopped:
            try:
                events = self._greeter.poll(self._until_first_deadline())
            except InterruptedError:
                continue
            for fd, _ in events:
                if fd in self._listeners:
                    self._accept(self._listeners[fd])
                elif fd != self._stop_fd:
                    stream = self._greeting.get(fd)
                    if stream is not None:
                        self._greet(stream)
            self._let_go_of_silent(time.monotonic())
        for fd, listener in self._listeners.items():
            self._greeter.unregister(fd)
            listener.close()
        for stream in list(self._greeting.values()):
            self._close(stream)
        self._thread_ends()

    def _accept(self, listener: socket.socket) -> None:
        local = listener.family == socket.AF_UNIX
        for _ in range(_ACCEPTS_PER_WAKE):
            try:
                connection, _ = listener.accept()
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE) and self._greeting:
                    self._close(next(iter(self._greeting.values())))  # room for this one
                    continue
                # No descriptor, and no silent peer to let go: the backlog waits, and so
                # does this thread, a moment (or until stop), rather than spin.
                self._stop_signal.poll(_ACCEPT_RETRY_SECS * 1000)
                return
            if local and unix_sockets.peer_uid(connection) != os.getuid():
                connection.close()
                continue
            if not local:
                tcp_sockets.tune(connection)
            connection.setblocking(False)
            stream = ServedStream(connection, time.monotonic() + HANDSHAKE_SECS, local)
            with self._lock:
                self._streams[stream.fd] = stream
            self._greeting[stream.fd] = stream
            stream.epoll = self._greeter
            self._greeter.register(stream.fd, _GREETING)
            if len(self._greeting) > MAX_HANDSHAKES:
                self._close(next(iter(self._greeting.values())))

    def _greet(self, stream: ServedStream) -> None:
        """Hands a connection whose hello is whole to the stream threads; lets go of one
        whose first record is no hello."""
        verdict = socket_wire.peek_hello(stream.connection)
        if verdict is None:
            return  # its hello is still on its way
        if not verdict:
            self._close(stream)
            return
        del self._greeting[stream.fd]
        self._greeter.unregister(stream.fd)
        stream.connection.setblocking(True)
        stream.epoll = self._served
        self._served.register(stream.fd, _WAITING)

    def _until_first_deadline(self) -> float:
        """Seconds until the oldest greeting connection's hello is due (-1: none waits)."""
        first = next(iter(self._greeting.values()), None)
        return -1 if first is None else max(0.0, first.deadline - time.monotonic())

    def _let_go_of_silent(self, now: float) -> None:
        while self._greeting:
            first = next(iter(self._greeting.values()))
            if first.deadline > now:
                return
            self._close(first)

    # ------------------------------------------------------------------ stream threads

    def _next_ready(self) -> ServedStream | object:
        """The next stream with a message, for a stream thread; threads.ENDED once the
        server has ended and its last stream with it."""
        while True:
            with self._lock:
                if self._stopped and not self._streams:
                    return threads.ENDED
            try:
                events = self._served.poll(-1, 1)
            except InterruptedError:
                continue
            with self._lock:
                stream = self._streams.get(events[0][0]) if events else None
            if stream is not None:
                return stream

    def _serve(self, stream: ServedStream) -> None:
        """Answers the stream's messages while they come; then hands it back to the epoll."""
        try:
            if stream.peer is not None:
                ready = True  # the epoll said so
            elif self._open(stream):
                ready = stream.reader.ready(0)  # (the first message comes with the hello)
            else:
                return
            while ready:
                try:
                    kind, message = stream.reader.read()
                    now = time.perf_counter()
                    stream.hot = now - stream.replied < _HOT_GAP_SECS
                    if self._last_served != stream.fd:  # (a race here only mistimes a poll)
                        self._last_served, self._others_served = stream.fd, now
                except (EOFError, OSError):
                    kind = None  # the client went away: the stream ends
                except ValueError as e:
                    raise errors.PeerAborted(Status.INVALID_ARGUMENT,
                                             f"courier: {e}") from None
                if kind != socket_wire.MESSAGE:  # the client ended the stream
                    self._finish(stream, Status.OK, "")
                    return
                for reply, _ in self._service.socket_replies(stream.peer, message,
                                                             stream.outbox):
                    records.send(stream.connection, socket_wire.MESSAGE, reply)
                del message  # not kept while the stream waits for its next one
                stream.replied = time.perf_counter()
                if stream.hot and stream.replied - self._others_served > _HOT_GAP_SECS:
                    ready = (stream.reader.ready(_NEXT_MESSAGE_SPIN_SECS)
                             or stream.reader.wait())
                else:
                    ready = stream.reader.ready(0)
        except errors.PeerAborted as e:
            self._finish(stream, e.code, e.details)
            return
        except (OSError, EOFError, ValueError):  # the client went away, or its hello broke
            self._close(stream)
            return
        except Exception:  # noqa: BLE001 - a failure of ours: said to the client, not its text
            logging.exception("Courier local stream failed")
            self._finish(stream, Status.INTERNAL,
                         "courier: the server failed (see its log)")
            return
        self._wait_for_next(stream)

    def _open(self, stream: ServedStream) -> bool:
        """Reads the hello (whole by now), opens the stream and answers; False if the
        stream ended instead (its hello broken, or its token refused)."""
        kind, hello = stream.reader.read()
        fields = socket_wire.parse_hello(hello) if kind == socket_wire.HELLO else None
        if fields is None:
            self._close(stream)
            return False
        token, probe = fields
        # A lane only on this host's socket: a TCP peer's memory files are not here.
        peer = SocketPeer(stream.connection, token, probe if stream.local else "")
        self._service.open_socket_stream(peer)  # (PeerAborted if refused: nothing attached)
        stream.peer = peer
        stream.reader.max_length = socket_wire.MAX_MESSAGE
        stream.reader.hold(_HOT_HOLD_SECS)
        records.send(stream.connection, socket_wire.ANSWER, [peer.answer.encode()])
        return True

    def _wait_for_next(self, stream: ServedStream) -> None:
        """Hands an idle stream back to the epoll until its next message comes. (No lock:
        a stream is closed only by the thread that serves it, and a system call under the
        lock would make the other threads wait for it.)"""
        stream.reader.release()
        self._served.modify(stream.fd, _WAITING)

    def _finish(self, stream: ServedStream, code: Status, details: str) -> None:
        """Ends a stream with its status, which the client reads as its end."""
        try:
            records.send(stream.connection, socket_wire.STATUS,
                         [socket_wire.status(code, details)])
        except OSError:
            pass  # the client went away
        self._close(stream)

    # ------------------------------------------------------------------ either thread

    def _close(self, stream: ServedStream) -> None:
        """Closes a connection: one greeting on the accepting thread, any other on the
        thread serving it (so never twice at once)."""
        if stream.epoll is self._greeter:
            del self._greeting[stream.fd]
        stream.epoll.unregister(stream.fd)
        with self._lock:
            del self._streams[stream.fd]
            last = self._stopped and not self._streams
        if stream.peer is not None:
            stream.peer.messages.close()
            self._service.detach(stream.peer)
        stream.connection.close()
        if last:
            self._signal(self._end_fd)  # the stream threads end with the last stream

    def _thread_ends(self) -> None:
        """The accepting thread, or the last stream thread, has ended; the second of them
        closes what they used."""
        with self._lock:
            self._running -= 1
            last = self._running == 0
        if last:
            self._close_fds()

    def _signal(self, eventfd: int) -> None:
        with self._lock:  # (never a closed descriptor, whose number may be another's now)
            if self._stop_fd >= 0:
                os.eventfd_write(eventfd, 1)

    def _close_fds(self) -> None:
        for listener in self._listeners.values():
            listener.close()
        self._greeter.close()
        self._served.close()
        with self._lock:
            os.close(self._stop_fd)
            os.close(self._end_fd)
            self._stop_fd = self._end_fd = -1
