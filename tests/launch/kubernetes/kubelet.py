"""A cluster's nodes for the fake API (fake_api.py): every Job made there - by the launching
side, or later by the program's controller - runs its pod here, as pods.py runs a launch's.

No control plane can run on this machine; this plays the parts of one that a launch meets:

- the Job controller and the kubelet: a Job added gets a host of its own (a network
  namespace of `network`, free again once the Job is done) and its pod runs there
  (pods.run_pod: the container's command and env, its Secret and ConfigMap volumes as they
  are in the API when the pod starts); a pod that fails runs again while the backoffLimit
  allows; the Job's status follows (`failed`, then the condition Complete or Failed), and
  each pod ended is a Pod object with its log;
- a Job deleted has its pod sent SIGTERM, then SIGKILL after its grace period;
- the kubelet's service-account mount: a pod that runs as a ServiceAccount (automount not
  off) gets `token` (minted by the API for that account), `ca.crt` and `namespace` at
  /var/run/secrets/kubernetes.io/serviceaccount and KUBERNETES_SERVICE_HOST/PORT, so its
  in-cluster configuration reaches the API (over HTTPS, as that account);
- the cluster's DNS: each Service's `<name>.<namespace>.svc` resolves, in every host's hosts
  file, to the host of the pod it selects, once that pod has one.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from typing import Any

from tests.cluster.netns import HostNetwork
from tests.launch.kubernetes import pods
from tests.launch.kubernetes.fake_api import FakeKubernetesApi

ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class Kubelet:
    """Runs the pods of the Jobs of `api` on the hosts of `network` (see the module doc),
    each pod within `timeout` seconds; use as a context manager (leaving it kills what still
    runs). `jobs`: each Job's runs, by name."""

    def __init__(self, api: FakeKubernetesApi, network: HostNetwork, folder: str,
                 timeout: float = 180.0):
        self._api = api
        self._network = network
        self._folder = folder
        self._timeout = timeout
        self._events: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._placed = threading.Condition(self._lock)  # a Job's pod got a host
        self._free = list(network.hosts)
        self._services: dict[str, dict[str, Any]] = {}
        self._templates: dict[str, dict[str, str]] = {}  # Job -> its pod's labels
        self._deleted: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._timers: list[threading.Timer] = []
        self._made_parents: list[str] = []
        self.jobs: dict[str, pods.JobRun] = {}
        self._dispatcher = threading.Thread(target=self._dispatch, name="lp-test-kubelet")

    def __enter__(self) -> Kubelet:
        self._made_parents = pods.make_mount_parents(
            [], ("/var/run/launchpad/secret", f"{ACCOUNT_MOUNT}/token"))
        self._api.listeners.append(lambda kind, plural, obj: self._events.put(
            (kind, plural, obj)))
        self._dispatcher.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._events.put(None)
        self._dispatcher.join()
        for timer in self._timers:
            timer.cancel()
        with self._lock:
            running = [job.processes[-1] for job in self.jobs.values() if job.processes]
        for process in running:
            process.kill()  # (Popen: nothing if it has ended and been waited for)
        for thread in self._threads:
            thread.join()
        pods.remove_mount_parents(self._made_parents)

    def job(self, suffix: str, timeout: float = 30.0) -> pods.JobRun:
        """The Job whose name ends with `suffix` (one), once its pod has a host (waiting up
        to `timeout` seconds for it)."""
        def found() -> list[pods.JobRun]:
            return [job for name, job in self.jobs.items() if name.endswith(suffix)]

        with self._placed:
            assert self._placed.wait_for(found, timeout), f"no Job *{suffix} after {timeout}s"
            (job,) = found()
        return job

    def logs(self) -> str:
        with self._lock:
            return "\n".join(f"--- {name}:\n{job.log}" for name, job in self.jobs.items())

    def _dispatch(self) -> None:
        while (event := self._events.get()) is not None:
            kind, plural, obj = event
            name = obj["metadata"]["name"]
            if plural == "jobs" and kind == "ADDED":
                thread = threading.Thread(target=self._run_job, args=(obj,),
                                          name=f"lp-test-job-{name}")
                self._threads.append(thread)
                thread.start()
            elif plural == "jobs" and kind == "DELETED":
                self._delete_job(obj)
            elif plural == "services" and kind == "ADDED":
                with self._lock:
                    self._services[name] = obj
                self._resolve()

    def _resolve(self) -> None:
        """Adds to every host's hosts file the Services whose pod has a host now."""
        lines = []
        with self._lock:
            for name, service in list(self._services.items()):
                selector = service["spec"]["selector"].items()
                chosen = [job for job, labels in self._templates.items()
                          if selector <= labels.items() and job in self.jobs]
                if chosen:
                    del self._services[name]
                    lines.append(f"{self.jobs[chosen[0]].host.address} {name}."
                                 f"{service['metadata']['namespace']}.svc")
        if lines:
            for host in self._network.hosts:
                with open(f"/etc/netns/{host.name}/hosts", "a") as f:
                    f.write("\n".join(lines) + "\n")

    def _run_job(self, job: dict[str, Any]) -> None:
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        with self._lock:
            assert self._free, f"no host left for Job {name}"
            record = pods.JobRun(name, self._free.pop(0))
            self.jobs[name] = record
            self._templates[name] = job["spec"]["template"]["metadata"]["labels"]
            self._placed.notify_all()
        self._resolve()
        try:
            self._run_pods(job, record, namespace)
        finally:
            with self._lock:
                self._free.append(record.host)

    def _run_pods(self, job: dict[str, Any], record: pods.JobRun, namespace: str) -> None:
        """Runs the Job's pod, again while it fails and its backoffLimit allows."""
        name = record.name
        pod = job["spec"]["template"]["spec"]
        for attempt in range(job["spec"]["backoffLimit"] + 1):
            with self._lock:
                if name in self._deleted:
                    break
            run = self._run_pod(pod, record, namespace, f"{name}-{attempt}")
            record.runs.append(run)
            if name in self._deleted:
                break
            try:
                self._api.add_pod(namespace, f"{name}-{attempt}", name, run.log)
            except KeyError:  # the Job was deleted meanwhile
                break
            failed = sum(r.returncode != 0 for r in record.runs)
            ended = ("Complete" if run.returncode == 0 else
                     "Failed" if attempt == job["spec"]["backoffLimit"] else "")
            status: dict[str, Any] = {"failed": failed} if failed else {}
            if ended:
                status["conditions"] = [{"type": ended, "status": "True"}]
            if status:
                self._set_status(namespace, name, status)
            if ended:
                break

    def _run_pod(self, pod: dict[str, Any], record: pods.JobRun, namespace: str,
                 pod_name: str) -> pods.PodRun:
        pod_dir = os.path.join(self._folder, pod_name)
        objects = self._api.of_kind("secrets") + self._api.of_kind("configmaps")  # as now
        volumes = {v["name"]: pods.make_pod_volume(v, os.path.join(pod_dir, v["name"]),
                                                   objects, self._folder)
                   for v in pod["volumes"]}
        env = {"KUBERNETES_SERVICE_HOST": self._network.gateway,
               "KUBERNETES_SERVICE_PORT": str(self._api.port)}
        mounts: tuple[tuple[str, str, bool], ...] = ()
        if pod.get("automountServiceAccountToken", True):
            account = pod.get("serviceAccountName", "default")
            folder = pods.make_volume(os.path.join(pod_dir, "account"), {
                "token": self._api.access.mint(namespace, account).encode(),
                "ca.crt": self._api.ca_pem, "namespace": namespace.encode()}, 0o644)
            mounts = ((folder, ACCOUNT_MOUNT, True),)
        return pods.run_pod(self._network, record, pod, volumes, pod_dir,
                            time.monotonic() + self._timeout, env, mounts)

    def _set_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        try:
            self._api.set_status("jobs", namespace, name, status)
        except KeyError:  # deleted meanwhile
            pass

    def _delete_job(self, job: dict[str, Any]) -> None:
        """Its pod gets SIGTERM, then SIGKILL after the grace period."""
        name = job["metadata"]["name"]
        with self._lock:
            self._deleted.add(name)
            record = self.jobs.get(name)
            if record is None or not record.processes:
                return
            process = record.processes[-1]
        process.send_signal(signal.SIGTERM)  # (Popen: nothing if it has ended)
        grace = job["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        killer = threading.Timer(grace, process.kill)
        killer.daemon = True
        self._timers.append(killer)
        killer.start()
