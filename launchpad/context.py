"""The runtime context of a node: which program and node this code runs for.

A launcher gives every node a `NodeContext` and runs the node's code inside it (a contextvar,
so two programs in one process never see each other's context). Courier servers started by a
node run their handlers in the node's context too. Code outside any node context - a thread
the user started, or the launching process itself - falls back to the program launched from
this process, when there is exactly one; otherwise it gets an error that says what to do.

A node may also run outside any launch, as Launchpad's unit tests run one (its addresses
bound to ports with `Address.bind`, `node.run()` called on a thread): it then runs in a
*standalone* context, which has no controller. Standalone contexts are the process's own
(`outside()`: stop handlers registered outside any program land there; it stops when the
interpreter exits) or a `WorkerManager`'s (launch/worker_manager.py). Courier servers and
clients made in one use the process's token (`process_token()`), so only this process, or
processes given the same `LAUNCHPAD_COURIER_TOKEN`, can call them.

Launchpad's names for the launch a node belongs to are here too, where Launchpad had them:
`LaunchType`, `is_local_launch`, `is_local_launch_or_test`, `LaunchContext`, `set_context`
(node_launch.py) and `get_context()`.
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
import secrets
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from absl import logging

from launchpad import control, courier
from launchpad.courier import TLS
from launchpad.errors import NoContextError
from launchpad.node_launch import (  # noqa: F401 - Launchpad's names, at its path
    LaunchContext,
    LaunchType,
    given_to_this_thread,
    is_local_launch,
    is_local_launch_or_test,
    launch_type_of,
    set_context,
)


class ProcessStarter(Protocol):
    """Starts nodes in child processes of this one (given by the launcher; used by
    MultiProcessingColocation). A started process has `returncode` (None while it runs),
    `restart()` and `failure() -> (reason, traceback, exception)`."""

    def start(self, node, node_context: "NodeContext", on_exit: Callable[[Any], None]) -> Any:
        """Starts `node` as `node_context`'s node; `on_exit(process)` once it has ended."""

    def end(self, processes: list, graceful: bool) -> None:
        """Ends `processes`: after the grace period if `graceful`, else now."""



