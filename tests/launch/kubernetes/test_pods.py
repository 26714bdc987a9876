"""What proves the manifests would work: each pod of a launch - the controller's and every
node's - is run from nothing but its manifest (command, environment, the ConfigMap and Secret
mounted as the kubelet mounts them), as a process on a simulated host of its own whose hosts
file resolves the Services (tests/launch/kubernetes/pods.py), and the program runs to its end."""

from __future__ import annotations

import json
import signal

import pytest

from launchpad.launch.kubernetes import manifests as kubernetes_manifests
from launchpad.launch.kubernetes.controller_pod import OUTCOME_PREFIX
from launchpad.launch.kubernetes.names import LAUNCH_LABEL
from launchpad.launch.kubernetes.settings import KubernetesSettings
from launchpad.launch.node_process import runner
from tests.launch.kubernetes import pods, programs

pytestmark = [pytest.mark.skipif(pods.unavailable() is not None,
                                 reason=pods.unavailable() or ""),
              pytest.mark.usefixtures("no_leaked_processes", "no_leaked_threads")]

SETTINGS = KubernetesSettings(image="launchpad:test", namespace="lp-test")
TIMEOUT = 60


def _manifests(program, **options) -> list[dict]:
    return kubernetes_manifests.kubernetes_manifests(
        program, settings=SETTINGS, termination_notice_secs=2, **options)


def _outcome(job: pods.JobRun) -> dict:
    lines = [line for line in job.log.splitlines() if line.startswith(OUTCOME_PREFIX)]
    assert len(lines) == 1, job.log
    return json.loads(lines[0][len(OUTCOME_PREFIX):])


def _by_role(cluster: pods.LocalCluster) -> tuple[pods.JobRun, dict[str, pods.JobRun]]:
    """(the controller's Job, node name -> its Job)."""
    controller = next(job for name, job in cluster.jobs.items() if name.endswith("-controller"))
    nodes = {name.rsplit("-", 2)[-2] + "/" + name.rsplit("-", 1)[-1]: job
             for name, job in cluster.jobs.items() if job is not controller}
    return controller, nodes


def test_a_program_over_tls_runs_to_its_end_in_pods_on_their_own_hosts(tmp_path):
    objects = _manifests(programs.adder_and_client(), tls=True)
    with pods.LocalCluster(objects, str(tmp_path)) as cluster:
        cluster.run(TIMEOUT)
        controller, nodes = _by_role(cluster)
    report = cluster.logs()
    assert [run.returncode for run in controller.runs] == [0], report
    assert "client got 5 from the adder" in nodes["client/0"].log, report
    assert all(job.runs[-1].returncode == 0 for job in nodes.values()), report
    outcome = _outcome(controller)
    assert outcome["failed_node"] is None and outcome["stop_reason"] == ""
    assert outcome["exit_codes"] == {"adder/0": 0, "client/0": 0}
    where = f"adder on {nodes['adder/0'].host.address}, client on " + (
        nodes["client/0"].host.address)
    assert where in nodes["client/0"].log, report  # two hosts, one call between them


def test_a_failing_node_fails_the_program_named_and_the_controller_exits_1(tmp_path):
    with pods.LocalCluster(_manifests(programs.adder_and_failing()), str(tmp_path)) as cluster:
        cluster.run(TIMEOUT)
        controller, nodes = _by_role(cluster)
    report = cluster.logs()
    assert [run.returncode for run in controller.runs] == [1], report
    outcome = _outcome(controller)
    assert outcome["failed_node"] == "bad/0", report
    assert "RuntimeError: boom in a pod" in outcome["reason"]
    assert 'raise RuntimeError("boom in a pod")' in outcome["traceback"]
    assert outcome["exit_codes"]["bad/0"] == 1
    # The adder ends by itself once its program has stopped (fail fast), within the grace.
    assert [run.returncode for run in nodes["adder/0"].runs] == [0], report


def test_a_node_with_a_restart_left_is_run_again_by_its_job_and_the_program_ends(tmp_path):
    marker = str(tmp_path / "first-run-done")
    with pods.LocalCluster(_manifests(programs.adder_and_flaky(marker)),
                           str(tmp_path)) as cluster:
        cluster.run(TIMEOUT)
        controller, nodes = _by_role(cluster)
    report = cluster.logs()
    assert [run.returncode for run in nodes["flaky/0"].runs] == [1, 0], report
    assert "second run got 2" in nodes["flaky/0"].log
    assert [run.returncode for run in controller.runs] == [0], report
    outcome = _outcome(controller)
    assert outcome["failed_node"] is None
    assert outcome["restarts"] == {"flaky/0": 1}


def test_a_stateful_nodes_pod_run_again_restores_its_state_from_the_volume(tmp_path):
    objects = kubernetes_manifests.kubernetes_manifests(
        programs.stateful(), termination_notice_secs=2,
        settings=KubernetesSettings(image="launchpad:test", namespace="lp-test",
                                    state_volume="lp-state"))
    with pods.LocalCluster(objects, str(tmp_path)) as cluster:
        cluster.run(TIMEOUT)
        controller, nodes = _by_role(cluster)
    report = cluster.logs()
    assert [run.returncode for run in nodes["counter/0"].runs] == [1, 0], report
    assert "restored 3" in nodes["counter/0"].log, report
    assert _outcome(controller)["restarts"] == {"counter/0": 1}


