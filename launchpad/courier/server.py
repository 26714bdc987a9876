"""The courier server: serves every public method of one Python object, on every transport.

A server listens on every transport at once (_serving/endpoints.py: in-process, a Unix
socket, a TCP port of its own, gRPC) and answers each stream's messages as
_serving/dispatcher.py says, running the calls as _serving/method_calls.py says: at most
`thread_pool_size` at once, however many streams are open. A server can start before its
object exists (`Server(None)` then `serve(obj)`): calls that arrive early wait for it, so a
node can publish its address before it builds the object that answers. Its stop is graceful:
every call received is answered first, within a grace period.
"""

from __future__ import annotations

import threading
from typing import Any

from launchpad.courier import metrics
from launchpad.courier._serving import endpoints
from launchpad.courier._serving.dispatcher import Dispatcher
from launchpad.courier.tls import TLS


class Server:
    """Serves `obj`'s public methods to courier clients.

    Args:
      obj: the object to serve, or None to start serving before it exists (see `serve`).
      port: the port to bind; 0 lets the operating system pick a free one (no race).
      host: the interface to bind; loopback by default.
      token: the secret every stream must carry; empty disables the check.
      thread_pool_size: how many calls run at once.
      tls: serve over TLS only, to clients with a certificate of its CA (see tls.py); None
        serves plaintext.
      local_only: serve this host's clients alone (in-process, the Unix socket): no gRPC, no
        TCP port (_serving/endpoints.Endpoints says when it serves every transport all the
        same).
      name: what a caller's errors call the server (a node's 'label/index'); '' names it by
        its address.
    """

    def __init__(self, obj: Any = None, *, port: int = 0, host: str = "127.0.0.1",
                 token: str = "", thread_pool_size: int = 16, tls: TLS | None = None,
                 local_only: bool = False, name: str = ""):
        if thread_pool_size < 1:
            raise ValueError(f"thread_pool_size must be >= 1, got {thread_pool_size}")
        self._host = host
        self._port = port
        self._tls = tls
        self._local_only = local_only
        self._name = name
        self._stop_lock = threading.Lock()
        self._endpoints: endpoints.Endpoints | None = None
        self._address = ""
        self._dispatcher = Dispatcher(obj, token, thread_pool_size)

    @property
    def metrics(self) -> metrics.CallMetrics:
        """Every answered call, by method."""
        return self._dispatcher.calls.metrics

    @property
    def address(self) -> str:
        """host:port of the running server; empty before `start()`."""
        return self._address

    @property
    def port(self) -> int:
        return int(self._address.rsplit(":", 1)[1]) if self._address else 0

    def start(self) -> str:
        """Binds and starts serving; returns the bound address ('host:port')."""
        if self._endpoints is not None:
            raise RuntimeError(f"Courier server at {self._address} is already started")
        self._dispatcher.calls.start(self._address, self._name)
        self._endpoints = endpoints.Endpoints(self._dispatcher, self._host, self._port,
                                              self._tls, self._local_only)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._address = self._dispatcher.calls.address = f"{host}:{self._endpoints.port}"
        return self._address

    def serve(self, obj: Any) -> None:
        """Sets the object to serve; calls waiting for it proceed."""
        self._dispatcher.calls.serve(obj)

    def stop(self, grace: float = 5.0) -> None:
        """Stops serving, gracefully: new calls are refused, calls already received get up to
        `grace` seconds to finish and send their replies, then every stream is closed.
        Safe to call more than once; returns once the server has stopped and its streams
        have ended (or, for a stream still running a call, after one more second)."""
        with self._stop_lock:
            if not self._dispatcher.serving() and self._endpoints is None:
                return
            self._dispatcher.stop(grace, self._endpoints)
            self._endpoints = None

    def __enter__(self) -> "Server":
        if self._endpoints is None:
            self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
