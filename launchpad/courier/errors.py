"""Errors of the RPC layer, defined once.

Each class mixes in the builtin with the same meaning, so callers can catch either
(`except TimeoutError` catches `CallTimeoutError`), and has the status `code` of Launchpad's
courier errors (_status.py, gRPC's and absl's numbers: 4, DEADLINE_EXCEEDED, for a call that
timed out). A remote
exception whose type can be rebuilt on the client is raised with its own type instead, with
the remote traceback as `__cause__`; `RemoteError` is only the fallback for types that
cannot be rebuilt here.
"""

from __future__ import annotations

import difflib

from launchpad.courier._status import Status


class CourierError(Exception):
    """Base class of every error raised by the courier layer itself."""

    code = Status.UNKNOWN


class RemoteTraceback(Exception):
    """Carries the formatted traceback of a remote failure; set as `__cause__`."""

    def __init__(self, traceback_text: str):
        super().__init__(traceback_text)
        self.traceback_text = traceback_text

    def __str__(self) -> str:
        return "\n\"\"\"\n" + self.traceback_text.rstrip() + "\n\"\"\""


class RemoteError(CourierError):  # code UNKNOWN
    """A remote call raised an exception whose type cannot be rebuilt on this side.

    Attributes:
      type_name: the fully qualified name of the remote exception type.
      message: `str()` of the remote exception.
      remote_traceback: the remote traceback, formatted.
    """

    def __init__(self, type_name: str, message: str, remote_traceback: str):
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message
        self.remote_traceback = remote_traceback

    def __reduce__(self):
        return (type(self), (self.type_name, self.message, self.remote_traceback))


class UnknownMethodError(CourierError, AttributeError):
    """The server has no public method of that name; the message (Launchpad's words first:
    "method NAME not found", which code written for it looks for) names the server (a node
    as label/index, when its server was given that name), suggests the closest method it
    has, and lists them all.

    Args:
      method: the name called.
      available: the server's public methods.
      server: what the server is called: a node's name, else its address ('' if unknown).
    """

    code = Status.NOT_FOUND

    def __init__(self, method: str, available: list[str], server: str = ""):
        listing = ", ".join(available) if available else "(none)"
        close = difflib.get_close_matches(method, available, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        super().__init__(f"method {method} not found: {_server_named(server)} has no method "
                         f"{method!r}{hint}; its methods are: {listing}")
        self.method = method
        self.available = list(available)
        self.server = server

    def __reduce__(self):
        return (type(self), (self.method, self.available, self.server))


class CallTimeoutError(CourierError, TimeoutError):
    """A call did not complete within its `call_timeout` (deadline exceeded)."""

    code = Status.DEADLINE_EXCEEDED


class ServerUnavailableError(CourierError, ConnectionError):
    """The server could not be reached within the connect timeout, or the connection was lost
    while the call was in flight (the server stopped, crashed or became unreachable)."""

    code = Status.UNAVAILABLE


class PermissionDeniedError(CourierError, PermissionError):
    """The server refused the call because it did not carry the server's secret token."""

    code = Status.PERMISSION_DENIED


class SerializationError(CourierError, TypeError):
    """Arguments or a result could not be pickled or unpickled; names the method and argument."""

    code = Status.INVALID_ARGUMENT


class ClientClosedError(CourierError, RuntimeError):
    """The client was closed by its owner; no further calls can be made on it."""

    code = Status.CANCELLED


class AddressInUseError(CourierError, OSError):
    """A server could not bind its address (the port is taken or not available)."""

    code = Status.ALREADY_EXISTS


class GroupCallError(CourierError):
    """A call to a group (group.py) failed on some of its members.

    Attributes:
      method: the method called.
      results: each member's result, or the exception its call raised, in member order.
      failed: the names of the members whose call failed.
    """

    def __init__(self, method: str, results: list, failed: list[str]):
        first = next(r for r in results if isinstance(r, BaseException))
        super().__init__(f"{method!r} failed on {len(failed)} of {len(results)} members "
                         f"({', '.join(failed)}); the first: {type(first).__name__}: {first}")
        self.method = method
        self.results = results
        self.failed = failed

    def __reduce__(self):  # rebuilt whole where it is raised again (a caller of the caller)
        return type(self), (self.method, self.results, self.failed)


# Signals between a stream's transport and the server or client driving it, never raised
# to a user.


class StreamBroken(Exception):
    """The stream ended or failed; `code` and `details` are its final status."""

    def __init__(self, code: Status | None, details: str):
        super().__init__(f"{code.name if code is not None else 'unknown status'}: {details}")
        self.code = code
        self.details = details


class PeerAborted(Exception):
    """Raised by a server-side transport's `Peer.abort` to end the stream with a status."""

    def __init__(self, code: Status, details: str):
        super().__init__(details)
        self.code = code
        self.details = details


def _server_named(server: str) -> str:
    """'node server/0', 'courier server at host:port', or 'courier server'."""
    if not server:
        return "courier server"
    return f"courier server at {server}" if ":" in server else f"node {server}"
