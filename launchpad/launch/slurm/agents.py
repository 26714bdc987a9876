"""The launcher's side of the host agents (host_agent.py): one srun step per host of the job.

A `HostAgent` is a process.Spawner for the nodes placed on its host: its first spawn (once
the job runs) starts the agent's step, `srun -w HOST --exact -n1 -c SHARE` with that host's
share of CPUs, GPUs and memory; each spawn is then a message to the agent, which forks the
node there. The launching host so runs one srun per host, not per node, and each node starts
as a fork of an interpreter that has the core imported. Node output comes back through the
agent to the node's terminal (prefixed lines, its log); signals go to the node's process
group through the agent. If the agent's step ends (killed, its host lost), every node it ran
has ended: each is reported killed, and its group's restart policy decides what follows.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

from absl import logging

from launchpad.launch.node_process.host_agent import AgentSpec
from launchpad.launch.runtime import private_files, spec
from launchpad.launch.runtime.process import Spawner, Stdio, own_process_group
from launchpad.launch.slurm.errors import SlurmError
from launchpad.launch.slurm.job import SlurmJob, environment
from launchpad.launch.slurm.placement import Component
from launchpad.nodes.python.local_multi_processing import PythonProcess

_CLOSE_TIMEOUT_SECS = 10.0


def write_agent_spec(run_dir: str, name: str, controller: object) -> str:
    """The agents' spec file in the run folder (private): how they reach the controller."""
    path = os.path.join(run_dir, f"{name}.agent")
    private_files.write_private(path, pickle.dumps(AgentSpec(
        name, controller.address, controller.token, controller.tls,
        spec.CLUSTER_HEARTBEAT_SECS, controller.liveness_timeout_secs)))
    return path


