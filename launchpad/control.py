"""The controller protocol: how every part of a running program talks to its controller.

A program has one controller (a courier service, launch/runtime/controller.py). Every node, handle,
launcher and the launching process reach it the same way, through the one `ControllerClient`
this process keeps per controller (`client_for`), whatever host they run on::

    hello(version)                                  -> the controller's version (checked once)
    register(label, index, name, address, host_id)  the node serves `name` at host:port
    resolve(label, index, name, timeout)            -> host:port, once registered (bounded wait)
    host_of(label, index, name)                     -> the host identity it registered with
    node_started(label, index, instance, host, pid, heartbeats)
                                                    a runner started the node (beating or not)
    heartbeat(label, index, instance)               -> False: that run of the node is over
    heartbeats(runs)                                -> [bool]: heartbeat of each
                                                       (label, index, instance): a host
                                                       agent's, one call per host and period
    node_finished(label, index, instance)           its code returned
    node_failed(label, index, instance, reason, traceback, exception)
    request_stop(reason)                            asks the program to stop ('' : no reason)
    exit_codes(), restarts()                        how each node's run ended; restarts so far
    report(label, index, instance, sample)          a node's telemetry.NodeSample (periodic)
    reports(samples)                                report (and heartbeat) of each (label,
                                                       index, instance, sample): a host
                                                       agent's
    status()                                        -> telemetry.ProgramStatus: every node now
    read_log(label, index, offset, max_bytes)       -> (bytes of the node's log from offset,
                                                        whether more may come)
    wait_for_stop()                                 returns once the program is stopping
    wait_for_end()                                  returns once every node has been ended

A *host identity* (`host_identity()`) says which kernel and network namespace a process runs
in: two processes with the same one share loopback, Unix sockets and memory files, so a
client can tell whether a server is local whatever address it advertises. `instance` names
one run of a node (a new one per start or restart), so a report from a run
the controller has given up on (its host was lost, then came back) is told apart. The
exception of a failure travels pickled (cloudpickle) when it pickles, b"" otherwise; the
reason and traceback are always text. Calls without the program's token are refused by
courier before anything of them is unpickled.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Sequence
from typing import Any

import cloudpickle

from launchpad import courier
from launchpad.courier import TLS, host_identity
from launchpad.errors import ControllerProtocolError
from launchpad.telemetry import NodeSample, ProgramStatus

PROTOCOL_VERSION = 3



class ControllerClient:
    """The program's controller as seen from this process (see the module doc).

    Args:
      address: the controller's host:port.
      token: the program's token.
      tls: the program's certificates, when it runs over TLS.
    """

    def __init__(self, address: str, token: str, tls: TLS | None = None):
        self.address = address
        # The controller exists before any node starts: if it cannot be reached, it is gone.
        self._client = courier.Client(address, token=token, wait_for_ready=False,
                                      tls=tls)
        self._checked = False
        self._ended = False  # (set by forget(): its calls fail at once)
        self._lock = threading.Lock()

    def _call(self, method: str, *args):
        self._check_open()
        if not self._checked:
            self._check_version(None)
        return courier.call(self._client, method, *args)

    def _check_open(self) -> None:
        if self._ended:
            raise courier.ServerUnavailableError(
                f"The controller at {self.address} has ended")

    def _check_version(self, timeout: float | None) -> None:
        with self._lock:
            if self._checked:
                return
            theirs = (courier.call(self._client, "hello", PROTOCOL_VERSION)
                      if timeout is None else
                      _answer(courier.submit(self._client, "hello", PROTOCOL_VERSION), timeout))
            if theirs != PROTOCOL_VERSION:
                raise ControllerProtocolError(
                    f"The controller at {self.address} speaks protocol version {theirs}, this "
                    f"process version {PROTOCOL_VERSION}: the launching process and the nodes "
                    "must run the same version of launchpad")
            self._checked = True

    def register(self, label: str, index: int, name: str, address: str) -> None:
        """Registers `address` of this process's node label/index, with this host's
        identity."""
        self._call("register", label, index, name, address, host_identity())

    def resolve(self, label: str, index: int, name: str, timeout: float) -> str:
        return self._call("resolve", label, index, name, timeout)

    def host_of(self, label: str, index: int, name: str = "") -> str:
        """The host identity node label/index registered `name` with ('' if unknown)."""
        return self._call("host_of", label, index, name)

    def node_started(self, label: str, index: int, instance: str, host: str, pid: int,
                     heartbeats: bool) -> None:
        self._call("node_started", label, index, instance, host, pid, heartbeats)

    def heartbeat(self, label: str, index: int, instance: str, timeout: float) -> bool:
        """Says this run of the node is alive; False if the controller has given it up.

        Raises:
          TimeoutError: no answer within `timeout` seconds (the link may be cut).
        """
        return self._call_within(timeout, "heartbeat", label, index, instance)

    def heartbeats(self, runs: list[tuple[str, int, str]], timeout: float) -> list[bool]:
        """Heartbeats of many runs (label, index, instance) in one call; each one's answer.

        Raises:
          TimeoutError: no answer within `timeout` seconds.
        """
        return self._call_within(timeout, "heartbeats", [list(run) for run in runs])

    def reports(self, samples: list[tuple[str, int, str, NodeSample]],
                timeout: float) -> None:
        """Telemetry of many runs (label, index, instance, sample) in one call.

        Raises:
          TimeoutError: no answer within `timeout` seconds.
        """
        self._call_within(timeout, "reports", [list(entry) for entry in samples])

    def ping(self, timeout: float) -> None:
        """Returns if the controller answers within `timeout` seconds.

        Raises:
          TimeoutError: it did not (the link may be cut); courier errors: it is gone.
        """
        self._call_within(timeout, "hello", PROTOCOL_VERSION)

    def _call_within(self, timeout: float | None, method: str, *args):
        """The call, its answer awaited for up to `timeout` seconds (None: for good)."""
        if timeout is None:
            return self._call(method, *args)
        self._check_open()
        if not self._checked:
            self._check_version(timeout)
        return _answer(courier.submit(self._client, method, *args), timeout)

    def node_finished(self, label: str, index: int, instance: str) -> None:
        self._call("node_finished", label, index, instance)

    def node_failed(self, label: str, index: int, instance: str, reason: str,
                    node_traceback: str, exception: BaseException | None) -> None:
        self._call("node_failed", label, index, instance, reason, node_traceback,
                   pickle_exception(exception))

    def request_stop(self, reason: str = "") -> None:
        """Asks the program to stop (`reason`, if any, becomes the controller's stop_reason);
        nothing to do if its controller has ended already."""
        try:
            self._call("request_stop", reason)
        except courier.ServerUnavailableError:
            pass

    def exit_codes(self) -> dict[str, int | None]:
        return self._call("exit_codes")

    def restarts(self) -> dict[str, int]:
        return self._call("restarts")

    def report(self, label: str, index: int, instance: str, sample: NodeSample,
               timeout: float) -> None:
        """Sends the controller this run's telemetry (see telemetry.py).

        Raises:
          TimeoutError: no answer within `timeout` seconds.
        """
        self._call_within(timeout, "report", label, index, instance, sample)

    def status(self, timeout: float | None = None) -> ProgramStatus:
        """Every node of the program now, as its controller sees it (telemetry.py).

        Raises:
          TimeoutError: no answer within `timeout` seconds (None: waits for good).
        """
        return self._call_within(timeout, "status")

    def read_log(self, label: str, index: int, offset: int, max_bytes: int,
                 timeout: float | None = None) -> tuple[bytes, bool]:
        """Up to `max_bytes` of node label/index's log from byte `offset`, and whether more
        may come (False once its run has ended and all it wrote is in the log).

        Raises:
          LookupError: the launch keeps no log of the node (the message says where its
            output goes); UnknownNodeError: the program has no such node.
          TimeoutError: no answer within `timeout` seconds.
        """
        return self._call_within(timeout, "read_log", label, index, offset, max_bytes)

    def wait_for_stop(self, label: str | None = None, index: int = 0) -> None:
        """Returns when the program starts stopping (or, given a node, when its group shrinks
        by it); raises if the controller is gone."""
        self._call("wait_for_stop", label, index)

    def wait_group_change(self, label: str, known: int) -> int:
        """Group `label`'s size once it is not `known` (a group handle that follows its
        group waits on this); -1 once the program stops. Raises if the controller is gone."""
        return self._call("wait_group_change", label, known)

    def scale(self, label: str, count: int, timeout: float | None = None) -> list[str]:
        """Makes group `label` `count` nodes (Controller.scale); the nodes added or removed."""
        return self._call_within(timeout, "scale", label, count)

    def change(self, program: bytes, fingerprints: dict[str, str], apply: bool,
               only: Sequence[str] = (), timeout: float | None = None) -> Any:
        """Plans (or, with `apply`, applies) the running program's change into `program`
        (pickled, with its nodes' `fingerprints`; `only` these groups, if any:
        Controller.plan and .apply); its plan."""
        return self._call_within(timeout, "change", program, fingerprints, apply, list(only))

    def wait_for_end(self, timeout: float | None = None) -> None:
        """Returns when the controller has ended every node; raises if it is gone.

        Raises:
          TimeoutError: they have not all ended within `timeout` seconds (None: waits).
        """
        self._call_within(timeout, "wait_for_end")

    def close(self) -> None:
        courier.close(self._client)


def _answer(future: concurrent.futures.Future, timeout: float):
    """The call's result, waited for up to `timeout` seconds (then cancelled)."""
    try:
        return future.result(timeout)
    except TimeoutError:
        future.cancel()
        raise


