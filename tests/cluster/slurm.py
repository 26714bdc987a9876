"""A real Slurm cluster (slurmctld, one slurmd per simulated host, munge), for tests.

Why: launching on Slurm is only shown to work by launching on Slurm. The daemons run as
children of the test process, with every file (munge key and socket, slurm.conf, state, spool,
logs) in `work_dir`, and clients find them through `SLURM_CONF`: nothing is written to
/etc/slurm and no system service is touched. slurmctld and munged run in the root namespace
(on the network's gateway address); node K's slurmd runs inside host K's network namespace
(netns.HostNetwork), so job steps on different nodes have different addresses and talk over
TCP through the bridge.

Each node claims `cpus_per_host` CPUs and `memory_mb_per_host` MB whatever the machine has
(`SlurmdParameters=config_overrides`), so a job that asks for a whole node's CPUs gets a host
of its own. Every daemon and client command runs below reaper.py, which reaps what they orphan
(each step's slurmstepd, srun's helper) and, should the test process die, ends what is below.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from tests.cluster.daemons import descendants, free_port, tail, under_reaper, wait_for
from tests.cluster.netns import HostNetwork, end_processes
from tests.processes import command_line, live_descendants, parent_of

BINARIES = ("munged", "slurmctld", "slurmd", "slurmstepd", "sbatch", "srun", "squeue",
            "scancel", "sinfo", "scontrol")
# Variables of an enclosing Slurm job (should the tests themselves run in one), which would
# point this cluster's clients at a job that is not theirs.
_FOREIGN_PREFIXES = ("SLURM_", "SBATCH_", "SALLOC_", "SRUN_")


def srun_clients() -> list[int]:
    """The srun clients among this process's descendants (not the helper each forks)."""
    return [pid for pid in live_descendants() if command_line(pid)[:1] == ["srun"]
            and command_line(parent_of(pid))[:1] != ["srun"]]


def missing_binaries() -> list[str]:
    """The Slurm and munge programs this cluster needs that are not installed."""
    found = {name: shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
             for name in BINARIES}
    return [name for name, path in found.items() if not path]


