"""`FunctionServer`: Launchpad's courier server - functions bound by name, started by hand.

    server = FunctionServer(port=port, token=token)
    server.Bind("add", lambda a, b: a + b)
    server.Start()          # calls are answered from now on
    ...
    server.Stop()

It is a courier `Server` (every transport, the token, TLS) serving an object whose methods
are the bound functions. The port is bound when the server is made, so `address` is known
before `Start()`; calls that arrive before it wait for it, as a Launchpad client waits for
a server to come up. `Bind` and `Unbind` work before and after `Start()`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from launchpad.courier._serving.served_methods import public_methods
from launchpad.courier.server import Server
from launchpad.courier.tls import TLS


class _Bindings:
    """The served object: each bound function is an attribute of its own."""


class FunctionServer:
    """Serves functions bound by name (Launchpad's `courier.Server`).

    Args:
      name: Launchpad's server name; kept, not used to find the server (`address` does).
      port: the port to bind (None or 0: one the system picks, free, with no race).
      thread_pool_size: how many calls run at once.
      token: the secret every call must carry.
      host: the interface to bind.
      tls: serve over TLS (see tls.py).
    """

    def __init__(self, name: str | None = None, port: int | None = None,
                 thread_pool_size: int = 16, *, token: str = "", host: str = "127.0.0.1",
                 tls: TLS | None = None):
        server = Server(None, port=port or 0, host=host, token=token,
                        thread_pool_size=thread_pool_size, tls=tls)
        server.start()
        self._answer_through(server, name)
        # A server dropped without Stop() lets its port and threads go.
        weakref.finalize(self, server.stop, 0.0)

    @classmethod
    def serving_with(cls, server: Server, name: str | None = None) -> FunctionServer:
        """A FunctionServer that answers through `server` (started, serving nothing yet),
        whose owner stops it."""
        handed = cls.__new__(cls)
        handed._answer_through(server, name)
        return handed

    def _answer_through(self, server: Server, name: str | None) -> None:
        self.name = name
        self._server = server
        self._bindings = _Bindings()
        self._started = False
        self._stopped = threading.Event()

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def address(self) -> str:
        """host:port at which clients reach the server."""
        return self._server.address

    @property
    def has_started(self) -> bool:
        """Whether `Start()` has been called."""
        return self._started

    @property
    def metrics(self) -> Any:
        """The calls the server answered, by method (courier/metrics.py)."""
        return self._server.metrics

    def Bind(self, method_name: str, py_func: Callable[..., Any],
             is_priority: bool = False) -> None:
        """Serves `py_func` as `method_name` (replacing a function bound so before)."""
        if not isinstance(method_name, str) or not method_name or (
                method_name.startswith("_") and method_name != "__call__"):
            raise ValueError(f"A bound method needs a public name (or '__call__'), got "
                             f"{method_name!r}")
        if not callable(py_func):
            raise TypeError(f"Bind({method_name!r}, ...) needs a callable, got {py_func!r}")
        setattr(self._bindings, method_name, py_func)

    def bind_methods_of(self, obj: Any, leave_out: tuple[str, ...] = ()) -> None:
        """Binds every method a courier server serves of `obj` (its public methods and
        `__call__`), but those named in `leave_out`."""
        for name in public_methods(obj):
            if name not in leave_out:
                self.Bind(name, getattr(obj, name))

    def BindHandler(self, method_name: str, handler: Callable[..., Any],
                    is_priority: bool = False) -> None:
        """Launchpad's, for a handler its C++ layer made: here a callable, as for Bind."""
        self.Bind(method_name, handler, is_priority)

    def Unbind(self, method_name: str) -> None:
        """Stops serving `method_name`; its calls then fail naming the methods left."""
        self._bindings.__dict__.pop(method_name, None)

    def Start(self) -> None:
        """Answers calls from now on (those waiting since the server was made, too)."""
        if self._started:
            raise ValueError("Server already started")
        self._started = True
        self._server.serve(self._bindings)

    def Stop(self) -> None:
        """Stops serving, gracefully (calls under way get their replies)."""
        if not self._started:
            raise ValueError("Server not started yet")
        self._server.stop()
        self._stopped.set()

    def Join(self) -> None:
        """Blocks until the server has been stopped."""
        if not self._started:
            raise ValueError("Server not started")
        self._stopped.wait()

    def SetIsHealthy(self, is_healthy: bool) -> None:
        """Launchpad's: a server here serves whether or not it says it is healthy, so this
        only checks that it has started."""
        if not self._started:
            raise ValueError("Cannot set health status; server not started.")

    def __repr__(self) -> str:
        state = "started" if self._started else "not started"
        return f"<courier server {self.name or ''} at {self.address}, {state}>"
