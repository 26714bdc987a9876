"""Courier: calls Python methods across processes over gRPC (see DESIGN.md section 5).

This package knows nothing of programs, nodes or launchers.
"""

import os

# gRPC's core logs routine connection events (e.g. GOAWAY at every server stop) at INFO to
# stderr; keep only errors unless the user asked for more. Must precede the first grpc import.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

# ruff: noqa: E402

from launchpad.courier.batching import batched_handler
from launchpad.courier.client import Client, list_methods
from launchpad.courier.errors import (
    AddressInUseError,
    CallTimeoutError,
    ClientClosedError,
    CourierError,
    PermissionDeniedError,
    RemoteError,
    SerializationError,
    ServerUnavailableError,
    UnknownMethodError,
)
from launchpad.courier.server import Server
from launchpad.courier.tls import TLS

__all__ = [
    "AddressInUseError", "CallTimeoutError", "Client", "ClientClosedError", "CourierError",
    "PermissionDeniedError", "RemoteError", "SerializationError", "Server",
    "ServerUnavailableError", "TLS", "UnknownMethodError", "batched_handler", "list_methods",
]