class SlurmCluster:
    """slurmctld + munged on `network`'s gateway, one slurmd per host of `network`.

    Args:
      work_dir: where every file of the cluster goes (made if missing; short paths are best:
        the munge socket's path must fit 107 bytes).
      network: the started hosts; node K (`nodeK`) runs on `network.hosts[K-1]`.
      cpus_per_host, memory_mb_per_host: what each node offers to jobs.
    """

    def __init__(self, work_dir: str, network: HostNetwork, cpus_per_host: int = 16,
                 memory_mb_per_host: int = 8000) -> None:
        if not network.hosts:
            raise ValueError("the network must be started and have hosts")
        self.work_dir = os.path.abspath(work_dir)
        self.network = network
        self.cpus_per_host = cpus_per_host
        self.memory_mb_per_host = memory_mb_per_host
        self.node_names = [f"node{k}" for k in range(1, len(network.hosts) + 1)]
        self.host_addresses = [host.address for host in network.hosts]
        self.conf_path = os.path.join(self.work_dir, "slurm.conf")
        self.munge_socket = os.path.join(self.work_dir, "munge", "munge.socket")
        if len(self.munge_socket.encode()) > 107:
            raise ValueError(f"work_dir is too long for a Unix socket path: {self.work_dir}")
        self.env: dict[str, str] = {"SLURM_CONF": self.conf_path}
        self._munged: subprocess.Popen | None = None
        self._slurmctld: subprocess.Popen | None = None
        self._slurmds: list[subprocess.Popen] = []
        self._started = False

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def environ(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """This process's environment, less any enclosing job's variables, plus `env`."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_PREFIXES)}
        return {**base, **self.env, **(extra or {})}

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run below reaper.py: Slurm's clients leave orphans too (srun forks a helper
        that outlives it), which would stay zombies of a test process that is a subreaper."""
        return under_reaper(argv)

    def run(self, argv: Sequence[str], *, timeout: float = 60, check: bool = True,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        """Runs a Slurm client command (`sbatch`, `srun`, ...) against this cluster, below
        reaper.py (see command()), and returns its exit status and output (text). Raises
        AssertionError with its output if `check` and it fails; past `timeout` s it is ended
        (SIGTERM, which srun passes on to its steps, then SIGKILL) and TimeoutExpired raised."""
        process = subprocess.Popen(self.command(argv), env=self.environ(env), text=True,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                end_processes(lambda: descendants(process.pid), grace=0)
                process.kill()
                process.communicate()
            raise
        result = subprocess.CompletedProcess(list(argv), process.returncode, stdout, stderr)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def start(self) -> SlurmCluster:
        """Writes the files, starts the daemons, and returns once every node is idle (within
        30 s, or it stops what it started and raises with the daemons' logs)."""
        if self._started:
            return self
        self._started = True
        try:
            self._write_files()
            self._munged = self._spawn("munged", [
                "munged", "--foreground", "--force", f"--socket={self.munge_socket}",
                f"--key-file={self._path('munge', 'munge.key')}",
                f"--pid-file={self._path('munge', 'munged.pid')}",
                f"--seed-file={self._path('munge', 'munged.seed')}",
                f"--log-file={self._path('log', 'munged.log')}"])
            self._wait_for(self._munge_ready, 10, "munged's socket")
            self._slurmctld = self._spawn("slurmctld", ["slurmctld", "-D", "-f",
                                                         self.conf_path])
            for name, host in zip(self.node_names, self.network.hosts, strict=True):
                argv = self.network.exec_argv(host, ["slurmd", "-D", "-N", name, "-f",
                                                     self.conf_path])
                self._slurmds.append(self._spawn(f"slurmd-{name}", argv))
            self._wait_for(self._all_idle, 30, "every node idle")
        except BaseException:
            with contextlib.suppress(RuntimeError, OSError, subprocess.SubprocessError):
                self.stop()  # the first error is the one to see
            raise
        return self

    def stop(self) -> None:
        """Cancels every job, ends every process inside the network's namespaces and the
        daemons (SIGTERM, a grace, SIGKILL), and returns once all are gone (idempotent). Every
        step is tried; the first error, if any, is raised at the end."""
        if not self._started:
            return
        errors: list[Exception] = []

        def attempt(step: Any, *args: Any) -> None:
            try:
                step(*args)
            except (RuntimeError, OSError, subprocess.SubprocessError) as error:
                errors.append(error)

        if self._slurmctld and self._slurmctld.poll() is None:
            attempt(self._cancel_all)
        attempt(end_processes, self.network.pids, 3.0)  # slurmd, slurmstepd, the steps
        for process in (self._slurmctld, self._munged):
            if process is not None:
                attempt(end_processes, lambda p=process: descendants(p.pid), 5.0)
        for process in (*self._slurmds, self._slurmctld, self._munged):
            if process is not None:
                try:  # its reaper ends once nothing is left below it
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired as error:
                    errors.append(error)
                    process.kill()
                    process.wait()
        self._slurmds, self._slurmctld, self._munged = [], None, None
        self._started = False
        if errors:
            raise errors[0]

    def _cancel_all(self) -> None:
        jobs = self.run(["squeue", "-h", "-o", "%A"], check=False, timeout=15).stdout.split()
        if jobs:
            self.run(["scancel", *jobs], check=False, timeout=15)

    def logs(self) -> str:
        """The last lines of every daemon's log and output (for error messages)."""
        names = sorted(os.listdir(self._path("log")))
        return "".join(f"--- {name}\n{tail(self._path('log', name))}" for name in names)

    def _spawn(self, label: str, argv: list[str]) -> subprocess.Popen:
        with open(self._path("log", f"{label}.out"), "ab") as out:
            return subprocess.Popen(self.command(argv), env=self.environ(),
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=self.work_dir)

    def _munge_ready(self) -> bool:
        if self._munged is not None and self._munged.poll() is not None:
            raise RuntimeError(f"munged exited ({self._munged.returncode})")
        return os.path.exists(self.munge_socket)

    def _all_idle(self) -> bool:
        for label, process in (("munged", self._munged), ("slurmctld", self._slurmctld),
                               *zip(self.node_names, self._slurmds, strict=False)):
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"{label} exited ({process.returncode})")
        result = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], check=False, timeout=10)
        states = dict(line.split() for line in result.stdout.splitlines() if line.strip())
        return all(states.get(name) == "idle" for name in self.node_names)

    def _wait_for(self, condition: Any, timeout: float, what: str) -> None:
        wait_for(condition, timeout, what, f"Slurm cluster in {self.work_dir}", self.logs)

    def _path(self, *parts: str) -> str:
        return os.path.join(self.work_dir, *parts)

    def _write_files(self) -> None:
        for folder in ("state", "spool"):  # a fresh cluster: no jobs from an earlier one
            shutil.rmtree(self._path(folder), ignore_errors=True)
        for folder in ("munge", "log", "state", "spool"):
            os.makedirs(self._path(folder), exist_ok=True)
        os.chmod(self._path("munge"), 0o700)
        key = self._path("munge", "munge.key")
        if not os.path.exists(key):
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(1024))
        with open(self._path("slurm.conf"), "w") as f:
            f.write(self._slurm_conf())
        with open(self._path("cgroup.conf"), "w") as f:
            # Loaded by slurmd even with the plugins below, never used; `ip netns exec` mounts
            # a fresh /sys with no cgroup filesystem, where automount would fail.
            f.write("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")

    def _slurm_conf(self) -> str:
        gateway = self.network.gateway
        lines = [
            "ClusterName=lptest",
            f"SlurmctldHost={socket.gethostname()}({gateway})",
            f"SlurmctldPort={free_port(gateway)}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # Credentials last 20 s, not 120: a requeued job waits as long before it may
            # start again (its BeginTime), so the requeue tests need not wait 2 minutes.
            f"AuthInfo=socket={self.munge_socket},cred_expire=20",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={self._path('state')}",
            f"SlurmdSpoolDir={self._path('spool', '%n')}",
            f"SlurmctldPidFile={self._path('state', 'slurmctld.pid')}",
            f"SlurmdPidFile={self._path('spool', 'slurmd-%n.pid')}",
            f"SlurmctldLogFile={self._path('log', 'slurmctld.log')}",
            f"SlurmdLogFile={self._path('log', 'slurmd-%n.log')}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # What a step started is the step's, as under proctrack/cgroup (which needs a
            # cgroup filesystem the namespaces lack): its process group keeps a process that
            # lost its parent, where linuxproc (by parentage) would let it escape the step.
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            f"DefMemPerCPU={max(1, self.memory_mb_per_host // self.cpus_per_host)}",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=bf_interval=1",
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            # Fast, for tests: a dead node is noticed, a cancelled step killed, a finished job
            # gone from squeue within seconds.
            "SlurmctldTimeout=10",
            "SlurmdTimeout=10",
            "MessageTimeout=5",
            "KillWait=3",
            "InactiveLimit=0",
            "MinJobAge=2",
            "WaitTime=0",
        ]
        nodes = zip(self.node_names, self.host_addresses, strict=True)
        for k, (name, address) in enumerate(nodes, 1):
            lines.append(f"NodeName={name} NodeHostname={socket.gethostname()} "
                         f"NodeAddr={address} Port={17000 + k} CPUs={self.cpus_per_host} "
                         f"RealMemory={self.memory_mb_per_host} State=UNKNOWN")
        lines.append("PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        return "\n".join(lines) + "\n"
