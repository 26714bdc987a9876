"""A Kubernetes program changed while it runs: `lp.launch` through the official client to the
fake API (HTTPS), every Job's pod run by kubelet.py on a host of its own, and the changes
asked from outside the cluster through the API (relay.py) of the controller's pod, which
makes and deletes the nodes' objects itself, as its ServiceAccount's Role allows; and a
node whose pod is lost runs again elsewhere, on objects the controller makes."""

from __future__ import annotations

import base64
import dataclasses
import os
import pickle
import signal

import pytest

pytest.importorskip("kubernetes", reason="the official Kubernetes client is not installed "
                                         "(the `kubernetes` extra)")

import launchpad as lp
from launchpad.launch.kubernetes.api import Api
from launchpad.launch.kubernetes.names import LAUNCH_LABEL, ROLE_LABEL
from tests.cli.helpers import cli, failed
from tests.cluster.netns import HostNetwork
from tests.launch.kubernetes import pods, programs
from tests.launch.kubernetes.fake_api import FakeKubernetesApi
from tests.launch.kubernetes.kubelet import Kubelet

pytestmark = [pytest.mark.skipif(pods.unavailable() is not None,
                                 reason=pods.unavailable() or ""),
              pytest.mark.usefixtures("no_leaked_processes", "no_leaked_threads"),
              pytest.mark.timeout(100)]

NAMESPACE = "lp-test"
SETTINGS = lp.KubernetesSettings(image="launchpad:test", namespace=NAMESPACE,
                                 allow_changes=True, startup_timeout_secs=60)
TIMEOUT = 60


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """The fake API on the hosts' bridge, a kubeconfig for it, and the hosts running its
    pods."""
    with HostNetwork(12) as network, FakeKubernetesApi(network.gateway, https=True) as api:
        config = tmp_path / "kubeconfig"
        authority = base64.b64encode(api.ca_pem).decode()
        config.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{api.url}",
            certificate-authority-data: "{authority}"}}}}]
