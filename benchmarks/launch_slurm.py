"""Benchmark: programs of CourierNodes under launch_type="slurm", beside Slurm's own start-up.

Run as root: `python -m benchmarks.launch_slurm [--sizes 10,50,300] [--rounds N]`. It starts
its own Slurm of 3 hosts of 128 CPUs each (network namespaces, tests/cluster) and stops it at
the end. Prints one JSON object on stdout; progress goes to stderr.

For each size, in the same run and on the same cluster:

* `slurm_true_s`: Slurm's own share - `sbatch` of a job of that many tasks until it runs, then
  one `srun --exact -n1 true` step per task, all started at once, until every one has ended;
* `slurm_python_s`: the same with each step running `python -c "import launchpad"` (what the
  interpreter and the core's imports cost on every node, before any of our code runs);
* `ready_s`: from `lp.launch` until every node has answered a ping from the launching process;
* `stop_s`: from `controller.stop()` until `wait()` returns and the job is gone from squeue;
* `overhead_s`: `ready_s - slurm_python_s`, the framework's own share of the start-up;
* `sruns`, `srun_rss_mb`: the srun clients on the launching host once every node answered
  (one per host: the hosts' agents; srun's own helper processes not counted), and their RSS;
* `local_mp_ready_s`: the same program under local_mp on this host, in the same run, and
  `ready_vs_local_mp`, the ratio (target: at most 2 at 300 nodes).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import launchpad as lp
from tests.cluster.netns import HostNetwork
from tests.cluster.slurm import SlurmCluster, srun_clients


class Pong:
    def ping(self) -> str:
        return "pong"


def _job_running(job: str) -> None:
    while True:  # Slurm has no event for a job's start: its state is read, as srun does
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                               text=True, check=True).stdout.split()
        if state == ["RUNNING"]:
            return
        time.sleep(0.05)


def _slurm_alone(size: int, step: list[str]) -> float:
    """sbatch of `size` tasks, then `size` steps of `step` at once: seconds until all ended."""
    started = time.perf_counter()
    job = subprocess.run(["sbatch", "--parsable", f"--ntasks={size}", "--output=/dev/null",
                          "--wrap", "exec sleep infinity"], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        _job_running(job)
        argv = ["srun", f"--jobid={job}", "--exact", "--nodes=1", "--ntasks=1", *step]
        with concurrent.futures.ThreadPoolExecutor(size) as pool:
            codes = list(pool.map(lambda _: subprocess.run(argv).returncode, range(size)))
        assert codes == [0] * size, codes
        return time.perf_counter() - started
    finally:
        subprocess.run(["scancel", job], check=True)


def _gone(name: str) -> bool:
    return not subprocess.run(["squeue", "-h", "-n", f"lp-{name}", "-o", "%i"],
                              capture_output=True, text=True, check=True).stdout.split()


def _launch(size: int, run_dir: str) -> dict:
    name = f"bench-slurm-{size}"
    program = lp.Program(name)
    with program.group("pong"):
        handles = [program.add_node(lp.CourierNode(Pong)) for _ in range(size)]
    started = time.perf_counter()
    controller = lp.launch(program, launch_type="slurm", termination_notice_secs=10,
                           slurm=lp.SlurmSettings(run_dir=run_dir),
                           terminal="output_to_files")
    clients = [h.dereference() for h in handles]
    futures = [c.futures.ping() for c in clients]
    assert all(f.result(timeout=300) == "pong" for f in futures)
    ready = time.perf_counter() - started
    hosts = len(set(controller.hosts().values()))
    sruns = srun_clients()
    srun_rss_mb = sum(_rss_mb(pid) for pid in sruns)
    for client in clients:
        lp.courier.close(client)
    stopping = time.perf_counter()
    controller.stop()
    assert controller.wait(timeout=120)
    assert _gone(name), "wait() returned before the job was gone"
    return {"ready_s": ready, "stop_s": time.perf_counter() - stopping, "hosts": hosts,
            "sruns": len(sruns), "srun_rss_mb": srun_rss_mb}


def _local_mp(size: int) -> float:
    """Seconds until `size` CourierNodes under local_mp all answered a ping (the baseline)."""
    program = lp.Program(f"bench-local-{size}")
    with program.group("pong"):
        handles = [program.add_node(lp.CourierNode(Pong)) for _ in range(size)]
    started = time.perf_counter()
    controller = lp.launch(program, launch_type="local_mp", terminal="output_to_files")
    clients = [h.dereference() for h in handles]
    assert all(f.result(timeout=300) == "pong" for f in [c.futures.ping() for c in clients])
    ready = time.perf_counter() - started
    for client in clients:
        lp.courier.close(client)
    controller.stop()
    assert controller.wait(timeout=120)
    return ready


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,50,300")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    python_step = [sys.executable, "-c", "import launchpad"]
    report: dict = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                "slurm_hosts": 3}, "results": {}}
    with tempfile.TemporaryDirectory(prefix="lpbench", dir="/tmp") as work, \
            HostNetwork(3) as network, \
            SlurmCluster(work, network, cpus_per_host=128) as cluster:
        os.environ.update(cluster.env)
        for size in (int(s) for s in args.sizes.split(",")):
            runs = []
            for _ in range(args.rounds):
                print(f"slurm x{size} ...", file=sys.stderr, flush=True)
                run = {"slurm_true_s": _slurm_alone(size, ["true"]),
                       "slurm_python_s": _slurm_alone(size, python_step),
                       **_launch(size, work)}
                run["overhead_s"] = run["ready_s"] - run["slurm_python_s"]
                run["local_mp_ready_s"] = _local_mp(size)
                run["ready_vs_local_mp"] = run["ready_s"] / run["local_mp_ready_s"]
                runs.append(run)
            report["results"][str(size)] = {
                key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