def pickle_exception(exception: BaseException | None) -> bytes:
    """The exception pickled for the protocol; b"" when there is none or it cannot pickle."""
    if exception is None:
        return b""
    try:
        return cloudpickle.dumps(exception)
    except Exception:  # noqa: BLE001 - an unpicklable exception still has its text
        return b""


_clients: dict[tuple[str, str, TLS | None], ControllerClient] = {}
_clients_lock = threading.Lock()


def client_for(address: str, token: str, tls: TLS | None = None) -> ControllerClient:
    """This process's client of the controller at `address` (made on first use)."""
    with _clients_lock:
        found = _clients.get((address, token, tls))
        if found is None:
            found = _clients[(address, token, tls)] = ControllerClient(address, token, tls)
        return found


def forget(address: str) -> None:
    """Closes the clients of a controller that has ended; they stay this process's clients
    of it, whose calls fail at once (as a vanished controller's do), so that code still
    running (a node thread that outlived its program) does not try to reach it again."""
    with _clients_lock:
        clients = [client for key, client in _clients.items() if key[0] == address]
        for client in clients:
            client._ended = True
    for client in clients:
        client.close()


class NodeResolver:
    """Finds a node's address through its program's controller (a courier AddressResolver;
    picklable, so handles carry it to any process of the program)."""

    def __init__(self, controller_address: str, token: str, label: str, index: int,
                 name: str = "", tls: TLS | None = None):
        self._controller_address = controller_address
        self._token = token
        self._tls = tls
        self._label = label
        self._index = index
        self._name = name

    def resolve(self, timeout: float) -> str:
        # The controller runs for as long as the program does: if it cannot be reached at
        # once, the program has stopped, and waiting would only delay the error.
        try:
            return client_for(self._controller_address, self._token, self._tls).resolve(
                self._label, self._index, self._name, timeout)
        except courier.ServerUnavailableError as e:
            raise courier.ServerUnavailableError(
                f"Cannot reach node {self._label}/{self._index}: its program's controller at "
                f"{self._controller_address} is gone (the program has stopped)") from e

    def __repr__(self) -> str:
        return f"<node {self._label}/{self._index}>"

