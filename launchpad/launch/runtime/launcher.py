"""What `lp.launch` knows of a launch type: a `Launcher`, the options it is given, and
the `Plan` it makes of a program before anything starts.

Each launch type is one `Launcher` subclass in its engine's folder, named by its row of
launch/launchers.py. A launch asks it twice: `prepare(program, options)` checks what
would start, refusing what cannot (naming what is at fault), and returns a `Plan` (where
the nodes reach the controller, where their output goes, whether they share this host, what
a dry run prints); `start(plan, controller)` then starts the nodes under the controller
made from that plan. What else differs between launch types the class says:

    name, where_nodes_run       the launch type, and what runs each node (for dry runs)
    detach                      NEVER, OPTIONAL (detach=True puts the controller in the
                                cluster) or ALWAYS (the launching machine cannot be reached)
    recorded                    the launching process owns the program: `launchpad ls`
                                lists it, and the interpreter's exit waits for it
    live_status                 it may show the live table of its nodes
    terminals, process_fields   the terminals and lp.PythonProcess fields it honours
    startup_timed_by            what times its nodes' start, if not the controller
    settings_from_flags()       its settings as the --lp_* flags give them
    detached_runs()             its `DetachedRuns`: made, listed (`launchpad ls`) and
                                attached to (`lp.attach`), when it has any

`LaunchOptions` is everything else `lp.launch` was told, checked against one schema
(launch/options.py) before any launcher sees it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from launchpad.courier import TLS
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.controllers import RemoteController
from launchpad.launch.runtime.run_records import Run
from launchpad.launch.runtime.terminals import NodeOutput
from launchpad.program import Program


class Detach(enum.Enum):
    """Whether a launch type's programs may outlive the launching process."""

    NEVER = "never"  # a local program lives in the process that launched it
    OPTIONAL = "optional"  # detach=True puts the controller in the cluster
    ALWAYS = "always"  # the launching machine cannot be reached from the cluster


@dataclasses.dataclass(frozen=True)
class Clocks:
    """The controller's clocks: the grace period of a stop, how long a node may stay
    silent, and how long its process may take to start (None: the engine times it)."""

    termination_notice_secs: float
    liveness_timeout_secs: float
    startup_timeout_secs: float | None

    def controller_arguments(self) -> dict[str, float]:
        """The keyword arguments of a Controller (or a detached launch) for these clocks."""
        given = dataclasses.asdict(self)
        return {name: value for name, value in given.items() if value is not None}


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    """What `lp.launch` was told besides the program and the launch type, checked, with the
    defaults the --lp_* flags give filled in (launch/options.py says each one)."""

    clocks: Clocks
    test_case: Any = None
    serialize_py_nodes: bool | None = None
    local_resources: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    terminal: str | None = None
    resources: Mapping[str, Any] | None = None
    settings: Any = None  # the launcher's own (lp.SlurmSettings, ...); None: its defaults
    tls: TLS | None = None
    detach: bool = False
    live_status: bool = False
    dashboard: tuple[int, str] | None = None  # its port, and what asked for it (for errors)
    dry_run: bool = False
    bind_address: str | None = None
    resume: str | None = None  # the run whose states the stateful nodes start from
    resume_partial: bool = False

    @property
    def starts_here(self) -> bool:
        """Whether this process starts the nodes, under a controller of its own (not a dry
        run, not detached)."""
        return not (self.dry_run or self.detach)


class DetachedRuns(Protocol):
    """A launch type's runs whose controller lives in the cluster (detach=True)."""

    def launch(self, program: Program, options: LaunchOptions) -> RemoteController:
        """Starts `program` with its controller in the cluster; returns its proxy."""

    def run_of(self, folder: str) -> Run | None:
        """The run recorded in run folder `folder`, for `launchpad ls`; None if it is none
        of this launch type's, or has ended."""

    def attach(self, run_id: str, folder: str | None,
               namespace: str | None) -> RemoteController | None:
        """The controller of run `run_id` (its record `folder`, or found in the cluster's
        `namespace`); None if the run is none of this launch type's."""

    def runs_in(self, namespace: str) -> list[Run]:
        """The runs running in the cluster's `namespace`, for `launchpad ls --namespace`
        (a cluster that keeps its runs itself); [] for a launch type that records them in
        run folders."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a launcher prepared of one program (`Launcher.prepare`), before anything starts.

    Args:
      program: the program.
      options: the launch's options.
      description: what a dry run prints.
      one_host: whether every node runs on this host (their servers then serve this host
        alone: no gRPC port).
      controller_host: the address the nodes reach the controller at.
      output: where the node processes write (None: to the launching process's output);
        made only when `options.starts_here`, and undone if the launch fails.
      layout: the launcher's own (a Slurm job's placement of the nodes).
    """

    program: Program
    options: LaunchOptions
    description: str
    one_host: bool = False
    controller_host: str = "127.0.0.1"
    output: NodeOutput | None = None
    layout: Any = None


class Launcher:
    """A launch type (see the module doc). Subclasses set the class attributes and override
    what they do differently."""

    name: ClassVar[str]
    where_nodes_run: ClassVar[str] = "started"
    detach: ClassVar[Detach] = Detach.NEVER
    recorded: ClassVar[bool] = False
    live_status: ClassVar[bool] = False
    # The terminals node output may go to (terminals.py), and why others may not; None:
    # its nodes share the launching process's output (threads).
    terminals: ClassVar[frozenset[str] | None] = None
    terminals_note: ClassVar[str] = ""
    # The fields of lp.PythonProcess it honours in `local_resources`, and how to say so;
    # None: its nodes are threads, and only the labels are checked.
    process_fields: ClassVar[frozenset[str] | None] = None
    process_note: ClassVar[str] = ""
    # What times its nodes' start instead of startup_timeout_secs, as an error says it
    # ("a pod's start is timed by ..."); "": the controller times it.
    startup_timed_by: ClassVar[str] = ""

    def settings_from_flags(self) -> Any:
        """Its settings as the --lp_* flags give them, or None (its defaults)."""
        return None

    def prepare(self, program: Program, options: LaunchOptions) -> Plan:
        """The plan of launching `program` (see `Plan`); nothing is made unless
        `options.starts_here`.

        Raises:
          LaunchError, ValueError: the launch could not start (what is at fault named).
        """
        return Plan(program, options, self.describe(program), one_host=True)

    def describe(self, program: Program) -> str:
        """What a dry run of `program` prints, by default: each node, and what runs it."""
        nodes = program.get_all_nodes()
        lines = [f"Program {program.name!r} under {self.name}: {len(nodes)} node"
                 f"{'s' * (len(nodes) != 1)}, each {self.where_nodes_run}:"]
        lines += [f"  {node.name} ({type(node).__name__})" for node in nodes]
        return "\n".join(lines)

    def start(self, plan: Plan, controller: Controller) -> None:
        """Starts the nodes of `plan.program` under `controller` (made from `plan`)."""
        raise NotImplementedError(f"launch_type {self.name!r} runs programs detached only")

    def detached_runs(self) -> DetachedRuns | None:
        """Its detached runs (None: it has none)."""
        return None
