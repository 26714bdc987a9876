"""Courier's status codes: how a stream ends, whatever its transport.

A stream ends with a code and its details: sent in the socket transports' status record,
raised between a transport and what drives it (errors.StreamBroken, errors.PeerAborted),
and mapped to one courier error in one place (streams.error_for_broken_stream). The numbers
are gRPC's (and absl's), which Launchpad's courier errors carried as their `code`; gRPC's own
`grpc.StatusCode` is met only at the gRPC transport's edge, which maps it to and from these.
"""

from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """A stream's final status (the subset of gRPC's codes courier uses)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14

    @classmethod
    def of(cls, number: int) -> Status:
        """The status numbered `number`; UNKNOWN for a number courier does not use."""
        try:
            return cls(number)
        except ValueError:
            return cls.UNKNOWN
