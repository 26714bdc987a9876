"""What courier's gRPC client and server agree on: the methods, the metadata, the options
both set, and how courier's status codes (_status.py) map to gRPC's.

A courier stream is one bidirectional call of `STREAM_METHOD`, carrying the token (and a
shared-memory offer) in its metadata. `OFFER_METHOD` asks a server for the TCP port of its
records (_sockets/tcp_sockets.py), answered in the status's metadata under `PORT_METADATA_KEY`.
"""

from __future__ import annotations

import grpc
from grpc import _common as grpc_common

from launchpad.courier._status import Status

STREAM_METHOD = "/launchpad.courier.Courier/Stream"
OFFER_METHOD = "/launchpad.courier.Courier/TcpPort"
TOKEN_METADATA_KEY = "x-courier-token"
SHARED_MEMORY_METADATA_KEY = "x-courier-shared-memory"
PORT_METADATA_KEY = "x-courier-tcp-port"

MESSAGE_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
]

# Courier's codes are gRPC's numbers: each maps to the gRPC code of its number.
_TO_GRPC = {Status(code.value[0]): code for code in grpc.StatusCode
            if code.value[0] in Status._value2member_map_}


def core_status(status: Status):
    """The gRPC core's code (cygrpc) for courier's `status`, as a server ends a stream."""
    return grpc_common.STATUS_CODE_TO_CYGRPC_STATUS_CODE[_TO_GRPC[status]]


def status_of_core(code) -> Status:
    """Courier's status for the gRPC core's `code` a stream ended with (UNKNOWN if courier
    has no such code)."""
    found = grpc_common.CYGRPC_STATUS_CODE_TO_STATUS_CODE.get(code)
    return Status.UNKNOWN if found is None else Status.of(found.value[0])


def metadata_value(metadata, wanted: str) -> str:
    """The value of key `wanted` in gRPC metadata, or "" if it is not there."""
    for key, value in metadata or ():
        if key == wanted:
            return value
    return ""
