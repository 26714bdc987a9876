"""The Slurm cluster fixture: nodes are distinct hosts, steps talk across them, heterogeneous
jobs run, and stopping leaves nothing behind.

What a heterogeneous job's tasks are told (Slurm 22.05; asserted by test_het_job_env_names):
  - srun itself gives a step's tasks, per component i, only the legacy names
    `SLURM_JOB_ID_PACK_GROUP_i`, `SLURM_JOB_NODELIST_PACK_GROUP_i`,
    `SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_i` and `SLURM_JOB_PARTITION_PACK_GROUP_i`, plus
    `SLURM_HET_SIZE` and `SLURM_PACK_SIZE`: a het job made by `srun A : B` (no sbatch) has no
    `_HET_GROUP_i` variable at all.
  - sbatch gives the batch script the full set under both names, `..._HET_GROUP_i` and
    `..._PACK_GROUP_i` (same values; also `SLURM_NTASKS_`, `SLURM_JOB_NUM_NODES_`,
    `SLURM_TASKS_PER_NODE_`, `SLURM_CPUS_PER_TASK_`, `SLURM_MEM_PER_CPU_`, ...), and its steps
    inherit them: a step of component 1 alone (`srun --het-group=1`) still sees every
    component's variables.
  - No variable names a task's own component. `SLURM_PROCID` is global over a step (components
    in order) but counts from 0 in a step of one component, so it tells the component only in
    a step spanning all of them; what holds in every case is the component whose node list
    (read both names) holds `SLURMD_NODENAME` (when components do not share a node).
    `SLURM_JOB_ID` is the leader's id in every task; `SLURM_JOB_NODELIST` and
    `SLURM_STEP_NODELIST` are the step's components' nodes.
  - Hosts are told apart by address (`hostname -I`): the hostname is the same on every host.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import time

import pytest

from tests.cluster.fixtures import cluster_unavailable
from tests.cluster.netns import HostNetwork
from tests.cluster.slurm import SlurmCluster

# A task that says where it runs: its first address, and the Slurm variables it was given, in
# a file of its own (several tasks' long lines would interleave in one output file).
PROBE = """
import json, os, subprocess, sys
address = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()[0]
env = {k: v for k, v in os.environ.items() if k.startswith("SLURM")}
with open(f"{sys.argv[1]}.{env['SLURM_PROCID']}.json", "w") as f:
    json.dump({"address": address, "env": env}, f)
"""
SERVER = """
import socket
server = socket.create_server(("", 0))
server.settimeout(60)
print(server.getsockname()[1], flush=True)
connection, peer = server.accept()
connection.sendall(connection.recv(100) + f" from {peer[0]}".encode())
"""
CLIENT = """
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30) as connection:
    connection.sendall(b"ping")
    print(connection.recv(100).decode(), flush=True)