@dataclasses.dataclass(eq=False)
class NodeContext:
    """Who this code runs for. `label` is None for the launching process of the program."""

    program_name: str
    label: str | None
    index: int
    controller_address: str
    token: str
    process_starter: ProcessStarter | None = None
    stop_event: threading.Event = dataclasses.field(default_factory=threading.Event)
    bind_host: str = "127.0.0.1"  # the interface the node's servers bind
    host: str = "127.0.0.1"  # the address others reach this host at
    termination_notice_secs: float = 10.0  # how long the node has to end after a stop
    tls: TLS | None = None  # the program's certificates, when it runs over TLS
    _stop_handlers: list = dataclasses.field(default_factory=list)
    _handlers_lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    _notified: bool = False
    # Set once the stop handlers have run (a node's process waits for it before it exits).
    handlers_done: threading.Event = dataclasses.field(default_factory=threading.Event)
    # The courier servers this node made (shared with its colocated children's contexts):
    # their call counters are the node's telemetry.
    servers: list[courier.Server] = dataclasses.field(default_factory=list)
    # The group clients this node made (shared as servers are): their broadcast failures
    # are in its telemetry. Weak: a node may make and drop them as it likes.
    groups: "weakref.WeakSet[courier.GroupClient]" = dataclasses.field(
        default_factory=weakref.WeakSet)
    launch_type: str = ""  # the LaunchType's value ("" for a standalone context)
    one_host: bool = False  # whether every node of the program runs on this host
    # The node's saved states (launch/runtime/state_store.NodeState), when its group keeps
    # state (lp.StatePolicy); None otherwise.
    state: Any = None
    # Launchpad's launch config of the node: its group's local_resources entry under a
    # process launch type, else None (set as the node runs, from its launch context).
    launch_config: Any = None

    @property
    def standalone(self) -> bool:
        """Whether this code runs outside any launched program (see the module doc)."""
        return not self.controller_address

    @property
    def name(self) -> str:
        return "launcher" if self.label is None else f"{self.label}/{self.index}"

    @property
    def controller(self) -> control.ControllerClient:
        """This process's client of the program's controller.

        Raises:
          NoContextError: the code runs outside any launched program (standalone).
        """
        if self.standalone:
            raise NoContextError(
                "This node runs outside any launched program, so it has no controller: "
                "launch it with lp.launch(), or bind its addresses first (Address.bind, "
                "launchpad.launch.test_multi_threading.address_builder.bind_addresses)")
        return control.client_for(self.controller_address, self.token, self.tls)

    def resolver(self, label: str, index: int, name: str = "") -> control.NodeResolver:
        """Finds node label/index's address `name` through the controller (picklable)."""
        return control.NodeResolver(self.controller_address, self.token, label, index, name,
                                    self.tls)

    def client_of(self, label: str, index: int, **options: Any) -> courier.Client:
        """A courier client of node label/index of this program (`options`: see Client)."""
        return courier.Client(self.resolver(label, index), token=self.token,
                              tls=self.tls, **options)

    def new_server(self, *, remote_clients: bool = False, **options: Any) -> courier.Server:
        """A courier server for this node: bound where the program reaches it, with its
        token (and TLS); `options`: see Server. Under a local launch its clients are all of
        this host, so it serves them alone (`Server(local_only=True)`: no gRPC), unless
        `remote_clients` (the node's handles ask for gRPC or TCP)."""
        local_only = self.one_host and not remote_clients
        server = courier.Server(None, host=self.bind_host, token=self.token, tls=self.tls,
                                local_only=local_only, name=self.name, **options)
        self.servers.append(server)
        return server

    def endpoint(self, port: int) -> str:
        """host:port at which the rest of the program reaches `port` of this node."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{port}"

    def request_stop(self) -> None:
        """Asks the program to stop (nothing to do if it has ended already); a standalone
        context stops itself."""
        if self.standalone:
            self.notify_stop()
        else:
            self.controller.request_stop()

    def child(self, label: str, index: int) -> "NodeContext":
        """The context of a node colocated with this one (in its thread or process): the
        same program, stopped when this one is."""
        child = dataclasses.replace(
            self, label=label, index=index, stop_event=threading.Event(), _stop_handlers=[],
            _handlers_lock=threading.Lock(), _notified=False, handlers_done=threading.Event())
        self.add_stop_handler(child.notify_stop)
        return child

    def add_stop_handler(self, handler: Callable[[], None]) -> None:
        """Runs `handler` when the program stops, or at once if it is stopping already."""
        if not callable(handler):
            raise TypeError(f"A stop handler must be callable, got {handler!r}")
        with self._handlers_lock:
            if not self._notified:
                self._stop_handlers.append(handler)
                return
        handler()

    def remove_stop_handler(self, handler: Callable[[], None]) -> None:
        with self._handlers_lock:
            if handler not in self._stop_handlers:
                raise ValueError(f"{handler!r} is not a registered stop handler of "
                                 f"{self.program_name}/{self.name}")
            self._stop_handlers.remove(handler)

    def notify_stop(self) -> None:
        """Sets the stop event and runs the stop handlers once, each guarded."""
        with self._handlers_lock:
            if self._notified:
                return
            self._notified = True
            self.stop_event.set()
            handlers = list(self._stop_handlers)
        for handler in handlers:
            try:
                handler()
            except Exception:  # noqa: BLE001 - one bad handler must not block the others
                logging.exception("Stop handler %r of %s/%s raised", handler,
                                  self.program_name, self.name)
        self.handlers_done.set()


_current: contextvars.ContextVar[NodeContext | None] = contextvars.ContextVar(
    "launchpad_node_context", default=None)
# Contexts of programs launched from this process (and, in a node process, of its node):
# the fallback for threads that carry no context. Weak, so a finished program drops out.
_process_contexts: "weakref.WeakSet[NodeContext]" = weakref.WeakSet()
_process_lock = threading.Lock()


# The launching process's context of each program launched from it (the last launch of it),
# kept by the runtime rather than by the graph; weak, so a dropped program drops out.
_launches: "weakref.WeakKeyDictionary[Any, NodeContext]" = weakref.WeakKeyDictionary()


def link_launch(program: Any, launcher_context: NodeContext) -> None:
    """Records that `program` was launched from this process, with `launcher_context`."""
    with _process_lock:
        _launches[program] = launcher_context


def launch_of(program: Any) -> NodeContext | None:
    """The launcher's context of the last launch of `program` from this process, or None."""
    with _process_lock:
        return _launches.get(program)


