"""The courier client: calls methods of a remote courier server as if they were local.

    client.method(*args)            blocks for the result (or raises the remote exception)
    client.futures.method(*args)    returns a concurrent.futures.Future at once
    client(*args)                   calls the remote object's __call__

A client's namespace is its server's: every public name but `futures` and `address` (as in
Launchpad's client) is a remote method, `close` and `call` included. What is ours to do with
a client is a function of this module instead: `close(client)`, `transport_of(client)`,
`call(client, name, ...)` and `submit(client, name, ...)` (a method named at run time).
A client connects lazily, on its first call, and reconnects by itself after the connection is
lost: calls in flight when a server dies fail with `ServerUnavailableError`, later calls go to
the server at its (re-resolved) address. Every wait is bounded: connecting by
`connect_timeout`, each call by `call_timeout` when set. A client pickles with all its options.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import keyword
import weakref
from collections.abc import Callable
from typing import Any, Protocol, Union

from launchpad.courier import errors
from launchpad.courier._connection import channels as _transport
from launchpad.courier._connection.connection import Connection
from launchpad.courier._connection.deadlines import DeadlineWatcher
from launchpad.courier._connection.in_flight import BlockingCall, StartedCall, settle
from launchpad.courier._connection.slot import ConnectionSlot
from launchpad.courier._in_process import direct_calls
from launchpad.courier._serving.served_methods import LIST_METHODS
from launchpad.courier._wire import serialization
from launchpad.courier.tls import TLS

Timeout = Union[None, int, float, datetime.timedelta]


class AddressResolver(Protocol):
    """Finds a server's address at connect time (e.g. by asking a program's controller)."""

    def resolve(self, timeout: float) -> str:
        ...


def _seconds(value: Timeout, name: str) -> float | None:
    """Normalises a timeout given as seconds or timedelta; 0 and None mean no timeout."""
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be seconds (int/float) or a timedelta, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return float(value) or None


class Client:
    """A client of one courier server.

    Args:
      address: 'host:port', or an `AddressResolver` asked on every (re)connect.
      token: the server's secret token.
      call_timeout: seconds (or timedelta) a call may take; 0/None waits as long as it takes.
      wait_for_ready: wait up to `connect_timeout` for an unreachable server to come up;
        False fails at once.
      connect_timeout: seconds to wait for the server to be reachable before the calls waiting
        for it fail with `ServerUnavailableError`.
      compress: gzip messages on the wire (over gRPC: the other transports do not
        compress).
      tls: connect over TLS, presenting its certificate and checking the server's (see
        tls.py); None connects in plaintext.
      transport: which transports may carry the calls (see channels.py): "auto" (the
        fastest that reaches the server: in this process, this host's Unix socket, the
        server's TCP port, gRPC), "local" (never in-process), "tcp" (the TCP port even on
        this host), "grpc" (gRPC only); None follows the environment variable
        LAUNCHPAD_COURIER_TRANSPORT, else "auto".
    """

    def __init__(self, address: str | AddressResolver, *, token: str = "",
                 call_timeout: Timeout = None, wait_for_ready: bool = True,
                 connect_timeout: Timeout = 30.0, compress: bool = False,
                 tls: TLS | None = None, transport: str | None = None):
        if not isinstance(address, str) and not hasattr(address, "resolve"):
            raise TypeError(f"address must be 'host:port' or a resolver, got {address!r}")
        if transport is not None:
            _transport.mode_of(transport)  # refuses a bad option now, not at the first call
        self._address = address
        self._token = token
        self._call_timeout = _seconds(call_timeout, "call_timeout")
        self._wait_for_ready = wait_for_ready
        self._connect_timeout = _seconds(connect_timeout, "connect_timeout")
        self._compress = compress
        self._tls = tls
        self._transport = transport
        self._slot = ConnectionSlot()
        self._deadlines = DeadlineWatcher()
        # Dropping a client without close() must not leave its threads and stream behind.
        weakref.finalize(self, self._slot.close, "the client was garbage collected")
        weakref.finalize(self, self._deadlines.close)

    @property
    def futures(self) -> "_FuturesView":
        """`client.futures.method(...)` starts a call and returns its Future at once."""
        return _FuturesView(self)

    @property
    def address(self) -> str:
        """The address given, or the last one resolved."""
        if isinstance(self._address, str):
            return self._address
        current = self._slot.connection
        return current.address if current and current.address else repr(self._address)

    def __reduce__(self):
        return (_rebuild_client, (self._address, {
            "token": self._token, "call_timeout": self._call_timeout,
            "wait_for_ready": self._wait_for_ready, "connect_timeout": self._connect_timeout,
            "compress": self._compress, "tls": self._tls, "transport": self._transport}))

    def __getattr__(self, name: str) -> Callable[..., Any]:
        _check_remote_name(name)
        return lambda *args, **kwargs: self._call(name, *args, **kwargs)

    def __call__(self, *args, **kwargs) -> Any:
        return self._call("__call__", *args, **kwargs)

    def _call(self, method: str, /, *args, **kwargs) -> Any:
        """Calls `method` on the server and waits for its result.

        The call is made on this thread (no hand-off to another one) once the client is
        connected, and to a server of this process without a message (direct_calls.py);
        with a `call_timeout`, it fails with `CallTimeoutError` when that expires.
        """
        connection = self._slot.connection
        if connection is not None and connection.direct is not None and not connection.broken:
            result = connection.direct.call(method, args, kwargs)
            if result is not direct_calls.NOT_HERE:
                return result
        return self._send(method, serialization.dumps_call_arguments(method, args, kwargs),
                          drive=True).result()

    def _submit(self, method: str, /, *args, **kwargs) -> concurrent.futures.Future:
        """Starts a call of `method` and returns its future at once.

        With a `call_timeout`, the future fails with `CallTimeoutError` when it expires.
        `future.cancel()` works until the reply arrives (the server still runs the call).
        """
        return self._submit_parts(method,
                                  serialization.dumps_call_arguments(method, args, kwargs))

    def _submit_parts(self, method: str, parts: list) -> concurrent.futures.Future:
        """`_submit` of arguments pickled already (serialization.dumps_call_arguments): a
        group's call pickles them once for all its members (group.py)."""
        future = self._send(method, parts, drive=False)
        # A client nobody holds closes its connection: a future holds its client, so that
        # `handle.dereference().futures.m()` gets its reply.
        future.courier_client = self
        return future

    def _start_parts(self, method: str, parts: list) -> StartedCall | None:
        """Sends a call of arguments pickled already, whose reply this thread reads itself
        (in_flight.read_replies: a group call waits on all its members' at once); None
        where this client cannot (Connection.start): `_submit_parts` the call then."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.courier_client = self  # as submit_parts' futures
        return self._slot.get(self._open_connection).start(method, parts, future)

    def _close(self, reason: str = "") -> None:
        """Closes the connection; calls in flight fail (ClientClosedError: `reason`, or that
        the client was closed). Safe to call more than once."""
        self._slot.close(reason or f"the client of {self.address} was closed")
        self._deadlines.close()

    def _send(self, method: str, parts: list,
              drive: bool) -> concurrent.futures.Future | BlockingCall:
        """Sends a call; its future, or with `drive` and no call_timeout a BlockingCall (the
        caller waits for it at once, and nobody else sees it)."""
        if self._call_timeout is None:
            future = BlockingCall() if drive else concurrent.futures.Future()
        else:  # armed first: a driven call returns when done
            future = concurrent.futures.Future()
            self._deadlines.watch(future, self._call_timeout, lambda: self._timed_out(method))
        # A connection that broke between get and send is replaced once; if the new one
        # broke as well (the server is gone, or its node ended), that is the call's error.
        for _ in range(2):
            connection = self._slot.connection  # (read without the lock while it is up)
            if connection is None or connection.broken:
                connection = self._slot.get(self._open_connection)
            if connection.send(method, parts, future, drive=drive):
                return future
        settle(future, exception=connection.error)
        return future

    def _open_connection(self) -> Connection:
        return Connection(self._address, self._token, self._wait_for_ready,
                          self._connect_timeout, self._compress, self._tls,
                          mode=_transport.mode_of(self._transport),
                          deadlines=self._call_timeout is not None)

    def _timed_out(self, method: str) -> errors.CallTimeoutError:
        return errors.CallTimeoutError(
            f"Deadline Exceeded: call to {method!r} on {self.address} did not complete "
            f"within call_timeout={self._call_timeout}s")


def _rebuild_client(address, options):
    return Client(address, **options)


class _FuturesView:
    """`client.futures.method(...)` returns a Future instead of blocking."""

    def __init__(self, client: Client):
        self._client = client

    def __getattr__(self, name: str) -> Callable[..., concurrent.futures.Future]:
        _check_remote_name(name)
        return lambda *args, **kwargs: self._client._submit(name, *args, **kwargs)

    def __call__(self, *args, **kwargs) -> concurrent.futures.Future:
        return self._client._submit("__call__", *args, **kwargs)


def _check_remote_name(name: str) -> None:
    """Refuses, as an AttributeError (so Python's own look-ups of special names go on), a
    name no server serves as an attribute: a private or special one, or a keyword."""
    if name.startswith("_"):
        raise AttributeError(
            f"courier client has no attribute {name!r}: a server serves public methods only "
            "(and __call__, called as client(...)); names starting with '_' are not sent")
    if keyword.iskeyword(name):
        raise AttributeError(
            f"courier client: {name!r} is a Python keyword, which no method defined in "
            f"Python is named; to call a method bound under that name, use "
            f"courier.call(client, {name!r}, ...)")


# Our operations on a client are functions, not its methods: every name of a client but
# `futures` and `address` is its server's (Launchpad's rule), so `close` is a remote call.

def call(client: Client, method: str, /, *args, **kwargs) -> Any:
    """Calls the server's method named `method` and waits for its result: for a name known
    only at run time, or one Python cannot spell as an attribute."""
    return client._call(method, *args, **kwargs)


def submit(client: Client, method: str, /, *args, **kwargs) -> concurrent.futures.Future:
    """Starts a call of the server's method named `method`; its Future at once."""
    return client._submit(method, *args, **kwargs)


def close(client: Client) -> None:
    """Closes `client`'s connection; its calls in flight fail, later ones raise
    `ClientClosedError`. Safe to call more than once."""
    client._close()


def transport_of(client: Client) -> str | None:
    """The transport `client`'s calls travel on now ('in-process', 'local', 'tcp' or
    'grpc'); None before it has reached its server."""
    current = client._slot.connection
    return current.kind if current is not None and not current.broken else None


def list_methods(client: Client) -> list[str]:
    """Returns the names of the methods the client's server serves."""
    return client._call(LIST_METHODS)
