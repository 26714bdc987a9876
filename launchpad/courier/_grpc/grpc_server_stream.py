"""The server's end of one gRPC stream (`ServerStream`), its operations started in order and
completed on the server's queue (grpc_server.py), and the server's view of its client
(`GrpcPeer`)."""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable
from typing import NoReturn

from absl import logging
from grpc._cython import cygrpc

from launchpad.courier import errors
from launchpad.courier._grpc.grpc_wire import (
    SHARED_MEMORY_METADATA_KEY,
    TOKEN_METADATA_KEY,
    core_status,
    metadata_value,
)
from launchpad.courier._shared_memory import lanes, memory_files
from launchpad.courier._status import Status
from launchpad.courier._wire.messages import Messages

# The operations of a stream, each at most once on its way (the tag of its completion).
CLOSE, METADATA, RECEIVE, SEND, STATUS = "close", "metadata", "receive", "send", "status"
_NO_FLAGS = 0


class ServerStream:
    """The server's end of one gRPC stream, its operations completed on the server's queue
    (whichever thread takes them). It is let go once it is over: nothing of it on its way,
    and no thread answering it."""

    def __init__(self, call, gone: Callable[[ServerStream], None]):
        self.peer: GrpcPeer | None = None  # once attached
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._call = call
        self._gone = gone
        self._lock = threading.Lock()
        self._due: set[str] = set()
        self._queued: collections.deque = collections.deque()  # sends after the one on its way
        self._sending = False
        self._busy = 0  # threads answering it
        self._broken = False
        self._metadata_sent = False
        self._ended = False
        # Learns when the call is over (its status sent, its client's cancel, its
        # connection lost): until then, the stream is not let go.
        self._start((cygrpc.ReceiveCloseOnServerOperation(_NO_FLAGS),), CLOSE)

    def __enter__(self) -> None:
        """A thread answers the stream: it is not let go meanwhile. (Two may, for a moment:
        one that has just opened the receive of the next message, and the one that takes
        that message.)"""
        with self._lock:
            self._busy += 1

    def __exit__(self, kind, error, traceback) -> bool:
        """The thread is done with the stream; how the answer failed ends it so (with the
        status of an abort, or broken), and one that is over is let go."""
        try:
            if isinstance(error, errors.PeerAborted):
                self.end(error.code, error.details)
            elif isinstance(error, errors.StreamBroken):
                self.cancel()
            elif isinstance(error, Exception):  # a failure of ours: said, not its text
                logging.error("Courier gRPC stream failed", exc_info=error)
                self.end(Status.INTERNAL, "courier: the server failed (see its log)")
        except errors.StreamBroken:
            self.cancel()
        with self._lock:
            self._busy -= 1
            over = self._over()
        if over:
            self._let_go()
        return isinstance(error, Exception)

    def send_initial_metadata(self, metadata: tuple) -> None:
        self._metadata_sent = True
        self._start((cygrpc.SendInitialMetadataOperation(metadata, _NO_FLAGS),), METADATA)

    def receive(self) -> None:
        """Opens the receive of the next message."""
        self._start((cygrpc.ReceiveMessageOperation(_NO_FLAGS),), RECEIVE)

    def send(self, chunks: list, then_receive: bool) -> None:
        """Sends a reply, with the receive of the next message if it is the last."""
        operations = (cygrpc.SendMessageOperation(b"".join(chunks), _NO_FLAGS),)
        if then_receive:
            self._send_in_order(operations + (cygrpc.ReceiveMessageOperation(_NO_FLAGS),),
                                RECEIVE)
        else:
            self._send_in_order(operations, SEND)

    def end(self, code: Status, details: str, metadata: tuple = ()) -> None:
        """Ends the stream with a status (after every message sent)."""
        if self._ended:
            return
        self._ended = True
        status = core_status(code)
        self._send_in_order((cygrpc.SendStatusFromServerOperation(metadata, status, details,
                                                                  _NO_FLAGS),), STATUS)

    def cancel(self) -> None:
        """Ends the stream without a status (it broke), if it has not ended."""
        if not self._ended:
            self._ended = True
            self._call.cancel(cygrpc.StatusCode.cancelled, "courier: the stream ended")

    def completed(self, operation: str, success: bool) -> None:
        """Notes an operation's completion; starts the send it held up, if any."""
        with self._lock:
            self._due.discard(operation)
            if operation in (SEND, RECEIVE, STATUS):
                self._sending = False
                if not success:
                    self._broken = True
                elif self._queued:
                    try:
                        self._start_locked(*self._queued.popleft())
                        self._sending = True
                    except errors.StreamBroken:
                        pass  # the call is over: its close comes, and lets the stream go
            over = self._over()
        if over:
            self._let_go()

    def _send_in_order(self, operations: tuple, tag: str) -> None:
        if not self._metadata_sent:
            self._metadata_sent = True
            operations = (cygrpc.SendInitialMetadataOperation((), _NO_FLAGS), *operations)
        with self._lock:
            if self._broken:
                raise errors.StreamBroken(Status.CANCELLED, "the send failed")
            if self._sending:
                self._queued.append((operations, tag))
            else:
                self._start_locked(operations, tag)
                self._sending = True

    def _start(self, operations: tuple, tag: str) -> None:
        with self._lock:
            self._start_locked(operations, tag)

    def _start_locked(self, operations: tuple, tag: str) -> None:
        if self._call.start_server_batch(operations, (self, tag)) != cygrpc.CallError.ok:
            self._broken = True
            raise errors.StreamBroken(Status.CANCELLED, "the stream is over")
        self._due.add(tag)

    def _over(self) -> bool:
        """Nothing of the stream on its way (its close among it: the call is over) and no
        thread answering it (lock held)."""
        return not self._due and not self._busy and self._call is not None

    def _let_go(self) -> None:
        with self._lock:
            if self._call is None:
                return
            self._call = None  # (once)
        self._gone(self)


class GrpcPeer:
    """The server's view of one gRPC stream (streams.Peer)."""

    __slots__ = ("token", "messages", "_stream", "_offer")

    def __init__(self, stream: ServerStream, metadata):
        self.token = metadata_value(metadata, TOKEN_METADATA_KEY)
        self.messages = Messages()
        self._stream = stream
        self._offer = metadata_value(metadata, SHARED_MEMORY_METADATA_KEY)

    def accept_shared_memory(self) -> None:
        """If the client offered a lane and its probe is readable from here, answers with
        this process's probe and takes the lane."""
        if not self._offer or not lanes.enabled():
            return
        peer = memory_files.verify_probe(self._offer)
        if peer is not None:
            self._stream.send_initial_metadata(
                ((SHARED_MEMORY_METADATA_KEY, memory_files.local_probe()),))
            self.messages.lane = lanes.Lane(peer)

    def abort(self, code: Status, details: str) -> NoReturn:
        raise errors.PeerAborted(code, details)

    def cancel(self) -> None:
        """Nothing here: the server's graceful stop (GrpcServer.stop) ends the stream once
        what it sent has gone out. Cancelling it now could drop a reply gRPC has accepted
        but not yet written (a call that ended its node lost its reply so)."""