def enter(node_context: NodeContext) -> contextvars.Token:
    """Makes `node_context` current for this thread (and contexts copied from it)."""
    return _current.set(node_context)


def leave(token: contextvars.Token) -> None:
    _current.reset(token)


def add_process_context(node_context: NodeContext) -> None:
    with _process_lock:
        _process_contexts.add(node_context)


def remove_process_context(node_context: NodeContext) -> None:
    with _process_lock:
        _process_contexts.discard(node_context)


def current_or_none() -> NodeContext | None:
    found = _current.get()
    if found is not None:
        return found
    with _process_lock:
        live = [c for c in _process_contexts if not c.stop_event.is_set()] or list(
            _process_contexts)
    return live[0] if len(live) == 1 else None


def current() -> NodeContext:
    """Returns the context of the calling code.

    Raises:
      NoContextError: outside any node, with no (or several) programs launched from here.
    """
    found = current_or_none()
    if found is not None:
        return found
    with _process_lock:
        names = sorted(c.program_name for c in _process_contexts)
    if not names:
        raise NoContextError(
            "No launchpad program is running here: this works inside a node of a launched "
            "program, or in the process that called lp.launch() while the program runs")
    raise NoContextError(
        f"Several programs run in this process ({', '.join(names)}) and this thread belongs "
        "to none of them: call controller.stop() on the one you mean, or call this from a "
        "node's own thread")


# --- outside any launched program ------------------------------------------------------------

TOKEN_VARIABLE = "LAUNCHPAD_COURIER_TOKEN"
_process_token: str | None = None
_outside: NodeContext | None = None
_outside_lock = threading.Lock()


def process_token() -> str:
    """The token of courier servers and clients made outside any program: $LAUNCHPAD_COURIER_
    TOKEN if set (processes given the same one can call each other), else a secret of this
    process made on first use."""
    global _process_token
    with _process_lock:
        if _process_token is None:
            _process_token = os.environ.get(TOKEN_VARIABLE) or secrets.token_hex(16)
        return _process_token


def standalone(name: str = "standalone") -> NodeContext:
    """A fresh context for code run outside any launched program (see the module doc)."""
    return NodeContext(program_name="", label=name, index=0, controller_address="",
                       token=process_token())


def outside() -> NodeContext:
    """The process's own standalone context: where stop handlers registered outside any
    program go; stopped (its handlers run) when the interpreter exits."""
    global _outside
    with _outside_lock:
        if _outside is None:
            _outside = standalone("outside")
            threading._register_atexit(_outside.notify_stop)  # noqa: SLF001 - before joins
        return _outside


def current_or_outside() -> NodeContext:
    """The calling code's context, else the process's standalone one."""
    return current_or_none() or outside()


def get_context() -> LaunchContext:
    """The launch of the node this code runs in (Launchpad's `context.get_context()`), or
    what `set_context` gave this thread.

    Raises:
      NoContextError: outside any node of a launched program.
    """
    given = given_to_this_thread()
    if given is not None:
        return given
    node_context = current()
    if node_context.standalone:
        raise NoContextError("launchpad.context.get_context() works in a node of a launched "
                             "program; this code runs outside any")
    launch = LaunchContext()
    launch.initialize(node_context.launch_type, node_context.launch_config,
                      node_context.request_stop)
    return launch
