"""What a node runner is given (a `NodeSpec`, as bytes) and, for a colocated child, gives back.

A spec says everything a runner needs to run one node anywhere: the node (cloudpickled), its
place in the program, how to reach the controller (endpoint and token), and the runtime
settings (grace period, heartbeats, the interface to bind). Launchers decide only how the
bytes travel: a private file (local_mp, a Slurm step on the shared filesystem), or through an
engine's API. A node reports how it ended to the controller (control.py); only the children
of a MultiProcessingColocation, supervised by their parent node on the same host, leave a
`FailureReport` in a private file of their parent's for it to read.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import cloudpickle

from launchpad.courier import TLS
from launchpad.launch.runtime import private_files, serialization
from launchpad.launch.runtime.errors import UnsafePathError
from launchpad.launch.runtime.state_store import StateSpec

LOOPBACK = "127.0.0.1"
ROUTED = ""  # bind_host: the interface through which this host reaches the controller
# Nodes on a cluster's hosts beat this often; one silent for the liveness timeout is lost.
# (Local node processes need no beat: their launcher sees each exit, and a process of this
# host does not vanish without one.)
CLUSTER_HEARTBEAT_SECS = 2.0


@dataclasses.dataclass
class NodeSpec:
    """One node, ready to run (see the module doc)."""

    node: bytes  # cloudpickle of the Node
    program_name: str
    label: str
    index: int
    controller_address: str
    token: str
    termination_notice_secs: float
    heartbeat_secs: float = 0.0  # 0: no heartbeats (the launcher sees the node end itself)
    liveness_timeout_secs: float = 10.0  # no heartbeat answered this long: controller lost
    # A node that may start before its controller (a Kubernetes pod) waits this long for it.
    controller_wait_secs: float = 0.0
    bind_host: str = LOOPBACK  # an address, "0.0.0.0", or ROUTED
    report_path: str = ""  # a colocated child's: where its parent reads how it failed
    tls: TLS | None = None  # the program's certificates, when it runs over TLS
    # Signals the engine sends before it ends the node, and why: each stops the program.
    stop_signals: dict[str, str] = dataclasses.field(default_factory=dict)
    sys_path: list[str] = dataclasses.field(default_factory=list)
    argv: list[str] = dataclasses.field(default_factory=list)  # the node's sys.argv
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    launch_type: str = ""  # the LaunchType's value
    one_host: bool = False  # whether every node of the program runs on this host
    state: StateSpec | None = None  # where its states go, when its group keeps state
    # Whether its output shows on the launcher's screen, which then says its failure (once:
    # the runner prints no traceback of a failure it reported; terminals.Terminal).
    failure_shown_by_launcher: bool = False

    @property
    def name(self) -> str:
        return f"{self.label}/{self.index}"


def make_spec(node: Any, program_context: Any, label: str, index: int, *,
              termination_notice_secs: float, heartbeat_secs: float = 0.0,
              liveness_timeout_secs: float = 10.0,
              bind_host: str = LOOPBACK, report_path: str = "", argv: Sequence[str] = (),
              env: Mapping[str, str] | None = None,
              stop_signals: Mapping[str, str] | None = None,
              state: StateSpec | None = None,
              failure_shown_by_launcher: bool = False) -> NodeSpec:
    """The spec that runs `node` as node label/index of `program_context`'s program (any
    context of that program: it gives the controller, the token and the TLS settings).

    Raises:
      NodeSerializationError: the node cannot be pickled (named, with the reason).
    """
    pickled = serialization.pickle_node(node, label, f"{label}/{index}")
    return NodeSpec(
        node=pickled, program_name=program_context.program_name, label=label, index=index,
        controller_address=program_context.controller_address, token=program_context.token,
        termination_notice_secs=termination_notice_secs, heartbeat_secs=heartbeat_secs,
        liveness_timeout_secs=liveness_timeout_secs,
        bind_host=bind_host, report_path=report_path, tls=program_context.tls,
        launch_type=program_context.launch_type, one_host=program_context.one_host,
        stop_signals=dict(stop_signals or {}),
        sys_path=list(sys.path),
        argv=[sys.argv[0] if sys.argv else "", *argv], env=dict(env or {}), state=state,
        failure_shown_by_launcher=failure_shown_by_launcher)


def make_cluster_spec(node: Any, controller: Any, settings: Any, bind_address: str | None,
                      stop_signals: Mapping[str, str] | None = None,
                      failure_shown_by_launcher: bool = False) -> NodeSpec:
    """The spec of a node on a cluster's hosts, under `controller` (an lp.Controller): it
    heartbeats, binds the interface routed to the controller (or `bind_address`), and has its
    group's `settings` (an lp.PythonProcess: args and env).

    Raises:
      NodeSerializationError: the node cannot be pickled (named, with the reason).
    """
    return make_spec(node, controller.launcher_context, node.label, node.index,
                     termination_notice_secs=controller.termination_notice_secs,
                     heartbeat_secs=CLUSTER_HEARTBEAT_SECS,
                     liveness_timeout_secs=controller.liveness_timeout_secs,
                     bind_host=bind_address or ROUTED, argv=settings.argv(),
                     env=settings.env, stop_signals=stop_signals,
                     state=controller.state_spec(node.label),
                     failure_shown_by_launcher=failure_shown_by_launcher)


def encode(spec: NodeSpec) -> bytes:
    return pickle.dumps(spec)


def decode(data: bytes) -> NodeSpec:
    spec = pickle.loads(data)
    if not isinstance(spec, NodeSpec):
        raise TypeError(f"A node spec was expected, got a {type(spec).__name__}")
    return spec


def file_name(label: str, index: int, suffix: str) -> str:
    """`<label>.<index><suffix>`: a node's file in a run folder (labels may hold '/')."""
    return f"{label}.{index}".replace("/", ".") + suffix


def write_spec_file(spec: NodeSpec, folder: str) -> str:
    """Writes the spec as a private file of `folder` (see private_files.py); its path."""
    path = os.path.join(folder, file_name(spec.label, spec.index, ".spec"))
    private_files.write_private(path, encode(spec))
    return path


def read_spec_file(path: str) -> NodeSpec:
    """The spec at `path`, read only if it is a private file of ours."""
    return decode(private_files.read_private(path))


@dataclasses.dataclass
class FailureReport:
    """Why a colocated child's node failed, as its runner saw it."""

    reason: str
    traceback: str
    exception: BaseException | None


def write_report(path: str, exc: BaseException) -> None:
    report = FailureReport(f"{type(exc).__name__}: {exc}",
                           "".join(traceback.format_exception(exc)), exc)
    try:
        data = cloudpickle.dumps(report)
    except Exception:  # noqa: BLE001 - an unpicklable exception still has its text
        report.exception = None
        data = pickle.dumps(report)
    private_files.write_private(path, data)


def read_report(path: str) -> FailureReport | None:
    """The failure report a runner left at `path`; None if it wrote none. A report that is
    refused (not a private file of ours) or cannot be read is itself a named failure."""
    try:
        data = private_files.read_private(path)
    except FileNotFoundError:
        return None
    except UnsafePathError as e:
        return FailureReport(f"its failure report was refused ({e})", "", None)
    try:
        report = pickle.loads(data)
    except Exception as e:  # noqa: BLE001 - torn by a kill, or of a class unknown here
        return FailureReport(f"its failure report could not be read ({type(e).__name__}: "
                             f"{e})", "", None)
    if not isinstance(report, FailureReport):
        return FailureReport(f"its failure report holds a {type(report).__name__}, not a "
                             "report", "", None)
    return report
