"""How a server answers its streams: each message's calls run, its replies yielded.

A stream's messages are answered one at a time, each by the thread that read it (a gRPC
server thread that took it from the completion queue, _grpc/grpc_server.py; a stream thread
its epoll woke, _sockets/socket_server.py), which runs the calls it reads (call_batches.py):

    read a message -> run its calls (quick ones here, in order; others on workers, but the
                      last) -> yield the replies (coalesced) -> read the next message

Running a call on the thread that read it costs no thread hand-off, and is safe because a
client sends a message on a stream only when every call it sent there before has been
answered (see _connection/connection.py): a call that blocks holds up no other call's run (a
quick method's, for `call_batches.INLINE_SECS` at most). A client of this process calls
straight in (`run_here`).

A client on this host may send large parts through shared memory (its stream's lane, see
_wire/messages.py), and invite replies the same way. The lane's region for replies is reused
from its start when the next message arrives: the client sends it only after reading every
reply to the one before.

The dispatcher keeps what a graceful stop needs: the calls received and not yet answered,
and the open streams, each waiting for its next message or not (`stop`).
"""

from __future__ import annotations

import collections
import hmac
import queue
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from absl import logging

from launchpad.courier import errors
from launchpad.courier._serving import call_batches, replies
from launchpad.courier._serving.method_calls import MethodCalls
from launchpad.courier._status import Status
from launchpad.courier._wire import streams

if TYPE_CHECKING:
    from launchpad.courier._serving.endpoints import Endpoints

_STREAMS_END_SECS = 1.0  # how long stop() waits for cancelled streams to let go of memory


