"""A launch's pods run here as Kubernetes would run them, from nothing but its manifests.

No control plane can run on this machine, so this plays the kubelet and the Job controller for
the objects `lp.kubernetes_manifests` returns, as faithfully as processes allow:

- each Job's pod is a process on a simulated host of its own (tests/cluster/netns.py: a
  network namespace, its own address), running the container's `command` with the
  container's `env` and nothing else (plus PYTHONPATH to this checkout and PATH to this venv,
  which stand in for the image);
- its volumes are made as the kubelet makes them (each key a file of the volume's
  defaultMode, reached through `<key> -> ..data/<key>`, `..data -> ..<timestamp>`) and
  bind-mounted read-only at the container's mountPaths, in a mount namespace of its own
  (`unshare --mount`), over a tmpfs so nothing is left on this machine's filesystem; a
  PersistentVolumeClaim is a folder of the harness's, the same for every pod and every run of
  it, mounted read-write;
- every Service's DNS name (`<name>.<namespace>.svc`) resolves, in every pod's hosts file, to
  the host of the pod it selects, as the cluster's DNS resolves a headless Service;
- a pod that fails is run again while its Job's backoffLimit allows, as the Job controller
  does; a Job whose pod finished is done.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from tests.cluster.netns import Host, HostNetwork
from tests.processes import ROOT

_VENV_BIN = os.path.dirname(sys.executable)
# Pods run the image's `python`: here, this venv's, with this checkout importable.
_IMAGE_ENV = {"PATH": f"{_VENV_BIN}:/usr/bin:/bin", "PYTHONPATH": ROOT}


@dataclasses.dataclass
class PodRun:
    """One run of a Job's pod: its exit code and its log."""

    returncode: int
    log: str


@dataclasses.dataclass
class JobRun:
    """A Job's pods, in the order they ran, and where they ran."""

    name: str
    host: Host
    runs: list[PodRun] = dataclasses.field(default_factory=list)
    pids: list[int] = dataclasses.field(default_factory=list)
    processes: list[subprocess.Popen] = dataclasses.field(default_factory=list)
    log_paths: list[str] = dataclasses.field(default_factory=list)

    @property
    def log(self) -> str:
        return "".join(run.log for run in self.runs)


