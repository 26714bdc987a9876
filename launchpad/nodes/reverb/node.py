"""`ReverbNode`: a Reverb replay server as a node of the program.

How it runs: build the tables (`priority_tables_fn()`) and the checkpointer, start a
`reverb.Server` on a free port, register its address with the program's controller, then serve
until the program stops, checkpointing every `checkpoint_time_delta_minutes` if asked and once
more at a graceful stop. A server started with the checkpointer of a previous run (the same
path) loads its latest checkpoint, so a ReverbNode restarted by its group's RestartPolicy comes
back with its data.

The free port is Reverb's pick (portpicker: free when picked), which another process may take
before the server binds it: an ephemeral port, like those of outgoing connections. A server
that cannot bind its pick is started again on another, twice at most.

Outside any launch (Launchpad's unit tests: `reverb_address` bound with `Address.bind`,
`node.run()` on a thread) the server listens on the bound port; `node._server` is it.

Its handle dereferences to a `ReverbClient`: a `reverb.Client` of the node made on first use,
so a node that only holds the handle imports Reverb (and TensorFlow) only when it first uses
it. Reverb and TensorFlow are extras (`pip install launchpad-next[reverb]`), imported here only
when a ReverbNode runs or a handle is used.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from absl import logging

from launchpad import control
from launchpad.address import Address, get_port_from_address
from launchpad.nodes import base, handles, running

_RESOLVE_TIMEOUT_SECS = 60.0
_STARTS = 3  # times a server is started on a port Reverb picked (see the module doc)


def _import_reverb():
    try:
        import reverb
    except ImportError as e:
        raise ImportError("ReverbNode needs dm-reverb and TensorFlow: pip install "
                          "'launchpad-next[reverb]' (Python 3.11, tensorflow-cpu 2.15)") from e
    return reverb


class ReverbClient:
    """A `reverb.Client` of a ReverbNode, made on first use; every attribute of the client
    (`insert`, `sample`, `trajectory_writer`, `server_address`, ...) is available here, and
    `.client` is the `reverb.Client` itself. Pickles as the node it refers to."""

    def __init__(self, resolver: control.NodeResolver | Address):
        self._resolver = resolver
        self._client = None
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                reverb = _import_reverb()
                self._client = reverb.Client(self._resolver.resolve(_RESOLVE_TIMEOUT_SECS))
            return self._client

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.client, name)

    def __reduce__(self):
        return ReverbClient, (self._resolver,)

    def __repr__(self) -> str:
        return f"<ReverbClient of {self._resolver!r}>"


class ReverbHandle(handles.Handle):
    """Dereferences to a ReverbClient of the node."""

    client_imports = ("reverb",)  # and so TensorFlow: some 200 MB of pages

    def __init__(self, node: "ReverbNode"):
        super().__init__(node)
        self._address = node.reverb_address

    def dereference(self) -> ReverbClient:
        if self._address.bound:  # outside any launch
            return ReverbClient(self._address)
        program = self._program_context()
        return ReverbClient(program.resolver(self._label, self._index))


class ReverbNode(base.Node):
    """A Reverb server with the tables `priority_tables_fn()` returns.

    Args:
      priority_tables_fn: returns the `reverb.Table`s to serve (called in the node's process).
      checkpoint_ctor: returns the checkpointer (e.g. `reverb.checkpointers.DefaultCheckpointer(
        path)`); None uses Reverb's default (a temporary folder: nothing survives a restart).
      checkpoint_time_delta_minutes: checkpoint this often while serving (and always once at a
        graceful stop).
    """

    def __init__(self, priority_tables_fn: Callable[[], Sequence[Any]],
                 checkpoint_ctor: Callable[[], Any] | None = None,
                 checkpoint_time_delta_minutes: float | None = None):
        super().__init__()
        if not callable(priority_tables_fn):
            raise TypeError(f"priority_tables_fn must be callable, got {priority_tables_fn!r}")
        if checkpoint_ctor is not None and not callable(checkpoint_ctor):
            raise TypeError(f"checkpoint_ctor must be callable, got {checkpoint_ctor!r}")
        if checkpoint_time_delta_minutes is not None and checkpoint_time_delta_minutes <= 0:
            raise ValueError("checkpoint_time_delta_minutes must be positive, got "
                             f"{checkpoint_time_delta_minutes}")
        self._priority_tables_fn = priority_tables_fn
        self._checkpoint_ctor = checkpoint_ctor
        self._checkpoint_time_delta_minutes = checkpoint_time_delta_minutes
        self._address = Address(
            "", registered_by_node=base.registers_own_address(self, ReverbNode))
        self.allocate_address(self._address)
        self._server: Any = None  # the reverb.Server while the node runs (Launchpad's name)

    @property
    def reverb_address(self) -> Address:
        """The address of the node's Reverb server (Launchpad's name)."""
        return self._address

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "_server": None}

    def create_handle(self) -> handles.Handle:
        return ReverbHandle(self)

    def default_label(self) -> str:
        return "replay"

    def runs(self) -> str:
        return base.name_of(self._priority_tables_fn)

    def run(self) -> None:
        reverb = _import_reverb()
        with running.running_context() as node:
            checkpointer = self._checkpoint_ctor() if self._checkpoint_ctor else None
            # Bound outside a launch, or registered already (a subclass's run() calling ours).
            registered = self._address.bound or not self._address.registered_by_node
            port = get_port_from_address(self._address.resolve()) if registered else None
            self._server = server = self._start(reverb, port, checkpointer)
            try:
                if not node.standalone and not registered:
                    node.controller.register(self.label, self.index, "",
                                             node.endpoint(server.port))
                self._serve(server, node.stop_event, checkpointer is not None)
            finally:
                server.stop()
                self._server = None

    def _start(self, reverb: Any, port: int | None, checkpointer: Any) -> Any:
        """A Reverb server on `port`, or on a free port Reverb picks: again on another if
        its pick was taken before it bound it (see the module doc)."""
        attempt = 1
        while True:
            try:
                return reverb.Server(tables=list(self._priority_tables_fn()), port=port,
                                     checkpointer=checkpointer)
            except ValueError as e:  # (Reverb's words for a port it cannot bind)
                if port is not None or "BuildAndStart" not in str(e) or attempt == _STARTS:
                    raise
            attempt += 1
            logging.warning("Replay node %s: the port Reverb picked was taken before its "
                            "server bound it; starting it on another (%d of %d)",
                            self.label, attempt, _STARTS)

    def _serve(self, server: Any, stopped: threading.Event, checkpoints: bool) -> None:
        """Serves until the program stops, checkpointing as asked and once at the stop."""
        local = server.localhost_client()
        minutes = self._checkpoint_time_delta_minutes
        interval = None if minutes is None else minutes * 60
        while not stopped.wait(interval):
            local.checkpoint()
        if checkpoints or interval is not None:
            local.checkpoint()  # a graceful stop keeps the data