class _CallHere:
    """A call run on its caller's thread (`run_here`), while it is unanswered."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class Dispatcher:
    """Answers the streams of one server, whose calls `calls` runs (see the module doc);
    what every transport's streams are served by (_serving/endpoints.Served)."""

    def __init__(self, obj: Any, token: str, thread_pool_size: int):
        self._token = token
        self._stopped = threading.Event()
        # Calls received and not yet answered, and open streams: stop() lets the first drain
        # and then ends the second, so no accepted call loses its reply. The calls are a
        # dict used as a set (one store or delete: atomic, no lock on the hot path); stop()
        # is woken as they change only once it has begun.
        self._unanswered: dict[Any, None] = {}
        self._drained = threading.Condition()
        # Open streams -> whether they wait for the next message (every reply sent).
        self._streams: dict[streams.Peer, bool] = {}
        self.calls = MethodCalls(obj, thread_pool_size, self._answered)
        self._batches = call_batches.CallBatches(self.calls.metrics)  # how a message's calls run

    # ------------------------------------------------------------------ streams

    def accepts_token(self, token: str) -> bool:
        """Whether a stream carrying `token` may be served: compared in constant time, as
        UTF-8 (hmac compares only ASCII text), so a token of any characters is only wrong."""
        if not self._token:
            return True
        return isinstance(token, str) and hmac.compare_digest(
            token.encode("utf-8", "surrogatepass"), self._token.encode("utf-8", "surrogatepass"))

    def open_socket_stream(self, peer: streams.Peer) -> None:
        """Takes a new socket stream (gRPC or socket): its token checked before anything of
        it is read (the stream aborted if it is wrong), its shared-memory lane accepted if
        offered, and the stream counted (`attach`)."""
        if not self.accepts_token(peer.token):
            peer.abort(Status.PERMISSION_DENIED, streams.REFUSED_DETAILS)
        peer.accept_shared_memory()
        self.attach(peer)

    def socket_replies(self, peer: streams.Peer, message: bytes | memoryview,
                       outbox: queue.SimpleQueue) -> Iterator[tuple[list, bool]]:
        """The chunks of each reply to one message of a socket stream (gRPC or socket), each
        with whether it is the last. The stream waits for its next message again once its
        transport, having sent the last reply, asks for more."""
        self._set_waiting(peer, False)
        yield from self._answer(peer, message, outbox, run_last_here=True)
        del message
        self._set_waiting(peer, True)

    def in_process_replies(self, peer: streams.Peer, message: bytes, outbox: queue.SimpleQueue,
                           run_last_here: bool) -> Iterator[tuple[list, bool]]:
        """The replies to one message of an in-process stream (in_process.py), each with
        whether it is the last; the stream waits again once it has the last."""
        self._set_waiting(peer, False)
        for reply, last in self._answer(peer, message, outbox, run_last_here):
            if last and peer in self._streams:  # (not if the stream was cancelled meanwhile)
                self._set_waiting(peer, True)
            yield reply, last

    def serving(self) -> bool:  # in_process.Target: False once stop() has begun
        return not self._stopped.is_set()

    def attach(self, peer: streams.Peer) -> None:
        """Counts a new stream, waiting for its first message; one that comes as it stops
        is ended (stop() ends those it counted before it began)."""
        self._set_waiting(peer, True)
        if not self.serving():
            peer.cancel()

    def detach(self, peer: streams.Peer) -> None:
        """Forgets a stream that ended."""
        with self._drained:
            self._streams.pop(peer, None)
            self._drained.notify_all()

    def run_here(self, name: str, args: tuple, kwargs: dict) -> Any:
        """Runs a call on this thread for a client of this process (MethodCalls.run_here),
        waited for by a stop as a stream's call is. Raises what it raised."""
        call = _CallHere(name)
        self._unanswered[call] = None  # first: a stop that begins now waits for it
        try:
            if self._stopped.is_set():
                raise errors.ServerUnavailableError(
                    f"Courier server at {self.calls.address} is stopping; {name!r} was not run")
            return self.calls.run_here(name, args, kwargs)
        finally:
            self._answered(call)

    # ------------------------------------------------------------------ stopping

    def stop(self, grace: float, listeners: Endpoints | None) -> None:
        """Refuses new calls and streams, gives the calls received `grace` seconds to be
        answered (and names those that were not), cancels every stream, stops the listeners
        and waits a moment for the streams to end."""
        self._stopped.set()
        self.calls.stop_waiting()
        if listeners is not None:
            listeners.refuse_new_streams()
        with self._drained:
            if not self._drained.wait_for(self._quiet, timeout=grace):
                self._warn_unanswered(grace)
            open_streams = list(self._streams)
        for stream in open_streams:
            stream.cancel()  # idle: its thread waits for a message that will not come
        if listeners is not None:
            listeners.stop()
        with self._drained:
            self._drained.wait_for(lambda: not self._streams, timeout=_STREAMS_END_SECS)
        self._batches.close()
        self.calls.close()

    def _warn_unanswered(self, grace: float) -> None:
        """Names the calls still running after the grace period (lock held). Their threads
        are left to them and end with their call, or with the process (see threads.py)."""
        calls = collections.Counter(frame.name for frame in list(self._unanswered))
        running = ", ".join(name if count == 1 else f"{name} (x{count})"
                            for name, count in sorted(calls.items()))
        logging.warning("Courier server at %s stopped with %d call(s) unanswered after %gs "
                        "(%s); they are left to finish and do not keep the process alive",
                        self.calls.address, len(self._unanswered), grace,
                        f"still running: {running}" if running else "replies not yet sent")

    def _quiet(self) -> bool:
        """Every call received has been answered and every reply sent (lock held)."""
        return not self._unanswered and all(self._streams.values())

    # ------------------------------------------------------------------ messages

    def _answer(self, peer: streams.Peer, message: bytes, outbox: queue.SimpleQueue,
                run_last_here: bool) -> Iterator[tuple[list, bool]]:
        """Runs the calls of one message and yields its replies (replies.replies)."""
        try:
            frames = peer.messages.frames(message)
        except ValueError as e:  # A malformed message: end this stream only.
            logging.warning("Courier server at %s ended a stream with a malformed message: %s",
                            self.calls.address, e)
            peer.abort(Status.INVALID_ARGUMENT, f"courier: {e}")
        peer.messages.peer_read_all()  # the client read every reply to its last message
        self._start_calls(frames, outbox, run_last_here)
        yield from replies.replies(outbox, len(frames), peer.messages,
                                   through_lane=frames[0].invites_shared_memory)

    def _set_waiting(self, peer: streams.Peer, waiting: bool) -> None:
        self._streams[peer] = waiting  # one dict store: atomic, no lock on the hot path
        if waiting and self._stopped.is_set():
            with self._drained:  # stop() waits for every stream to be waiting
                self._drained.notify_all()

    def _start_calls(self, frames: list, outbox: queue.SimpleQueue, run_last_here: bool) -> None:
        """Runs a message's calls (call_batches.py; on workers alone if not run_last_here)."""
        # A stop that begins after this check waits for these calls: their stream is not
        # waiting (it has a message), and the calls are unanswered before it returns.
        if not self._stopped.is_set():
            self._unanswered.update(dict.fromkeys(frames))
        else:
            for frame in frames:
                outbox.put(replies.error_frame(frame.call_id, errors.ServerUnavailableError(
                    f"Courier server at {self.calls.address} is stopping; {frame.name!r} was "
                    "not run")))
            return
        run, workers = self.calls.run, self.calls.workers
        if run_last_here:
            self._batches.run(frames, lambda frame: run(frame, outbox),
                              lambda frame: workers.submit(run, frame, outbox))
        else:
            for frame in frames:
                workers.submit(run, frame, outbox)

    def _answered(self, call: Any) -> None:
        del self._unanswered[call]
        if self._stopped.is_set():
            with self._drained:  # stop() waits for the calls to be answered
                self._drained.notify_all()