def wait_for_log(job: JobRun, text: str, timeout: float) -> bool:
    """Waits until the current pod of `job` has printed `text`; False after `timeout` s.
    (A file being written sends no event: it is read again every 50 ms until then.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.log_paths:
            with open(job.log_paths[-1]) as f:
                if text in f.read():
                    return True
        time.sleep(0.05)
    return False


def objects_of(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


class LocalCluster:
    """Runs the pods of `objects` (one launch's manifests) here; see the module doc.

    Args:
      objects: the launch's objects.
      folder: where the pods' volumes and logs are kept.
      held: names of Jobs whose pods start only once `release`d (until then their Services'
        names do not resolve, as a headless Service's while it has no pod).
    """

    def __init__(self, objects: list[dict[str, Any]], folder: str,
                 held: tuple[str, ...] = ()):
        self._objects = objects
        self._folder = folder
        self._held = {name: threading.Event() for name in held}
        self._jobs = objects_of(objects, "Job")
        self._network = HostNetwork(len(self._jobs))
        self._made_parents: list[str] = []
        self.jobs: dict[str, JobRun] = {}

    def __enter__(self) -> LocalCluster:
        self._network.start()
        try:
            for job, host in zip(self._jobs, self._network.hosts, strict=True):
                self.jobs[job["metadata"]["name"]] = JobRun(job["metadata"]["name"], host)
            self._write_hosts_files([n for n in self.jobs if n not in self._held])
            self._make_mount_parents()
        except BaseException:
            self._network.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._network.stop()  # ends whatever still runs in the pods' namespaces
        remove_mount_parents(self._made_parents)

    def _make_mount_parents(self) -> None:
        """Each pod mounts a tmpfs over the folders above its mountPaths, which must exist
        (made empty here if missing, and removed again at the end)."""
        for job in self._jobs:
            (container,) = job["spec"]["template"]["spec"]["containers"]
            self._made_parents += make_mount_parents(container["volumeMounts"])

    def release(self, job_name: str) -> None:
        """Starts the pods of a held Job (its Services' names resolve from now on)."""
        self._write_hosts_files([job_name])
        self._held[job_name].set()

    def _write_hosts_files(self, job_names: list[str]) -> None:
        """Adds the names of the Services that select the pods of `job_names`."""
        lines = []
        for service in objects_of(self._objects, "Service"):
            selector = service["spec"]["selector"]
            chosen = [name for name, job in zip(self.jobs, self._jobs, strict=True)
                      if selector.items() <= job["spec"]["template"]["metadata"]["labels"].items()]
            assert len(chosen) == 1, f"Service {service['metadata']['name']} selects {chosen}"
            if chosen[0] in job_names:
                lines.append(f"{self.jobs[chosen[0]].host.address} "
                             f"{service['metadata']['name']}.{service['metadata']['namespace']}"
                             ".svc")
        for host in self._network.hosts:
            with open(f"/etc/netns/{host.name}/hosts", "a") as f:
                f.write("\n".join(lines) + "\n")

    @contextlib.contextmanager
    def running(self, timeout: float, releasing: tuple[str, ...] = ()) -> Iterator[None]:
        """Runs every Job (as run() does) on a thread of its own while the body watches
        them; on the way out, starts the held Jobs named in `releasing` and waits for the
        run to end, raising what run() found wrong."""
        found: list[AssertionError] = []

        def run() -> None:
            try:
                self.run(timeout)
            except AssertionError as error:
                found.append(error)

        runner = threading.Thread(target=run, name="lp-test-cluster-run")
        runner.start()
        try:
            yield
        finally:
            for name in releasing:
                self.release(name)
            runner.join()
        if found:
            raise found[0]

    def run(self, timeout: float) -> dict[str, JobRun]:
        """Runs every Job until it is done or failed (within `timeout` seconds in all)."""
        deadline = time.monotonic() + timeout
        threads = [threading.Thread(target=self._run_job, args=(job, deadline), daemon=True)
                   for job in self._jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        late = [job["metadata"]["name"] for job, t in zip(self._jobs, threads, strict=True)
                if t.is_alive()]
        assert not late, f"Jobs still running after {timeout}s: {late}\n" + self.logs()
        return self.jobs

    def signal(self, job: JobRun, sig: signal.Signals) -> None:
        """Sends `sig` to the current pod of `job` (as Kubernetes does, deleting it)."""
        os.kill(job.pids[-1], sig)

    def logs(self) -> str:
        return "\n".join(f"--- {name}:\n{job.log}" for name, job in self.jobs.items())

    def _run_job(self, job: dict[str, Any], deadline: float) -> None:
        record = self.jobs[job["metadata"]["name"]]
        held = self._held.get(record.name)
        if held is not None and not held.wait(max(0.0, deadline - time.monotonic())):
            return
        for attempt in range(job["spec"]["backoffLimit"] + 1):
            run = self._run_pod(job, record, attempt, deadline)
            record.runs.append(run)
            if run.returncode == 0:
                return

    def _run_pod(self, job: dict[str, Any], record: JobRun, attempt: int,
                 deadline: float) -> PodRun:
        pod = job["spec"]["template"]["spec"]
        pod_dir = os.path.join(self._folder, f"{record.name}-{attempt}")
        volumes = {v["name"]: self._make_volume(v, os.path.join(pod_dir, v["name"]))
                   for v in pod["volumes"]}
        return run_pod(self._network, record, pod, volumes, pod_dir, deadline)

    def _make_volume(self, volume: dict[str, Any], folder: str) -> str:
        return make_pod_volume(volume, folder, self._objects, self._folder)


def run_pod(network: HostNetwork, record: JobRun, pod: dict[str, Any],
            volumes: dict[str, str], pod_dir: str, deadline: float,
            env: dict[str, str] | None = None,
            mounts: tuple[tuple[str, str, bool], ...] = ()) -> PodRun:
    """Runs `pod` (a Job's template's spec) on `record.host` until it ends or `deadline`:
    its container's command with its env (and `env`), its volumes (name -> the folder made
    for it) at their mountPaths, and `mounts` (folder, path, read-only) besides; the pid
    and the log are kept in `record`."""
    (container,) = pod["containers"]
    mounted = [(volumes[m["name"]], m["mountPath"], m.get("readOnly", False))
               for m in container["volumeMounts"]] + list(mounts)
    script = [f"mount -t tmpfs tmpfs {shlex.quote(parent)}"
              for parent in _mount_parents([path for _, path, _ in mounted])]
    for source, path, read_only in mounted:
        script += [f"mkdir -p {shlex.quote(path)}",
                   f"mount --bind {shlex.quote(source)} {shlex.quote(path)}"]
        if read_only:
            script.append(f"mount -o remount,bind,ro {shlex.quote(path)}")
    argv = network.exec_argv(record.host, [
        "unshare", "--mount", "sh", "-ec", " && ".join(script) + ' && exec "$@"', "pod",
        *container["command"], *container.get("args", [])])
    env = {**{e["name"]: e["value"] for e in container["env"]}, **(env or {}), **_IMAGE_ENV}
    log_path = os.path.join(pod_dir, "log")
    os.makedirs(pod_dir, exist_ok=True)
    with open(log_path, "w+") as log:
        record.log_paths.append(log_path)
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd="/")
        record.pids.append(process.pid)
        record.processes.append(process)
        try:
            returncode = process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            returncode = process.wait()
        log.seek(0)
        return PodRun(returncode, log.read())


def make_pod_volume(volume: dict[str, Any], folder: str, objects: list[dict[str, Any]],
                    claims_folder: str) -> str:
    """The files of a pod's Secret or ConfigMap volume (from `objects`), or a claim's folder
    (under `claims_folder`, the same for every pod); the folder to mount."""
    if "persistentVolumeClaim" in volume:
        claim = os.path.join(claims_folder, "claims",
                             volume["persistentVolumeClaim"]["claimName"])
        os.makedirs(claim, mode=0o700, exist_ok=True)
        return claim
    if "secret" in volume:
        source = volume["secret"]
        (obj,) = [s for s in objects_of(objects, "Secret")
                  if s["metadata"]["name"] == source["secretName"]]
        data = {k: base64.b64decode(v) for k, v in obj["data"].items()}
    else:
        source = volume["configMap"]
        (obj,) = [c for c in objects_of(objects, "ConfigMap")
                  if c["metadata"]["name"] == source["name"]]
        data = {k: base64.b64decode(v) for k, v in obj["binaryData"].items()}
    items = source.get("items") or [{"key": k, "path": k} for k in data]
    return make_volume(folder, {i["path"]: data[i["key"]] for i in items},
                       source["defaultMode"])


def _mount_parents(paths: list[str]) -> list[str]:
    """The folders a pod mounts a tmpfs over, to make `paths` in: each path's parent, but
    for those inside another's."""
    parents: list[str] = []
    for parent in sorted({os.path.dirname(path) for path in paths}, key=len):
        if not any(parent == p or parent.startswith(p + "/") for p in parents):
            parents.append(parent)
    return parents


def make_mount_parents(volume_mounts: list[dict[str, Any]],
                       extra: tuple[str, ...] = ()) -> list[str]:
    """Makes the folders a pod's tmpfs mounts need on this machine, where missing; returns
    those it made, deepest first (for remove_mount_parents)."""
    made: list[str] = []
    for parent in _mount_parents([m["mountPath"] for m in volume_mounts] + list(extra)):
        missing = []
        folder = parent
        while not os.path.isdir(folder):
            missing.append(folder)
            folder = os.path.dirname(folder)
        os.makedirs(parent, exist_ok=True)
        made += missing
    return made


def remove_mount_parents(made: list[str]) -> None:
    """Removes the folders make_mount_parents made, if they are empty."""
    for folder in made:
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def make_volume(folder: str, files: dict[str, bytes], mode: int) -> str:
    """`files` laid out in `folder` as the kubelet lays out a volume's: each a file of `mode`
    in a timestamped folder, reached through `<path> -> ..data/<path>` and
    `..data -> ..<timestamp>`; returns `folder`."""
    stamp = "..2026_01_01_00_00_00.000000001"
    os.makedirs(os.path.join(folder, stamp))
    for path, data in files.items():
        with open(os.open(os.path.join(folder, stamp, path), os.O_WRONLY | os.O_CREAT, mode),
                  "wb") as f:
            f.write(data)
        os.symlink(os.path.join("..data", path), os.path.join(folder, path))
    os.symlink(stamp, os.path.join(folder, "..data"))
    return folder


def unavailable() -> str | None:
    """Why pods cannot be run here, or None."""
    if os.geteuid() != 0:
        return "running pods needs root (network and mount namespaces)"
    missing = [c for c in ("ip", "unshare", "mount") if shutil.which(c) is None]
    return f"running pods needs {', '.join(missing)}" if missing else None