"""


def _read_line(process: subprocess.Popen, timeout: float) -> str:
    """The next line `process` prints, waited for up to `timeout` s."""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise AssertionError(f"no output within {timeout} s")
    return process.stdout.readline()


def _hostnames(cluster: SlurmCluster, nodelist: str) -> list[str]:
    return cluster.run(["scontrol", "show", "hostnames", nodelist]).stdout.split()


def _wait_running(cluster: SlurmCluster, job: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    # Polls: nothing tells this process when a job has started.
    while cluster.run(["squeue", "-h", "-j", job, "-o", "%T"]).stdout.strip() != "RUNNING":
        assert time.monotonic() < deadline, f"job {job} did not start within {timeout} s"
        time.sleep(0.1)


def _probes(prefix: str) -> list[dict]:
    """What the tasks that ran PROBE with `prefix` wrote, by rank."""
    folder, tag = os.path.split(prefix)
    names = sorted(n for n in os.listdir(folder) if re.fullmatch(rf"{tag}\.\d+\.json", n))
    probes = []
    for name in names:
        with open(os.path.join(folder, name)) as f:
            probes.append(json.load(f))
    return probes


def test_nodes_are_distinct_hosts(slurm_cluster: SlurmCluster, no_leaked_processes) -> None:
    result = slurm_cluster.run(["srun", "-N3", "--ntasks-per-node=1", "hostname", "-I"])
    addresses = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    assert sorted(addresses) == sorted(slurm_cluster.host_addresses)
    assert len(set(addresses)) == 3


def test_memory_is_scheduled_and_jobs_share_a_node(slurm_cluster: SlurmCluster,
                                                   no_leaked_processes) -> None:
    """CR_Core_Memory: a job may not ask for more than a node's RealMemory, and a job that
    asks for nothing gets DefMemPerCPU, not the whole node, so a second job fits beside it."""
    too_much = slurm_cluster.run(["srun", f"--mem={slurm_cluster.memory_mb_per_host + 1}",
                                  "true"], check=False, timeout=30)
    assert too_much.returncode != 0
    assert "not available" in too_much.stderr
    node = slurm_cluster.node_names[0]
    holder = slurm_cluster.run(["sbatch", "--parsable", "-w", node, "-n1", "-o", "/dev/null",
                                "--wrap", "sleep 300"]).stdout.strip()
    try:
        _wait_running(slurm_cluster, holder)
        # srun waits until its job starts: it ends only if it fits beside the first.
        beside = slurm_cluster.run(["srun", "-w", node, "-n1", "--immediate=20", "squeue", "-h",
                                    "-w", node, "-t", "R", "-o", "%A"], timeout=60)
        assert holder in beside.stdout.split()
    finally:
        slurm_cluster.run(["scancel", holder], timeout=30)


def test_tcp_between_steps_on_two_hosts(slurm_cluster: SlurmCluster,
                                        no_leaked_processes) -> None:
    node1, node2 = slurm_cluster.node_names[:2]
    address1, address2 = slurm_cluster.host_addresses[:2]
    server = subprocess.Popen(
        slurm_cluster.command(["srun", "-N1", "-n1", "-w", node1, sys.executable, "-u", "-c",
                               SERVER]),
        env=slurm_cluster.environ(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(_read_line(server, 30))
        client = slurm_cluster.run(["srun", "-N1", "-n1", "-w", node2, sys.executable, "-c",
                                    CLIENT, address1, str(port)], timeout=60)
        assert client.stdout.strip() == f"ping from {address2}"
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.terminate()  # passed on to srun, which passes it on to the step
            server.wait(timeout=30)
        server.stdout.close()
        server.stderr.close()


def _het_job(cluster: SlurmCluster, folder: str) -> tuple[list[dict], list[dict]]:
    """Runs a 2-component job (1 whole node, then 2): a step across both, then one of
    component 1 alone. Returns the tasks' probes of each step."""
    probe = os.path.join(folder, "probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)
    script = os.path.join(folder, "het.sh")
    with open(script, "w") as f:
        f.write(f"""#!/bin/bash
#SBATCH -N1 -n1 -c{cluster.cpus_per_host} -o {folder}/het.out
#SBATCH hetjob
#SBATCH -N2 -n2 -c{cluster.cpus_per_host}
srun --het-group=0,1 {sys.executable} {probe} {folder}/both
srun --het-group=1 {sys.executable} {probe} {folder}/one
""")
    cluster.run(["sbatch", "--wait", script], timeout=90)
    return _probes(os.path.join(folder, "both")), _probes(os.path.join(folder, "one"))


def test_het_job_components_on_different_hosts(slurm_cluster: SlurmCluster, tmp_path,
                                               no_leaked_processes) -> None:
    both, one = _het_job(slurm_cluster, str(tmp_path))
    assert sorted(p["address"] for p in both) == sorted(slurm_cluster.host_addresses)
    groups = [_hostnames(slurm_cluster, both[0]["env"][f"SLURM_JOB_NODELIST_HET_GROUP_{i}"])
              for i in (0, 1)]
    assert len(groups[0]) == 1 and len(groups[1]) == 2
    assert not set(groups[0]) & set(groups[1])
    assert len(one) == 2 and {p["address"] for p in one} < set(slurm_cluster.host_addresses)


def _nodelist(env: dict, group: int) -> str:
    """Component `group`'s node list, under whichever name the task was given."""
    return env.get(f"SLURM_JOB_NODELIST_HET_GROUP_{group}",
                   env.get(f"SLURM_JOB_NODELIST_PACK_GROUP_{group}", ""))


def _component(cluster: SlurmCluster, env: dict) -> int:
    """The component whose nodes hold the task's node."""
    found = [i for i in range(int(env["SLURM_HET_SIZE"]))
             if env["SLURMD_NODENAME"] in _hostnames(cluster, _nodelist(env, i))]
    assert len(found) == 1, found
    return found[0]


def test_het_job_env_names(slurm_cluster: SlurmCluster, tmp_path, no_leaked_processes) -> None:
    address_of = dict(zip(slurm_cluster.node_names, slurm_cluster.host_addresses, strict=True))
    both, one = _het_job(slurm_cluster, str(tmp_path))
    assert len(both) == 3 and len(one) == 2
    for rank, task in enumerate(both):  # a step across both components, under sbatch
        env = task["env"]
        assert env["SLURM_HET_SIZE"] == env["SLURM_PACK_SIZE"] == "2"
        for name in ("JOB_NODELIST", "NTASKS", "JOB_ID", "JOB_NUM_NODES"):
            for i in (0, 1):
                assert env[f"SLURM_{name}_HET_GROUP_{i}"] == env[f"SLURM_{name}_PACK_GROUP_{i}"]
        assert int(env["SLURM_PROCID"]) == rank
        by_rank = 0 if rank < int(env["SLURM_NTASKS_HET_GROUP_0"]) else 1
        assert _component(slurm_cluster, env) == by_rank
        assert address_of[env["SLURMD_NODENAME"]] == task["address"]
    assert len({task["env"]["SLURM_JOB_ID"] for task in both + one}) == 1
    for rank, task in enumerate(one):  # a step of component 1 alone, under sbatch
        env = task["env"]
        assert int(env["SLURM_PROCID"]) == rank  # from 0: not the rank in the job
        assert env["SLURM_JOB_NODELIST"] == env["SLURM_JOB_NODELIST_HET_GROUP_1"]
        assert all(env[k] == v for k, v in both[0]["env"].items() if "_GROUP_" in k)
        assert _component(slurm_cluster, env) == 1

    # A het job made by srun alone: the legacy names only, and fewer of them.
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    task = [sys.executable, str(probe), str(tmp_path / "srun")]
    cpus = f"-c{slurm_cluster.cpus_per_host}"
    slurm_cluster.run(["srun", "-n1", cpus, *task, ":", "-n2", cpus, *task], timeout=90)
    tasks = _probes(str(tmp_path / "srun"))
    assert len(tasks) == 3
    for rank, task in enumerate(tasks):
        env = task["env"]
        assert not [name for name in env if "_HET_GROUP_" in name]
        assert {name for name in env if "_PACK_GROUP_0" in name} == {
            f"SLURM_JOB_{name}_PACK_GROUP_0" for name in
            ("ID", "NODELIST", "CPUS_PER_NODE", "PARTITION")}
        assert env["SLURM_HET_SIZE"] == "2"
        assert _component(slurm_cluster, env) == (0 if rank == 0 else 1)
        assert address_of[env["SLURMD_NODENAME"]] == task["address"]


def test_step_start_up_time(slurm_cluster: SlurmCluster, tmp_path,
                            no_leaked_processes) -> None:
    """`srun -N3 true` inside an idle 3-node allocation: Slurm's own cost of starting a step."""
    out = tmp_path / "steps.out"
    script = ("for i in 1 2 3 4 5; do s=$(date +%s%N); srun -N3 true || exit 1; "
              "echo step $(( ($(date +%s%N) - s) / 1000000 )); done")
    slurm_cluster.run(["sbatch", "--wait", "-N3", "-o", str(out), "--wrap", script],
                      timeout=90)
    millis = [int(line.split()[1]) for line in out.read_text().splitlines()
              if line.startswith("step ")]
    assert len(millis) == 5
    print(f"srun -N3 true in an idle allocation: {sorted(millis)} ms")
    assert max(millis) < 10_000


needs_cluster = pytest.mark.skipif(cluster_unavailable() is not None,
                                   reason=str(cluster_unavailable()))


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


@needs_cluster
def test_stop_leaves_no_process(tmp_path, no_leaked_processes) -> None:
    """A cluster of its own with a running job: stop() ends every process (the steps too:
    slurmd's SIGTERM leaves them running) and the network's stop() every trace of it."""
    with HostNetwork(2) as network:
        started = time.monotonic()
        cluster = SlurmCluster(str(tmp_path / "c"), network).start()
        up = time.monotonic() - started
        try:
            cluster.run(["sbatch", "-N2", "-o", "/dev/null", "--wrap", "srun sleep 600"])
            deadline = time.monotonic() + 30
            # Polls: nothing tells this process when the steps have started.
            while sorted(_comm(p) for p in network.pids()).count("sleep") < 2:
                assert time.monotonic() < deadline, "the job's steps never started"
                time.sleep(0.1)
        finally:
            started = time.monotonic()
            cluster.stop()
            down = time.monotonic() - started
        print(f"2-host cluster: up {up:.2f} s, down (with a running job) {down:.2f} s")
        assert network.pids() == []
        cluster.stop()  # idempotent
        names = [host.name for host in network.hosts]
        bridge = network.bridge
    for name in names:
        assert not os.path.exists(f"/run/netns/{name}")
        assert not os.path.exists(f"/etc/netns/{name}")
    assert not os.path.exists(f"/sys/class/net/{bridge}")


@needs_cluster
def test_host_network_partial_start_is_undone(monkeypatch) -> None:
    network = HostNetwork(3)
    calls = []

    def fail_on_second(self, host):
        calls.append(host)
        if len(calls) == 2:
            raise OSError("made to fail")
        return real(self, host)

    real = HostNetwork._add_host
    monkeypatch.setattr(HostNetwork, "_add_host", fail_on_second)
    with open("/proc/sys/net/ipv4/ip_forward") as f:
        forward = f.read()
    with pytest.raises(OSError, match="made to fail"):
        network.start()
    first = calls[0]
    assert not os.path.exists(f"/run/netns/{first.name}")
    assert not os.path.exists(f"/etc/netns/{first.name}")
    assert not os.path.exists(f"/sys/class/net/{network.bridge}")
    assert not os.path.exists(f"/sys/class/net/{first.veth}")
    network.stop()  # idempotent
    with open("/proc/sys/net/ipv4/ip_forward") as f:
        assert f.read() == forward


@needs_cluster
def test_host_network_layout() -> None:
    with HostNetwork(2) as network:
        assert all(len(name) <= 15 for name in (network.bridge, *(h.veth for h in
                                                                  network.hosts)))
        a, b = network.hosts
        assert network.gateway.rsplit(".", 1)[0] == a.address.rsplit(".", 1)[0]
        with open(f"/etc/netns/{a.name}/resolv.conf") as f:
            assert f.read().split() == ["nameserver", "127.0.0.1"]
        # Names resolve at once inside (the hosts file; no hanging resolver).
        result = subprocess.run(network.exec_argv(a, ["getent", "hosts", b.name]),
                                capture_output=True, text=True, timeout=5)
        assert result.stdout.split()[0] == b.address
        route = subprocess.run(network.exec_argv(a, ["ip", "route", "show", "default"]),
                               capture_output=True, text=True, timeout=5).stdout
        assert f"via {network.gateway}" in route
