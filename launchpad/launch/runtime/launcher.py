"""What `lp.launch` knows of a launch type: a `Launcher`, and the options it is given.

Each launch type is one `Launcher` subclass in its engine's folder (local/, slurm/, ray/,
kubernetes/), registered once in launch/launchers.py. What used to be tables and inline
checks in `lp.launch` is said here, by the launcher itself:

    name, where_nodes_run       the launch type, and what runs each node (for dry runs)
    cluster                     its nodes run on a cluster's hosts
    detach                      NEVER, OPTIONAL (detach=True puts the controller in the
                                cluster) or ALWAYS (the launching machine cannot be reached)
    recorded                    the launching process owns the program: `launchpad ls`
                                lists it, and the interpreter's exit waits for it
    live_status                 it may show the live table of its nodes
    settings_keyword            its settings' keyword of `lp.launch` (`slurm=`), and
    settings_from_flags()       what the --lp_* flags give when it is not passed
    terminals, process_fields   the terminals and lp.PythonProcess fields it honours
    validate(program, options)  what it refuses before anything starts
    controller_host(options)    where its nodes reach the controller
    node_output(program, options)  where its node processes write (made before the
                                controller, which is given it)
    plan(program, options)      what a dry run prints
    launch(program, controller, options) / launch_detached(program, options)
    records_run, run_of, attach  its detached runs: `launchpad ls` and `lp.attach` (by
                                default, those of its `detached_module`)

`LaunchOptions` is everything else `lp.launch` was told, checked against one schema
(launch/options.py) before any launcher sees it.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
from collections.abc import Mapping
from typing import Any, ClassVar

from launchpad.courier import TLS
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.remote import RemoteController
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


class Launcher:
    """A launch type (see the module doc). Subclasses set the class attributes and override
    what they do differently."""

    name: ClassVar[str]
    where_nodes_run: ClassVar[str] = "started"
    cluster: ClassVar[bool] = False
    detach: ClassVar[Detach] = Detach.NEVER
    recorded: ClassVar[bool] = False
    live_status: ClassVar[bool] = False
    settings_keyword: ClassVar[str | None] = None
    # The module whose launch(program, options) starts a detached program and whose
    # records_run(folder), run_of(folder) and attach(folder) find its runs (imported when
    # one is made or read); None: this launch type has none of its own.
    detached_module: ClassVar[str | None] = None
    # The terminals node output may go to (terminals.py), and why others may not; None:
    # its nodes share the launching process's output (threads).
    terminals: ClassVar[frozenset[str] | None] = None
    terminals_note: ClassVar[str] = ""
    # The fields of lp.PythonProcess it honours in `local_resources`, and how to say so;
    # None: its nodes are threads, and only the labels are checked.
    process_fields: ClassVar[frozenset[str] | None] = None
    process_note: ClassVar[str] = ""
    # Whether startup_timeout_secs applies (a pod's start is Kubernetes' own).
    times_startup: ClassVar[bool] = True

    def settings_from_flags(self) -> Any:
        """Its settings as the --lp_* flags give them, or None (its defaults)."""
        return None

    def validate(self, program: Program, options: LaunchOptions) -> None:
        """Refuses, naming what is at fault, a launch of `program` that could not start."""

    def controller_host(self, options: LaunchOptions) -> str:
        """The address its nodes reach the controller at."""
        return "127.0.0.1"

    def node_output(self, program: Program, options: LaunchOptions) -> NodeOutput | None:
        """Where its node processes write (None: the launching process's own output)."""
        return None

    def plan(self, program: Program, options: LaunchOptions) -> str:
        """What a dry run of `program` prints."""
        nodes = program.get_all_nodes()
        lines = [f"Program {program.name!r} under {self.name}: {len(nodes)} node"
                 f"{'s' * (len(nodes) != 1)}, each {self.where_nodes_run}:"]
        lines += [f"  {node.name} ({type(node).__name__})" for node in nodes]
        return "\n".join(lines)

    def launch(self, program: Program, controller: Controller,
               options: LaunchOptions) -> None:
        """Starts the nodes of `program` under `controller`."""
        raise NotImplementedError(f"launch_type {self.name!r} runs programs detached only")

    def launch_detached(self, program: Program, options: LaunchOptions) -> RemoteController:
        """Starts `program` with its controller in the cluster; returns its proxy."""
        if self.detached_module is None:
            raise NotImplementedError(f"launch_type {self.name!r} cannot detach")
        return self._detached().launch(program, options)

    def records_run(self, folder: str) -> bool:
        """Whether run folder `folder` records a detached run of this launch type."""
        return self.detached_module is not None and self._detached().records_run(folder)

    def run_of(self, folder: str) -> Run | None:
        """The detached run `folder` records (it `records_run`), for `launchpad ls`; None
        once it has ended."""
        return self._detached().run_of(folder)

    def attach(self, run_id: str, folder: str | None,
               namespace: str | None) -> RemoteController | None:
        """The controller of detached run `run_id` (its record `folder`, or found in the
        cluster's `namespace`), or None if the run is none of this launch type's."""
        if folder is None or not self.records_run(folder):
            return None
        return self._detached().attach(folder)

    def _detached(self) -> Any:
        return importlib.import_module(self.detached_module)
