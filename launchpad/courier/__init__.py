"""Courier: calls Python methods across threads, processes and hosts (see DESIGN.md section 5).

A `Server` serves the public methods of an object on three transports at once (in the same
process, a Unix socket on the same host, gRPC between hosts); a `Client` calls them through
the fastest that reaches it; a `GroupClient` calls a group of servers at once.
ARCHITECTURE.md describes the modules.

This package knows nothing of programs, nodes or launchers. What the rest of launchpad uses
of it is exported here, and only here: its modules are private to it (tests/test_imports.py).
"""

from launchpad.courier import _histogram as latency_histogram
from launchpad.courier._connection.channels import mode_of as transport_mode
from launchpad.courier._connection.in_flight import settle
from launchpad.courier._process.allocator import retain_freed_memory
from launchpad.courier._process.hosts import host_identity
from launchpad.courier._serving.served_methods import public_methods
from launchpad.courier.batching import batched_handler
from launchpad.courier.client import Client, call, close, list_methods, submit, transport_of
from launchpad.courier.errors import (
    AddressInUseError,
    CallTimeoutError,
    ClientClosedError,
    CourierError,
    GroupCallError,
    PermissionDeniedError,
    RemoteError,
    SerializationError,
    ServerUnavailableError,
    UnknownMethodError,
)
from launchpad.courier.function_server import FunctionServer
from launchpad.courier.group import GroupClient
from launchpad.courier.metrics import MethodCounts
from launchpad.courier.metrics import summed as summed_metrics
from launchpad.courier.server import Server
from launchpad.courier.tls import TLS

__all__ = [
    "AddressInUseError", "batched_handler", "call", "CallTimeoutError", "Client",
    "ClientClosedError", "close", "CourierError", "FunctionServer", "GroupCallError",
    "GroupClient", "host_identity", "latency_histogram", "list_methods", "MethodCounts",
    "PermissionDeniedError", "public_methods", "RemoteError", "retain_freed_memory",
    "SerializationError", "Server", "ServerUnavailableError", "settle", "submit", "summed_metrics",
    "TLS", "transport_mode", "transport_of", "UnknownMethodError",
]