def test_a_launch_resumed_starts_from_the_states_of_the_launch_it_names(tmp_path):
    settings = KubernetesSettings(image="launchpad:test", namespace="lp-test",
                                  state_volume="lp-state", startup_timeout_secs=5)

    def run(program, **options) -> tuple[pods.JobRun, dict[str, pods.JobRun], str, str]:
        """(the controller's Job, the nodes' Jobs, the pods' logs, the launch's id)."""
        objects = kubernetes_manifests.kubernetes_manifests(
            program, settings=settings, termination_notice_secs=2, **options)
        with pods.LocalCluster(objects, str(tmp_path)) as cluster:  # one claim for all three
            cluster.run(TIMEOUT)
            controller, nodes = _by_role(cluster)
        return controller, nodes, cluster.logs(), objects[0]["metadata"]["labels"][LAUNCH_LABEL]

    controller, nodes, report, first = run(programs.resumable())
    assert [r.returncode for r in controller.runs] == [0] and "resumed" not in report, report
    controller, nodes, report, _ = run(programs.resumable(), resume=first)
    assert [r.returncode for r in controller.runs] == [0], report
    assert "resumed at 7" in nodes["counter/0"].log, report
    # Groups that differ: the controller refuses before it serves, and no node runs.
    controller, nodes, report, _ = run(programs.resumable("other"), resume=first)
    assert [r.returncode for r in controller.runs] == [1], report
    refused = _outcome(controller)["refused"]
    assert f"resume={first!r}" in refused and "in groups counter, other" in refused, refused
    assert [r.returncode for r in nodes["other/0"].runs] == [runner.EXIT_ORPHANED], report


def test_deleting_a_pod_stops_the_program_gracefully(tmp_path):
    """SIGTERM is how Kubernetes deletes a pod (stop(), or an eviction): the program stops,
    saying why, and no node fails."""
    with pods.LocalCluster(_manifests(programs.adder_and_waiter()), str(tmp_path)) as cluster:
        controller, nodes = _by_role(cluster)
        with cluster.running(TIMEOUT):
            assert pods.wait_for_log(nodes["waiter/0"], "the adder answered", TIMEOUT), (
                cluster.logs())
            cluster.signal(nodes["adder/0"], signal.SIGTERM)
    report = cluster.logs()
    outcome = _outcome(controller)
    assert "Kubernetes is deleting the pod (node adder/0 got SIGTERM)" in (
        outcome["stop_reason"]), report
    assert outcome["failed_node"] is None, report
    assert [job.runs[-1].returncode for job in cluster.jobs.values()] == [0, 0, 0], report


def test_nodes_started_before_their_controller_wait_for_it(tmp_path):
    """Kubernetes starts pods in no order: a node whose controller's pod is not up yet (its
    Service's name does not even resolve) waits for it, saying so, instead of failing."""
    objects = _manifests(programs.adder_and_client())
    controller_job = next(o["metadata"]["name"] for o in objects
                          if o["metadata"]["name"].endswith("-controller"))
    with pods.LocalCluster(objects, str(tmp_path), held=(controller_job,)) as cluster:
        controller, nodes = _by_role(cluster)
        with cluster.running(TIMEOUT, releasing=(controller_job,)):
            for node in ("adder/0", "client/0"):
                assert pods.wait_for_log(
                    nodes[node], f"launchpad: node {node}: waiting up to 600s for its "
                                 "controller", TIMEOUT), cluster.logs()
    report = cluster.logs()
    assert [run.returncode for run in controller.runs] == [0], report
    assert "client got 5 from the adder" in nodes["client/0"].log, report


def test_a_pod_that_never_starts_fails_its_node_named(tmp_path):
    """A pod pending for ever (no node has what it asks for, its image cannot be pulled) fails
    its node once startup_timeout_secs have passed; started late after all, it finds its
    program gone and ends by itself."""
    settings = KubernetesSettings(image="launchpad:test", namespace="lp-test",
                                  startup_timeout_secs=2)
    objects = kubernetes_manifests.kubernetes_manifests(
        programs.adder_and_client(), settings=settings, termination_notice_secs=1)
    client_job = next(o["metadata"]["name"] for o in objects
                      if o["metadata"]["name"].endswith("-client-0"))
    with pods.LocalCluster(objects, str(tmp_path), held=(client_job,)) as cluster:
        controller, nodes = _by_role(cluster)
        with cluster.running(TIMEOUT, releasing=(client_job,)):
            assert pods.wait_for_log(controller, OUTCOME_PREFIX, TIMEOUT), cluster.logs()
    report = cluster.logs()
    assert [run.returncode for run in controller.runs] == [1], report
    outcome = _outcome(controller)
    assert outcome["failed_node"] == "client/0"
    assert "its pod did not start within 2s" in outcome["reason"]
    assert nodes["client/0"].runs[0].returncode == runner.EXIT_ORPHANED, report
    assert "cannot reach its controller" in nodes["client/0"].log, report


def test_an_example_runs_unchanged_in_pods(tmp_path):
    """examples/consumer_producers, its program as `make_program` builds it: a consumer
    fanning calls out to 4 producers, each in a pod of its own."""
    from examples.consumer_producers.launch import make_program

    with pods.LocalCluster(_manifests(make_program()), str(tmp_path)) as cluster:
        cluster.run(TIMEOUT)
        controller, nodes = _by_role(cluster)
    report = cluster.logs()
    assert "Consumer: 4 producers squared 0..3 -> [0, 1, 4, 9]; sum = 14" in (
        nodes["consumer/0"].log), report
    assert [run.returncode for run in controller.runs] == [0], report
    assert _outcome(controller)["exit_codes"] == {
        **{f"producer/{i}": 0 for i in range(4)}, "consumer/0": 0}
