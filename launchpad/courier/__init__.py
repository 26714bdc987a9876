"""Courier: calls Python methods across threads, processes and hosts (see DESIGN.md section 5).

A `Server` serves the public methods of an object on four transports at once (in the same
process, a Unix socket on the same host, a TCP port of its own and gRPC between hosts); a
`Client` calls them through the fastest that reaches it; a `GroupClient` calls a group of
servers at once. ARCHITECTURE.md and docs/internals/courier.md describe the modules.

The face is this package and its public modules (client, server, group, batching,
function_server, errors, tls, metrics); everything behind it is in private subpackages
(`_connection`, `_serving`, ...), imported by courier alone (tests/test_imports.py).

This package knows nothing of programs, nodes or launchers. `__all__` is the user's API.
The imports marked "a hook" are the framework's: for launchpad's own modules (telemetry,
the launchers, the nodes), importable from here and only here, and not part of the API.
"""

from launchpad.courier import _histogram as latency_histogram  # noqa: F401 (a hook)
from launchpad.courier._connection.channels import mode_of as transport_mode  # noqa: F401 (a hook)
from launchpad.courier._connection.in_flight import settle  # noqa: F401 (a hook)
from launchpad.courier._process.allocator import retain_freed_memory  # noqa: F401 (a hook)
from launchpad.courier._process.hosts import host_identity  # noqa: F401 (a hook)
from launchpad.courier._serving.served_methods import public_methods  # noqa: F401 (a hook)
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
from launchpad.courier.function_server import FunctionServer  # noqa: F401 (a hook)
from launchpad.courier.group import GroupClient
from launchpad.courier.metrics import MethodCounts  # noqa: F401 (a hook)
from launchpad.courier.metrics import summed as summed_metrics  # noqa: F401 (a hook)
from launchpad.courier.server import Server
from launchpad.courier.tls import TLS

__all__ = [
    "AddressInUseError", "batched_handler", "call", "CallTimeoutError", "Client",
    "ClientClosedError", "close", "CourierError", "GroupCallError", "GroupClient",
    "list_methods", "PermissionDeniedError", "RemoteError", "SerializationError", "Server",
    "ServerUnavailableError", "submit", "TLS", "transport_of", "UnknownMethodError",
]
