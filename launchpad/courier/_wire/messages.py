"""How one stream's messages are packed and unpacked, through its shared-memory lane when it
has one (_shared_memory/lanes.py).

Each stream owns its `Messages` (a client's stream and the server's view of it alike): the
transport that accepts a lane sets it here, and closes it with the stream, so nothing that
drives a stream (a connection, the server) ever holds a lane itself.
"""

from __future__ import annotations

from launchpad.courier._shared_memory import lanes
from launchpad.courier._wire import serialization


class Messages:
    """One stream's messages, and its lane (None: every part travels inline)."""

    __slots__ = ("lane",)

    def __init__(self):
        self.lane: lanes.Lane | None = None

    def chunks(self, frames: list[serialization.OutFrame], through_lane: bool = True) -> list:
        """The frames as one message's chunks; large parts through the lane when there is
        one and `through_lane` (a server's replies: when their call invited it)."""
        lane = self.lane if through_lane else None
        return serialization.message_chunks(frames, lane.writer if lane else None)

    def frames(self, message: bytes | memoryview) -> list[serialization.Frame]:
        """The frames of a received message, large parts copied out of the peer's regions.

        Raises:
          ValueError: the message is malformed (serialization.decode_message).
        """
        return serialization.decode_message(message, self.lane.reader if self.lane else None)

    def peer_read_all(self) -> None:
        """The peer has read every part this side placed: the lane's region is reused from
        its start (a client before it sends, a server as it receives: lanes.py)."""
        if self.lane is not None:
            self.lane.writer.reset()

    def close(self) -> None:
        """Lets go of the lane (the stream ended)."""
        if self.lane is not None:
            self.lane.close()
            self.lane = None