users: [{{name: me, user: {{token: the-users-own}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: me}}}}]
current-context: fake
""")
        monkeypatch.setenv("KUBECONFIG", str(config))
        with Kubelet(api, network, str(tmp_path / "pods")) as kubelet:
            yield api, kubelet


def _sees(kubelet: Kubelet, members: list[str], saying: list[str]) -> None:
    text = f"watcher sees {members} saying {saying}"
    assert pods.wait_for_log(kubelet.job("-watcher-0"), text, TIMEOUT), (
        f"never printed: {text}\n{kubelet.logs()}")


class _CreatesAFile:
    """Unpickled, it makes the file (what a forged question would do if it were)."""

    def __init__(self, path):
        self._path = path

    def __reduce__(self):
        return open, (str(self._path), "w")


def _forged_question(launch: str, marker) -> dict:
    data = b"launchpad-seal-v1 " + b"0" * 64 + b"\n" + pickle.dumps(_CreatesAFile(marker))
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"lp-{launch}-q-forged", "namespace": NAMESPACE,
                         "labels": {LAUNCH_LABEL: launch, ROLE_LABEL: "question"}},
            "binaryData": {"sealed": base64.b64encode(data).decode()}}


def test_a_group_grows_shrinks_and_is_replaced_while_the_program_runs(cluster, tmp_path):
    api, kubelet = cluster
    controller = lp.launch(programs.greeters(), launch_type="kubernetes", kubernetes=SETTINGS,
                           termination_notice_secs=2)
    try:
        _sees(kubelet, ["greeter/0", "greeter/1"], ["hello from 0", "hello from 1"])

        assert controller.scale("greeter", 4) == ["greeter/2", "greeter/3"]
        _sees(kubelet, [f"greeter/{i}" for i in range(4)],
              [f"hello from {i}" for i in range(4)])
        status = controller.status()  # asked through the API too
        assert {"greeter/2", "greeter/3"} <= {node.name for node in status.nodes}

        api.refuse["jobs"] = (403, "jobs is forbidden: exceeded quota: pods=5")
        with pytest.raises(lp.LaunchError, match=r"Kubernetes refused Job lp-\S+-greeter-4-c2 "
                                                 r"for greeter/4 .*exceeded quota: pods=5"):
            controller.scale("greeter", 5)
        del api.refuse["jobs"]
        assert not [c for c in api.of_kind("configmaps") + api.of_kind("services")
                    if "greeter-4" in c["metadata"]["name"] or "specs-c2" in
                    c["metadata"]["name"]]  # the batch undone
        assert len(controller.status().nodes) == 5  # four greeters and the watcher

        launch = controller.run_id  # the command line asks as the Python API does
        shrunk = cli("scale", "--namespace", NAMESPACE, launch, "greeter", "1")
        assert shrunk.returncode == 0, shrunk.stderr
        assert shrunk.stdout == (f"launchpad: group 'greeter' of run {launch} has 1 node "
                                 "(removed greeter/3, greeter/2, greeter/1)\n")
        _sees(kubelet, ["greeter/0"], ["hello from 0"])
        table = cli("status", "--namespace", NAMESPACE, launch)
        rows = [line.split()[0] for line in table.stdout.splitlines()
                if line.startswith(("greeter/", "watcher/"))]
        assert rows == ["greeter/0", "watcher/0"], table.stdout + table.stderr
        assert table.stdout.startswith(f"greeters (kubernetes, run {launch}): running")
        assert "removed greeter/3, greeter/2, greeter/1" in table.stdout  # its changes
        assert "no group 'actor'" in failed(cli("scale", "--namespace", NAMESPACE, launch,
                                                "actor", "2"))
        node_jobs = sorted(job["metadata"]["name"] for job in api.of_kind("jobs")
                           if job["metadata"]["labels"][ROLE_LABEL] == "node")
        assert node_jobs == [f"lp-{launch}-greeter-0", f"lp-{launch}-watcher-0"]

        with pytest.raises(ValueError, match="no group 'actor'; its groups are greeter"):
            controller.scale("actor", 3)  # the controller's own error, across the API

        plan = controller.plan(programs.greeters(count=1, greeting="hi"))
        assert plan.replaced == ("greeter/0",) and plan.applied_at is None
        applied = controller.apply(programs.greeters(count=1, greeting="hi"))
        assert applied.replaced == ("greeter/0",) and applied.unchanged == ("watcher/0",)
        _sees(kubelet, ["greeter/0"], ["hi from 0"])
        assert kubelet.job("-watcher-0").runs == []  # the watcher never stopped

        # A question whose seal is not the program's token is never unpickled: deleted,
        # unanswered, and the controller answers the next one.
        marker = tmp_path / "unpickled"
        forged = _forged_question(launch, marker)
        Api.connect().create(NAMESPACE, forged)  # by someone who may make ConfigMaps there
        assert api.wait_until(lambda: not [c for c in api.of_kind("configmaps") if c[
            "metadata"]["name"] == forged["metadata"]["name"]], TIMEOUT)
        assert not marker.exists()
        assert controller.status() is not None
    finally:
        controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    questions = [c for c in api.of_kind("configmaps")
                 if c["metadata"]["labels"].get(ROLE_LABEL) in ("question", "answer")]
    assert questions == []


def test_a_lost_pod_runs_again_elsewhere_with_its_state_and_the_cli_lists_and_stops_it(
        cluster):
    api, kubelet = cluster
    controller = lp.launch(programs.counter_and_caller(), launch_type="kubernetes",
                           kubernetes=dataclasses.replace(SETTINGS, state_volume="lp-state"),
                           termination_notice_secs=1, liveness_timeout_secs=3)
    try:
        caller, counter = kubelet.job("-caller-0"), kubelet.job("-counter-0")
        text = f"counter at 5 on {counter.host.address}"
        assert pods.wait_for_log(caller, text, TIMEOUT), f"never printed: {text}\n{kubelet.logs()}"
        # Its host lost: the pod goes silent without ending, and Kubernetes, which still
        # counts it as running, would not run another for minutes.
        os.kill(counter.pids[-1], signal.SIGSTOP)
        rerun = kubelet.job("-counter-0-c1")  # made by the controller's pod
        assert rerun.host != counter.host
        text = f"counter at 5 on {rerun.host.address}"  # its saved count, restored
        assert pods.wait_for_log(caller, text, TIMEOUT), f"never printed: {text}\n{kubelet.logs()}"
        jobs = sorted(job["metadata"]["name"] for job in api.of_kind("jobs")
                      if job["metadata"]["labels"][ROLE_LABEL] == "node")
        launch = controller.run_id
        assert jobs == [f"lp-{launch}-caller-0", f"lp-{launch}-counter-0-c1"]  # the old gone
        (node,) = [node for node in controller.status().nodes if node.name == "counter/0"]
        assert (node.restarts, node.host) == (1, rerun.host.address)
        assert "no heartbeat" in node.failures[0].reason

        # A new group that keeps state, in a launch that keeps states: its pod mounts the
        # launch's state volume.
        assert controller.apply(programs.counter_and_caller(archive=True)).added == (
            "archive/0",)
        (archive,) = [job for job in api.of_kind("jobs") if "-archive-0-" in
                      job["metadata"]["name"]]
        volumes = archive["spec"]["template"]["spec"]["volumes"]
        assert {"name": "launchpad-state", "persistentVolumeClaim": {"claimName": "lp-state"}
                } in volumes

        listed = cli("ls", "--namespace", NAMESPACE)  # the launch, from the cluster's API
        assert listed.returncode == 0, listed.stderr
        assert [row.split()[:3] for row in listed.stdout.splitlines()[1:]] == [
            [launch, "lost", "kubernetes"]]
        stopped = cli("stop", "--namespace", NAMESPACE, launch)
        assert stopped.stdout == f"launchpad: stopped run {launch} (program lost)\n", (
            stopped.stderr)
    finally:
        controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    assert cli("ls", "--namespace", NAMESPACE).stdout == (
        f"launchpad: no launch runs in namespace {NAMESPACE}\n")
