"""A host agent: the one Slurm step of a host, which starts and watches that host's nodes.

    launcher (slurm/agents.py: HostAgent)    agent (`python -m launchpad.launch --agent SPEC`)
      srun -w HOST -c SHARE ... --agent  -->   fork servers (the core imported once per host;
                                               one per set of "imports" asked for, as Reverb)
      {"op": "spawn", "id", "spec", ...}       fork the node (exec: its own interpreter), its
                                               stdout and stderr pipes of the agent's
        <-- {"ev": "started", "id", "pid"}     (or "failed", "id", "error")
        <-- {"ev": "out", "pid", "fd", "data"} the node's output, as it comes
        <-- {"ev": "exited", "pid", "code"}    once it has ended and its output is read
      {"op": "signal", "pid", "sig"}           to the node's process group
      {"op": "ping", "id"}                     whether the agent (its host) still answers
        <-- {"ev": "pong", "id"}
      stdin closed                             what is left is killed; the agent ends

Both ways are JSON lines on the step's stdin and stdout, which srun carries between the
launching host and this one: private pipes of the user's job, and nothing in them is
unpickled. Every period the agent sends its nodes' telemetry, gathered from them by
agent_relay.py, to the controller in one `reports` call, which is their heartbeat too (a
`heartbeats` call carries the runs that sent no sample): the controller's load grows with
hosts, not nodes. A signal Slurm sends the step before its end
(SIGUSR1, --signal) is passed on to every node, whose runner stops the program gracefully.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import shutil
import signal
import sys
import threading
import time
from typing import Any

from launchpad import control
from launchpad.courier import TLS
from launchpad.launch.node_process import agent_relay, fork_server
from launchpad.launch.runtime import private_files, terminals
from launchpad.nodes.python.local_multi_processing import PythonProcess

_CHUNK = 4096
_OUTPUT_AFTER_EXIT_SECS = 1.0  # how long an ended node's pipes may still hold output
_PASSED_ON = (signal.SIGUSR1, signal.SIGUSR2)


@dataclasses.dataclass
class AgentSpec:
    """What a host agent needs: its controller, and how often it reports."""

    host: str  # the host slot it serves, for its messages
    controller_address: str
    token: str
    tls: TLS | None
    period_secs: float
    liveness_timeout_secs: float


class _Node:
    """One node process of the agent: how many of its output pipes are open, how it ended."""

    def __init__(self, pid: int):
        self.pid = pid
        self.open_pipes = 2
        self.code: int | None = None
        self.reported = False


class Agent:
    """Starts nodes from its fork server and says what becomes of them on `out`."""

    def __init__(self, forks: Any, out: Any):
        self._forks = forks
        self._out = out
        self._write = threading.Lock()
        self._lock = threading.Lock()
        self._nodes: dict[int, _Node] = {}
        self._early_exits: dict[int, int] = {}  # exits reported before their start was

    def say(self, message: dict) -> None:
        line = json.dumps(message) + "\n"
        with self._write, contextlib.suppress(OSError, ValueError):  # the launcher is gone
            self._out.write(line)
            self._out.flush()

    def handle(self, message: dict) -> None:
        if message.get("op") == "spawn":
            self._spawn(message)
        elif message.get("op") == "signal":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(message["pid"]), int(message["sig"]))
        elif message.get("op") == "ping":
            self.say({"ev": "pong", "id": message["id"]})

    def _spawn(self, message: dict) -> None:
        settings = PythonProcess(env=message.get("env") or None,
                                 interpreter=message.get("interpreter"))
        out, err = os.pipe(), os.pipe()
        stdin = os.open(os.devnull, os.O_RDONLY)
        box: list[Any] = []  # the spawn's future, for its exit (which may come first)
        spawned = threading.Event()

        def on_exit(code: int) -> None:
            spawned.wait()
            self._exited(box[0], code)

        try:
            started = self._forks.spawn(message["spec"], settings, (stdin, out[1], err[1]),
                                        True, on_exit, tuple(message.get("imports") or ()))
            box.append(started)
            spawned.set()
        except Exception as e:  # noqa: BLE001 - said to the launcher, which fails the node
            for fd in (out[0], err[0]):
                os.close(fd)
            self.say({"ev": "failed", "id": message["id"], "error": str(e)})
            return
        finally:
            for fd in (stdin, out[1], err[1]):
                os.close(fd)
        started.add_done_callback(
            lambda future: self._started(message["id"], future, (out[0], err[0])))

    def _started(self, request: int, future: Any, pipes: tuple[int, int]) -> None:
        if future.exception() is not None:
            for fd in pipes:
                os.close(fd)
            self.say({"ev": "failed", "id": request, "error": str(future.exception())})
            return
        pid = future.result()
        node = _Node(pid)
        with self._lock:
            self._nodes[pid] = node
            early = self._early_exits.pop(pid, None)
        self.say({"ev": "started", "id": request, "pid": pid})
        for fd_number, fd in ((1, pipes[0]), (2, pipes[1])):
            threading.Thread(target=self._read, args=(node, fd_number, fd), daemon=True,
                             name=f"lp-agent-out-{pid}").start()
        if early is not None:
            self._exited(future, early)

    def _read(self, node: _Node, fd_number: int, fd: int) -> None:
        while data := os.read(fd, _CHUNK):
            self.say({"ev": "out", "pid": node.pid, "fd": fd_number,
                      "data": data.decode("latin-1")})
        os.close(fd)
        with self._lock:
            node.open_pipes -= 1
        self._report_end(node)

    def _exited(self, started: Any, code: int) -> None:
        pid = started.result()  # set before any exit is reported
        with self._lock:
            node = self._nodes.get(pid)
            if node is None:  # an exec'd node's end can come before its start is handled
                self._early_exits[pid] = code
                return
            node.code = code
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(node.pid, signal.SIGKILL)  # what it left in its group
        self._report_end(node)
        threading.Timer(_OUTPUT_AFTER_EXIT_SECS, self._report_end, (node, True)).start()

    def _report_end(self, node: _Node, late: bool = False) -> None:
        """Says a node ended once its output is read (or a second after, if something it
        left holds its pipes)."""
        with self._lock:
            if node.reported or node.code is None or (node.open_pipes and not late):
                return
            node.reported = True
            del self._nodes[node.pid]
        self.say({"ev": "exited", "pid": node.pid, "code": node.code})

    def pass_on(self, signum: int) -> None:
        with self._lock:
            pids = list(self._nodes)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signum)

    def end(self) -> None:
        """Kills every node left (the launcher has gone, or is done with this host)."""
        self.pass_on(signal.SIGKILL)
        self._forks.close()


def _forward(inbox: agent_relay.Inbox, agent_spec: AgentSpec, stop: threading.Event) -> None:
    """Every period: the nodes' heartbeats and telemetry, one call each, to the controller.

    A controller silent for the liveness timeout (the host cut off, the controller gone)
    closes the inbox: each node then finds its agent gone and ends itself after its grace
    period, as a node whose controller went silent does."""
    controller = control.client_for(agent_spec.controller_address, agent_spec.token,
                                    agent_spec.tls)
    lost_after = max(agent_spec.liveness_timeout_secs, agent_spec.period_secs)
    last_answer = time.monotonic()
    while not stop.wait(agent_spec.period_secs):  # the period: a clock, not an event
        runs, samples = inbox.take()
        reported = {tuple(entry[:3]) for entry in samples}  # a report is a heartbeat too
        beats = [run for run in runs if run not in reported]
        try:
            if samples:
                controller.reports(samples, timeout=agent_spec.period_secs)
            if beats or not samples:  # (none at all: a ping, to know the controller lives)
                controller.heartbeats(beats, timeout=agent_spec.period_secs)
            last_answer = time.monotonic()
        except Exception as e:  # noqa: BLE001 - no answer: counts against the timeout
            if time.monotonic() - last_answer > lost_after:
                terminals.say(f"host agent of {agent_spec.host}: its controller has not "
                              f"answered for {lost_after:g}s ({type(e).__name__}); its nodes end")
                inbox.close()
                return


def run(spec_path: str) -> int:
    """The agent's process: serves its launcher until its stdin closes."""
    agent_spec: AgentSpec = pickle.loads(private_files.read_private(spec_path))
    folder = private_files.make_work_dir("agent-")
    inbox = agent_relay.Inbox(os.path.join(folder, "agent.sock"))
    os.environ[agent_relay.SOCKET_ENV] = inbox.path  # its fork server and nodes inherit it
    agent = Agent(fork_server.ForkServer(), sys.stdout)
    for signum in _PASSED_ON:
        signal.signal(signum, lambda number, _: agent.pass_on(number))
    stop = threading.Event()
    threading.Thread(target=_forward, args=(inbox, agent_spec, stop), daemon=True,
                     name="lp-agent-forward").start()
    agent.say({"ev": "ready", "host": agent_spec.host, "pid": os.getpid()})
    try:
        for line in sys.stdin:
            agent.handle(json.loads(line))
    finally:
        stop.set()
        agent.end()
        inbox.close()
        shutil.rmtree(folder, ignore_errors=True)
    return 0
