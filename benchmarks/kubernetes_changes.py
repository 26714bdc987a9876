"""Benchmark: a Kubernetes program changed while it runs, through the API, against launching
it afresh; and what a question to its controller costs, against one API call.

Run (as root): `python -m benchmarks.kubernetes_changes [--sizes 4,8] [--repeats 3]`. Prints
one JSON object on stdout (its last line); progress goes to stderr. No control plane runs
here, so it uses what the tests use (tests/launch/kubernetes): the in-memory API over HTTPS,
and each Job's pod a process on a simulated host of its own (a network namespace); the
launch goes through the official client as on a real cluster, and the controller's pod
makes the new nodes' objects through the API as its ServiceAccount. What it measures is
launchpad's share (the API calls, the watch, the pods' Python start) on this machine, not a
cluster's scheduling or image pulls.

For each size N, program_change.py's program (`worker`s, and a `learner` following their
group):

* `fresh_launch_secs` (the baseline): `lp.launch` of the program with N workers until its
  status (asked through the API) shows every node running;
* `grow_secs`: `controller.scale("worker", N)` from 1 until the status shows N running;
* `shrink_secs`: `scale("worker", 1)` back (it returns once the removed ones have ended);
* `question_secs`: one `controller.status()`, a question relayed through the API (a sealed
  ConfigMap asked, watched for, answered); `api_call_secs`, its baseline: one API call of
  the same client (a ConfigMap listed). Medians of 20.

`grow_vs_fresh` is the ratio to the fresh launch; `question_vs_api_call` what a relayed
question costs in API calls' time.

Once (the program with one worker, its group restarting it):

* `lost_pod_secs`: the worker's pod frozen (SIGSTOP: silent, not ended, as on a lost host)
  until the status shows the worker running again, restarted on new objects by the
  controller's pod (most of it is the liveness timeout, `liveness_timeout_secs=5`, against
  heartbeats every 2 s); `rerun_secs`, from the moment the controller declared it lost (its
  failure's time) until it shows running again: what the restart itself costs; and
  `grow_one_secs`, its baseline, a growth of the group by one worker. (Kubernetes alone runs
  no new pod before it evicts the lost one: 300 s by default.)
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time

import launchpad as lp
from benchmarks.program_change import make_program  # the same program
from launchpad.launch.kubernetes.api import Api

_TIMEOUT = 180.0
_LIVENESS_SECS = 5.0
_QUESTIONS = 20
_NAMESPACE = "lp-bench"


def _launch(workers: int, restart: lp.RestartPolicy | None = None):
    settings = lp.KubernetesSettings(image="launchpad:bench", namespace=_NAMESPACE,
                                     allow_changes=True, startup_timeout_secs=_TIMEOUT)
    return lp.launch(make_program(workers, restart=restart), launch_type="kubernetes",
                     kubernetes=settings, termination_notice_secs=2,
                     liveness_timeout_secs=_LIVENESS_SECS)


def _until_running(controller, workers: int, what: str, restarts: int = 0) -> None:
    """Until the status shows `workers` workers and the learner running (and worker/0
    restarted `restarts` times)."""
    deadline = time.monotonic() + _TIMEOUT
    while True:
        status = controller.status()
        if status is not None:
            running = [n.name for n in status.nodes if n.state == "running"]
            restarted = [n.restarts for n in status.nodes if n.name == "worker/0"]
            if len(running) == workers + 1 and restarted == [restarts]:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {_TIMEOUT:g}s: {what}")
        time.sleep(0.05)  # polls the program's answer: there is no event to wait on here


def _ended(controller) -> None:
    controller.stop()
    controller.wait(timeout=_TIMEOUT)


def _measure(size: int) -> dict[str, float]:
    started = time.perf_counter()
    controller = _launch(size)
    try:
        _until_running(controller, size, "fresh workers")
        fresh = time.perf_counter() - started
    finally:
        _ended(controller)
    controller = _launch(1)
    try:
        _until_running(controller, 1, "the first worker")
        started = time.perf_counter()
        controller.scale("worker", size)
        _until_running(controller, size, "grown workers")
        grow = time.perf_counter() - started
        started = time.perf_counter()
        controller.scale("worker", 1)
        shrink = time.perf_counter() - started
        question = _median_secs(controller.status)
        api = Api.connect()  # a client as the launching side's, from the same kubeconfig
        api_call = _median_secs(lambda: api.core.list_namespaced_config_map(
            _NAMESPACE, field_selector="metadata.name=absent"))
    finally:
        _ended(controller)
    return {"fresh_launch_secs": fresh, "grow_secs": grow, "shrink_secs": shrink,
            "question_secs": question, "api_call_secs": api_call}


def _measure_lost_pod(kubelet) -> dict[str, float]:
    controller = _launch(1, restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.0))
    try:
        _until_running(controller, 1, "the first worker")
        started = time.perf_counter()
        controller.scale("worker", 2)
        _until_running(controller, 2, "the second worker")
        grow_one = time.perf_counter() - started
        controller.scale("worker", 1)
        started = time.perf_counter()
        os.kill(kubelet.job(f"{controller.run_id}-worker-0").pids[-1], signal.SIGSTOP)
        _until_running(controller, 1, "the lost worker, again", restarts=1)
        lost, running_at = time.perf_counter() - started, time.time()
        (worker,) = [n for n in controller.status().nodes if n.name == "worker/0"]
        declared_lost_at = worker.failures[-1].at
    finally:
        _ended(controller)
    return {"lost_pod_secs": lost, "rerun_secs": running_at - declared_lost_at,
            "grow_one_secs": grow_one}


def _median_secs(call) -> float:
    times = []
    for _ in range(_QUESTIONS):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


@contextlib.contextmanager
def _cluster(hosts: int, folder: str):
    """The tests' cluster: hosts, the API over HTTPS on their bridge, a kubeconfig for it,
    and the hosts running its pods."""
    from tests.cluster.netns import HostNetwork  # root only: imported when measured
    from tests.launch.kubernetes.fake_api import FakeKubernetesApi
    from tests.launch.kubernetes.kubelet import Kubelet

    with HostNetwork(hosts) as network, FakeKubernetesApi(network.gateway, https=True) as api:
        config = os.path.join(folder, "kubeconfig")
        authority = base64.b64encode(api.ca_pem).decode()
        with open(config, "w") as f:
            f.write(json.dumps({
                "apiVersion": "v1", "kind": "Config", "current-context": "bench",
                "clusters": [{"name": "bench", "cluster": {
                    "server": api.url, "certificate-authority-data": authority}}],
                "users": [{"name": "me", "user": {"token": "the-users-own"}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench",
                                                          "user": "me"}}]}))
        os.environ["KUBECONFIG"] = config
        with Kubelet(api, network, os.path.join(folder, "pods"), _TIMEOUT * 10) as kubelet:
            yield kubelet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,8")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="lp-k8s-change-") as folder:
        # Each pod has a host of its own while it runs (N + 2 at most), and a launch's may
        # still end while the next one's start.
        with _cluster(2 * (max(sizes) + 3), folder) as kubelet:
            for size in sizes:
                runs = []
                for repeat in range(args.repeats):
                    print(f"kubernetes_changes: {size} workers, run {repeat + 1}",
                          file=sys.stderr, flush=True)
                    runs.append(_measure(size))
                row = {key: round(statistics.median(r[key] for r in runs), 4)
                       for key in runs[0]}
                row["grow_vs_fresh"] = round(row["grow_secs"] / row["fresh_launch_secs"], 2)
                row["question_vs_api_call"] = round(row["question_secs"]
                                                    / row["api_call_secs"], 1)
                rows.append({"workers": size, **row})
            print("kubernetes_changes: a lost pod", file=sys.stderr, flush=True)
            lost = {key: round(value, 4) for key, value in _measure_lost_pod(kubelet).items()}
            lost["rerun_vs_grow_one"] = round(lost["rerun_secs"] / lost["grow_one_secs"], 2)
    print(json.dumps({"benchmark": "kubernetes_changes", "repeats": args.repeats,
                      "machine": platform.machine(), "cpus": os.cpu_count(),
                      "results": rows, "lost_pod": lost}))


if __name__ == "__main__":
    main()
