"""The controller of a launched program: the one service every part of the program talks to.

One per launch, in the launching process (or wherever a cluster launch puts it), a courier
service speaking the controller protocol (control.py, controller_service.py) to nodes,
handles and launchers alike. Its parts: addresses (registry.py), how each node's runs end
(supervisor.py), what nodes report (node_book.py). This module is the public API (wait, stop,
kill, ...) and the stop sequence: every node's stop event and stop handlers, the grace
period, what is left ended (ending.py), then wait() returns (raising NodeFailedError if a
node failed). It owns the workers its launcher started; the launching process is never
killed.
"""

from __future__ import annotations

import concurrent.futures
import secrets
import threading
import time
from collections.abc import Callable, Sequence

from launchpad import context, control, courier, telemetry
from launchpad.courier import TLS
from launchpad.launch.runtime import errors, interrupts, node_logs, process, run_states, state_store
from launchpad.launch.runtime.controller.group_scaling import GroupScaling
from launchpad.launch.runtime.controller.node_book import NodeBook, kinds_of
from launchpad.launch.runtime.controller.program_stop import ProgramStop
from launchpad.launch.runtime.controller.registry import AddressRegistry
from launchpad.launch.runtime.controller.running_changes import RunningChanges
from launchpad.launch.runtime.controller.service import ControllerService
from launchpad.launch.runtime.controller.supervisor import Supervisor
from launchpad.launch.runtime.controllers import check_wait_arguments
from launchpad.launch.runtime.ending import NodeWorker
from launchpad.launch.runtime.launchpad_workers import LaunchpadWorkers
from launchpad.launch.runtime.terminals import NodeOutput
from launchpad.program import Program

# Room for a slow start: a fresh interpreter on a busy host, a Ray runtime_env being set up.
DEFAULT_STARTUP_TIMEOUT_SECS = 600.0