class HostAgent(Spawner):
    """Host `host` (0-based) of `component` of the job, and the agent that runs its nodes."""

    def __init__(self, job: SlurmJob, component: int, host: int, share: Component,
                 spec_path: str, log_path: str):
        self._job = job
        self._component = component
        self._host = host
        self._share = share
        self._spec_path = spec_path
        self._log_path = log_path
        self.name = f"host {host} of component {component}"
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._popen: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._next_request = 0
        self._starting: dict[int, tuple[concurrent.futures.Future, Callable, Stdio]] = {}
        self._live: dict[int, tuple[Callable, Stdio]] = {}
        self._pings: dict[int, threading.Event] = {}
        self._ended = ""  # why the agent is gone, once it is

    def spawn(self, spec_path: str, settings: PythonProcess, stdio: Stdio, own_group: bool,
              on_exit: Callable[[int], None],
              imports: tuple[str, ...] = ()) -> concurrent.futures.Future:
        stdio = tuple(os.dup(fd) for fd in stdio)  # ours until the node ends
        started: concurrent.futures.Future = concurrent.futures.Future()
        threading.Thread(target=self._ask_spawn, args=(spec_path, settings, stdio, started,
                                                       on_exit, imports),
                         daemon=True, name=f"lp-agent-spawn-{os.path.basename(spec_path)}"
                         ).start()
        return started

    def _ask_spawn(self, spec_path: str, settings: PythonProcess, stdio: Stdio,
                   started: concurrent.futures.Future, on_exit: Callable[[int], None],
                   imports: tuple[str, ...]) -> None:
        try:
            self._job.wait_running()
            with self._lock:
                self._start_agent()
                if self._ended:
                    raise SlurmError(f"the host agent of {self.name} has ended: {self._ended}")
                request = self._next_request
                self._next_request += 1
                self._starting[request] = (started, on_exit, stdio)
            self._send({"op": "spawn", "id": request, "spec": spec_path,
                        "interpreter": settings.interpreter, "imports": list(imports),
                        "env": {k: str(v) for k, v in (settings.env or {}).items()}})
        except Exception as e:  # noqa: BLE001 - the future carries it to the node
            _close(stdio)
            started.set_exception(e)

    def _start_agent(self) -> None:
        """Starts the agent's step (under the lock), once."""
        if self._popen is not None or self._ended:
            return
        host = self._job.hosts(self._component)[self._host]
        share = self._share
        het = ([f"--het-group={self._component}"] if self._job.placement.heterogeneous
               else [])
        argv = ["srun", f"--jobid={self._job.job_id}", *het, f"--nodelist={host}", "--exact",
                "--nodes=1", "--ntasks=1", f"--cpus-per-task={share.cpus}",
                *([f"--gpus-per-task={share.gpus}"] if share.gpus else []),
                *([f"--mem={share.memory_mb}M"] if share.memory_mb is not None else []),
                f"--job-name=lp-agent-{self._component}.{self._host}", "--kill-on-bad-exit=0",
                "--", sys.executable, "-m", "launchpad.launch", "--agent", self._spec_path]
        with open(self._log_path, "ab") as log:
            self._popen = subprocess.Popen(argv, env=environment(), stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=log,
                                           **own_process_group())
        self._reader = threading.Thread(target=self._read, daemon=True,
                                        name=f"lp-agent-{self._component}.{self._host}")
        self._reader.start()

    def _send(self, message: dict) -> None:
        """Writes to the agent (never under self._lock: the reader takes it, and an agent
        whose output is not read stops reading its input)."""
        try:
            with self._send_lock:
                self._popen.stdin.write((json.dumps(message) + "\n").encode())
                self._popen.stdin.flush()
        except (OSError, ValueError) as e:
            raise SlurmError(f"the host agent of {self.name} is gone ({e})") from e

    def _read(self) -> None:
        for line in self._popen.stdout:
            try:
                self._handle(json.loads(line))
            except Exception:  # noqa: BLE001 - a line srun added (its own errors)
                logging.warning("Host agent of %s said: %r", self.name, line[:200])
        self._agent_ended(self._popen.wait())

    def _handle(self, event: dict) -> None:
        kind = event["ev"]
        if kind == "out":
            with self._lock:
                entry = self._live.get(event["pid"])
            if entry is not None:
                with contextlib.suppress(OSError):
                    os.write(entry[1][event["fd"]], event["data"].encode("latin-1"))
        elif kind == "started":
            with self._lock:
                started, on_exit, stdio = self._starting.pop(event["id"])
                self._live[event["pid"]] = (on_exit, stdio)
            started.set_result(event["pid"])
        elif kind == "failed":
            with self._lock:
                started, _, stdio = self._starting.pop(event["id"])
            _close(stdio)
            started.set_exception(SlurmError(f"the host agent of {self.name} could not start "
                                             f"the node: {event['error']}"))
        elif kind == "pong":
            with self._lock:
                answered = self._pings.pop(event["id"], None)
            if answered is not None:
                answered.set()
        elif kind == "exited":
            with self._lock:
                on_exit, stdio = self._live.pop(event["pid"])
            _close(stdio)
            on_exit(event["code"])

    def _agent_ended(self, code: int) -> None:
        """The agent's step is over: whatever it ran has ended with it."""
        with self._lock:
            self._ended = self._ended or f"its step ended ({_described(code)})"
            starting, self._starting = self._starting, {}
            live, self._live = self._live, {}
        if live or starting:
            logging.warning("The host agent of %s ended (%s) with %d node(s) running: they "
                            "are reported killed", self.name, _described(code), len(live))
        for started, _, stdio in starting.values():
            _close(stdio)
            started.set_exception(SlurmError(f"the host agent of {self.name} has ended"))
        for on_exit, stdio in live.values():
            _close(stdio)
            on_exit(-signal.SIGKILL)

    @property
    def ended(self) -> bool:
        """Whether the agent is gone (its step ended, or it was abandoned)."""
        with self._lock:
            return bool(self._ended)

    def answers(self, timeout: float) -> bool:
        """Whether the agent answers a ping within `timeout` seconds (one not started yet
        does, as far as anyone knows; one that ended does not)."""
        with self._lock:
            if self._ended:
                return False
            if self._popen is None:
                return True
            request = self._next_request
            self._next_request += 1
            answered = self._pings[request] = threading.Event()
        try:
            self._send({"op": "ping", "id": request})
        except SlurmError:
            return False
        return answered.wait(timeout)

    def abandon(self, why: str) -> None:
        """Gives the agent up (its host does not answer): its step is killed here, and what
        it ran has ended with it (`_agent_ended`, once srun exits)."""
        with self._lock:
            self._ended = self._ended or why
            popen = self._popen
        if popen is not None:
            with contextlib.suppress(OSError):
                popen.kill()

    def signal_group(self, pid: int, sig: int) -> None:
        """Signals node process group `pid` on the agent's host (nothing if it is gone)."""
        with self._lock:
            if self._ended or self._popen is None or pid not in self._live:
                return
        with contextlib.suppress(SlurmError):
            self._send({"op": "signal", "pid": pid, "sig": int(sig)})

    def close(self) -> None:
        """Ends the agent (it kills what is left of its nodes) and waits for its step."""
        with self._lock:
            popen = self._popen
            self._ended = self._ended or "closed"
        if popen is None:
            return
        with contextlib.suppress(OSError, ValueError):
            popen.stdin.close()
        try:
            popen.wait(timeout=_CLOSE_TIMEOUT_SECS)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
        self._reader.join(_CLOSE_TIMEOUT_SECS)


def _close(stdio: Stdio) -> None:
    for fd in set(stdio):
        with contextlib.suppress(OSError):
            os.close(fd)


def _described(code: int) -> str:
    return f"srun exited {code}" if code >= 0 else f"srun killed by signal {-code}"