class Controller(LaunchpadWorkers, RunningChanges):
    """Controls one launched program; returned by `lp.launch` (where Launchpad returned a
    WorkerManager, which it answers as: launchpad_workers.py).

    Use `wait()` to block until the program stops, `stop()` to stop it, or `with` to do both.
    It is built whole by its launch (launch.py, or a detached launch in its cluster), whose
    options/clocks launch/options.py has checked; what changes while it runs, changes
    through its methods.

    Args:
      program: the program launched.
      launch_type: the LaunchType's value (what the program's status and its nodes'
        `launchpad.context.get_context()` say).
      run_id: what the run registry names the launch ('' where it keeps no record).
      output: where its node processes write (terminals.NodeOutput; None: to the output of
        the process they run in).
      dashboard_url: the address of its dashboard, with the token, when it serves one.
      states: where its stateful groups' states go (run_states.RunStates; None: none).
      termination_notice_secs: the grace period nodes get after a stop.
      liveness_timeout_secs: a node process whose heartbeats stop for this long is lost.
      startup_timeout_secs: a node process (or actor) made this long ago whose runner has
        not reported that it started never came up: it fails (or restarts by its policy).
      host: the interface it listens on (loopback, unless nodes run on other hosts).
      one_host: whether every node runs on this host (their servers serve it alone).
      tls: certificates every courier server and client of the program uses (None: the
        program runs in plaintext, with its token).
      port: the port the controller listens on (0: one the system picks).
      token: the program's secret (None: a fresh one); a launch that hands it to its nodes
        before the controller exists (a Kubernetes Secret) passes its own.
      advertised_host: the name nodes reach the controller at, when it is not `host` (a
        Kubernetes Service's DNS name, while listening on 0.0.0.0).
    """

    def __init__(self, program: Program, *, launch_type: str = "", run_id: str = "",
                 output: NodeOutput | None = None, dashboard_url: str | None = None,
                 states: run_states.RunStates | None = None,
                 termination_notice_secs: float = 10.0, liveness_timeout_secs: float = 10.0,
                 startup_timeout_secs: float = DEFAULT_STARTUP_TIMEOUT_SECS,
                 host: str = "127.0.0.1", one_host: bool = False, tls: TLS | None = None,
                 port: int = 0,
                 token: str | None = None, advertised_host: str | None = None):
        self.program = program  # what was launched: a description (the dashboard draws it)
        self.program_name = program.name
        self._grace = termination_notice_secs
        self.liveness_timeout_secs = liveness_timeout_secs
        self.startup_timeout_secs = startup_timeout_secs
        self._token = token or secrets.token_hex(16)
        self.tls = tls
        # Every node that has an address, and the node the program runs it in (itself, or
        # the colocation holding it): those are what run, end, fail and restart.
        self._registry = AddressRegistry(program.name, {
            (inner.label, inner.index): (node.label, node.index)
            for node in program.get_all_nodes() for inner in node.all_nodes()})
        self._book = NodeBook(kinds_of(program))
        self._supervisor = Supervisor(
            program.name, {(n.label, n.index) for n in program.get_all_nodes()},
            program.restart_policies, self._registry, self.stop, liveness_timeout_secs,
            self._book, startup_timeout_secs)
        self._stop = ProgramStop(program.name)
        # Its launcher sets `scaling.start_nodes` where it can start nodes of a running program.
        self.scaling = GroupScaling(program, self._registry, self._supervisor, self._book,
                                    termination_notice_secs)
        self.stop_reason = ""  # why the program was stopped from outside, if it was
        self.failure_raised = False  # whether a wait() has raised the failure to its caller
        # Where each node's output is while the program runs, for read_log (its terminal's
        # log_of(name) and writing(name)), and where the nodes' logs are kept (local_mp's
        # terminal='output_to_files'; Slurm's run folder), for a script to say so when its
        # program ends; None where nothing keeps them.
        self.output = output
        self.log_dir = output.log_dir if output is not None else None
        self.launch_type = launch_type
        self._one_host = one_host
        self.run_id = run_id
        self.dashboard_url = dashboard_url
        self.states = states
        self.pending = ""  # what it waits for before any node can start (set_pending)
        self.started_at = time.time()
        # Starts the processes of MultiProcessingColocation nodes run as threads here.
        self._process_starter = process.ChildProcessStarter(termination_notice_secs,
                                                            in_worker=False)
        # The controller protocol, served; also asked in-process by what relays a question
        # from elsewhere (a Kubernetes program's, kubernetes/relay.py).
        self.protocol = ControllerService(self, self._registry, self._supervisor)
        self._server = courier.Server(self.protocol, host=host, port=port, token=self._token,
                                      thread_pool_size=8, tls=tls)
        bound = self._server.start()
        self.address = (f"{advertised_host}:{self._server.port}" if advertised_host
                        else bound)
        self.launcher_context = self.node_context(None, 0)
        context.add_process_context(self.launcher_context)

    # --- what launchers use -------------------------------------------------------------

    def node_context(self, label: str | None, index: int) -> context.NodeContext:
        """A context for code of this program running in this process (None: the launcher)."""
        node_context = context.NodeContext(
            program_name=self.program_name, label=label, index=index,
            controller_address=self.address, token=self._token, tls=self.tls,
            process_starter=self._process_starter, termination_notice_secs=self._grace,
            launch_type=self.launch_type, one_host=self._one_host,
            state=state_store.NodeState.of(
                self.state_spec(label), f"{label}/{index}"))
        self._stop.add_context(node_context)
        return node_context

    def state_spec(self, label: str | None) -> state_store.StateSpec | None:
        """Where the nodes of group `label` keep their states (None: their group keeps none)."""
        if self.states is None or label is None:
            return None
        return self.states.spec_for(self.program.state_policies.get(label))

    @property
    def termination_notice_secs(self) -> float:
        """The grace period nodes get after a stop."""
        return self._grace

    @property
    def token(self) -> str:
        """The program's secret: nodes' servers refuse calls without it."""
        return self._token

    def add_worker(self, worker: NodeWorker) -> None:
        self._supervisor.add_worker(worker)

    def worker_ended(self, worker: NodeWorker) -> None:
        """A launcher saw `worker` end (see supervisor.py)."""
        self._supervisor.worker_ended(worker)

    def on_finish(self, callback: Callable[[], None]) -> None:
        """Calls `callback()` once every node has ended, before `wait()` returns (now, if
        they have all ended already)."""
        self._stop.on_finish(callback)

    # --- what users ask ---------------------------------------------------------------------

    def _unit(self, name: str) -> tuple:
        label, _, index = name.rpartition("/")
        return self._registry.check_node(label, int(index) if index.isdigit() else -1)

    def wait_for_node(self, name: str, timeout: float | None = None) -> bool:
        """Blocks until node `name` ('label/index') has ended (finished, or failed for good);
        False if `timeout` seconds passed first."""
        return self._supervisor.wait_for_unit(self._unit(name), timeout)

    def wait_for_started(self, name: str, timeout: float | None = None) -> bool:
        """Blocks until node `name` ('label/index') runs (its runner has reported it
        started); False if `timeout` seconds passed first, or it ended before."""
        return self._supervisor.wait_for_started(self._unit(name), timeout)

    def wait_for_restarts(self, name: str, count: int, timeout: float | None = None) -> bool:
        """Blocks until node `name` ('label/index') has been restarted `count` times by its
        group's policy; False if `timeout` seconds passed first."""
        return self._supervisor.wait_for_restarts(self._unit(name), count, timeout)

    def restarts(self) -> dict[str, int]:
        """'label/index' -> how many times the node was restarted by its group's policy."""
        return self._supervisor.restarts()

    def hosts(self) -> dict[str, str]:
        """'label/index' -> the address of the host each running node (or colocation) runs
        on, as the node reported it."""
        return {name: host for name, (host, _) in self._supervisor.placements().items()}

    def node_pids(self) -> dict[str, int]:
        """'label/index' -> the pid of each running node's process on its own host, as the
        node reported it (under ray, `pids()` has the launcher's side; under slurm, whose
        host agents start the nodes, both are the pid on the node's host)."""
        return {name: pid for name, (_, pid) in self._supervisor.placements().items()}

    def pids(self) -> dict[str, int]:
        """'label/index' -> pid of each node's (current) process; nodes run as threads have
        none. For attaching a profiler or debugger."""
        return {w.name: w.pid for w in self._supervisor.workers() if w.pid}

    def log_failure(self, name: str, node_traceback: str) -> None:
        """Keeps node `name`'s traceback in its log where its output shows on this screen:
        the node printed none, leaving its failure to wait()'s error (terminals.Terminal)."""
        if self.output is not None and self.output.terminal.shows_output and node_traceback:
            self.output.terminal.add_to_log(name, node_traceback)

    def exit_codes(self) -> dict[str, int | None]:
        """'label/index' -> how each node's process (or thread) ended: 0 done, > 0 its exit
        code, < 0 the signal that killed it, None still running."""
        return {w.name: w.returncode for w in self._supervisor.workers()}

    def set_pending(self, what: str) -> None:
        """Says what the program waits for before any node can start (a Slurm job pending,
        with Slurm's reason; '' once it need not): its status is 'pending' meanwhile."""
        self.pending = what

    def status(self) -> telemetry.ProgramStatus:
        """Every node of the program now: its state, where it runs, its restarts and
        failures, and what it last reported of itself (telemetry.py)."""
        failure = self.failure
        return telemetry.ProgramStatus(
            program=self.program_name, launch_type=self.launch_type, run_id=self.run_id,
            started_at=self.started_at,
            state=("stopped" if self._stop.finished.is_set() else
                   "stopping" if self._stop.stopping.is_set() else
                   "pending" if self.pending else "running"),
            stop_reason=self.stop_reason, failure=failure.summary if failure else "",
            nodes=self._book.statuses(self._registry.addresses_by_unit()),
            log_dir=self.log_dir, pending=self.pending, changes=self.scaling.changes())

    def report(self, label: str, index: int, instance: str,
               sample: telemetry.NodeSample) -> None:
        """A node's telemetry (the protocol's `report`)."""
        self._book.report(self._registry.check_node(label, index), instance, sample)

    def read_log(self, label: str, index: int, offset: int,
                 max_bytes: int) -> tuple[bytes, bool]:
        """Up to `max_bytes` (at most node_logs.MAX_READ) of node label/index's output from
        byte `offset` (a negative one counts from the end), and whether more may come (the
        protocol's `read_log`; the dashboard's tail).

        Raises:
          UnknownNodeError: the program has no such node.
          LookupError: its launch keeps no log of it (the message says where it goes).
        """
        unit = self._registry.check_node(label, index)
        name = f"{unit[0]}/{unit[1]}"
        # Whether more may come is decided first: once the node has ended and its output is
        # all in, what is read next is the whole rest.
        more = (self._book.state(unit) in ("starting", "running", "restarting")
                or (self.output is not None and self.output.terminal.writing(name)))
        try:
            return node_logs.read(self.output, name, offset, max_bytes), more
        except LookupError as e:
            raise LookupError(f"Program {self.program_name!r} ({self.launch_type}) keeps no "
                              f"log of node {name}: {e}") from None

    @property
    def failure(self) -> errors.NodeFailedError | None:
        """The failure that stopped the program, if any."""
        return self._supervisor.failure

    # --- stop and wait --------------------------------------------------------------------

    def stop_future(self) -> concurrent.futures.Future:
        """A future set when the program starts stopping (for nodes in other processes)."""
        return self._stop.stop_future()

    def end_future(self) -> concurrent.futures.Future:
        """A future set when the stop has ended every node (program_stop.py)."""
        return self._stop.end_future()

    def stop(self, reason: str = "") -> None:
        """Asks the program to stop; returns at once. Safe to call any number of times.

        Args:
          reason: why, when it is not the program's own doing (e.g. the cluster job's time
            limit); kept as `stop_reason`.
        """
        def first() -> None:
            self.stop_reason = reason
            self._registry.program_stopping()
            self._supervisor.program_stopping()

        if not self._stop.begin(first):
            return
        threading.Thread(target=self._stop_sequence, name=f"lp-stop-{self.program_name}",
                         daemon=True).start()

    def kill(self) -> None:
        """Stops the program without a grace period: node processes are killed now (threads,
        which cannot be killed, get the stop event as usual)."""
        self.stop()
        for worker in self._supervisor.workers():
            worker.kill()

    def wait(self, labels_to_wait_for: Sequence[str] | str | None = None,
             raise_error: bool = True, return_on_first_completed: bool = False, *,
             timeout: float | None = None) -> bool:
        """Blocks until the program has stopped and every node has ended - or, as Launchpad's
        wait did, until the nodes of groups `labels_to_wait_for` have (the others run on), or
        with `return_on_first_completed` until one has. True once done; False if `timeout`
        seconds passed first.

        Raises:
          NodeFailedError: a node failed (the first one), with its traceback: at once,
            whatever is waited for (a failure stops the program), unless `raise_error` is
            False, which waits on and returns.
          ValueError: a label names no group of the program.
          TypeError: a number given first (`wait(30)`): the timeout is `timeout=`.
        """
        check_wait_arguments(labels_to_wait_for, timeout)
        if labels_to_wait_for is None and not return_on_first_completed:
            ended = interrupts.wait_in_slices(self._stop.finished.wait, timeout)
        else:
            units = self.program.node_keys(labels_to_wait_for)
            ended = interrupts.wait_in_slices(lambda slice_secs: self._supervisor.wait_for_units(
                units, return_on_first_completed, raise_error, slice_secs), timeout)
        if not ended:
            return False
        if raise_error and self.failure is not None:
            self.failure_raised = True
            raise self.failure
        return True

    def stop_and_wait(self) -> bool:
        """Stops the program and blocks until every node has ended (Launchpad's name).

        Raises:
          NodeFailedError: a node failed before the stop.
        """
        self.stop()
        return self.wait()

    def __enter__(self) -> "Controller":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()
        if exc_type is None:
            self.wait()
        else:
            self._stop.finished.wait()

    def _stop_sequence(self) -> None:
        self._stop.run(self._supervisor.workers, self._grace,
                       before_ending=self._supervisor.wait_for_restarts_under_way,
                       after_ending=lambda: self._supervisor.all_ended("the program stopped"),
                       close=self._close)

    def _close(self) -> None:
        """What the controller ends of its own once the nodes have: its server, its child
        processes' starter, its context."""
        self._server.stop()
        control.forget(self.address)
        self._process_starter.close()
        context.remove_process_context(self.launcher_context)
