"""The launcher against an in-memory Kubernetes API (fake_api.py), through the official
client configured from a kubeconfig: what it creates, how it follows the
controller's Job (a watch) and reads the outcome from its pod's log, and that stop() deletes
every object of the launch, by its label, and nothing of another launch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import kubernetes_validate
import pytest

pytest.importorskip("kubernetes", reason="the official Kubernetes client is not installed "
                                         "(the `kubernetes` extra)")

import launchpad as lp
from launchpad.launch.kubernetes import launcher as kubernetes
from launchpad.launch.kubernetes.controller_pod import OUTCOME_PREFIX
from launchpad.launch.kubernetes.names import LAUNCH_LABEL
from launchpad.launch.kubernetes.settings import KubernetesSettings
from launchpad.launch.runtime import errors
from tests.launch.kubernetes import programs
from tests.launch.kubernetes.fake_api import FakeKubernetesApi
from tests.processes import ROOT

NAMESPACE = "lp-test"
SETTINGS = KubernetesSettings(image="registry.example/app:1", namespace=NAMESPACE)
CREATED = ["secrets", "configmaps", "services", "services", "services", "jobs", "jobs", "jobs"]

pytestmark = pytest.mark.usefixtures("no_leaked_threads")


def _launch(program=None, settings=SETTINGS, **options) -> kubernetes.KubernetesController:
    """lp.launch on the cluster of the kubeconfig: always detached, it returns at once."""
    return lp.launch(program or programs.adder_and_client(), launch_type="kubernetes",
                     kubernetes=settings, termination_notice_secs=2, **options)


def _finish(api: FakeKubernetesApi, controller: kubernetes.KubernetesController,
            outcome: dict, condition: str = "Complete") -> None:
    """Plays the cluster: once the launcher watches, the controller's pod prints `outcome`
    and its Job gets `condition`."""
    job = f"lp-{controller.run_id}-controller"
    assert api.wait_for_watch(1, 10), "the launcher never watched the controller's Job"
    api.add_pod(NAMESPACE, f"{job}-x7k2p", job,
                f"some output\n{OUTCOME_PREFIX}{json.dumps(outcome)}\n")
    api.set_status("jobs", NAMESPACE, job,
                   {"conditions": [{"type": condition, "status": "True"}]})


def _outcome(**changes) -> dict:
    return {"program": "adder_client", "failed_node": None, "reason": "", "traceback": "",
            "stop_reason": "", "exit_codes": {"adder/0": 0, "client/0": 0}, "restarts": {},
            **changes}


def test_launch_creates_the_objects_in_order_as_built_and_valid(api):
    controller = _launch()
    posts = [r for r in api.requests if r.method == "POST"]
    assert [r.path.rsplit("/", 1)[1] for r in posts] == CREATED
    assert all(f"/namespaces/{NAMESPACE}/" in r.path for r in posts)
    for request in posts:  # what reached the API, after the client's own handling
        kubernetes_validate.validate(request.body, "1.33", strict=True)
        assert request.body["metadata"]["labels"][LAUNCH_LABEL] == controller.run_id
    token = api.of_kind("secrets")[0]["data"]["token"]
    assert all(token not in json.dumps(r.body) for r in posts[1:])
    controller.stop()


def test_wait_follows_the_controllers_job_and_reads_the_outcome(api):
    controller = _launch()
    assert controller.wait(timeout=1) is False  # still running: the watch ends, False
    player = threading.Thread(target=_finish, args=(api, controller, _outcome(
        restarts={"client/0": 1})))
    player.start()
    assert controller.wait(timeout=30) is True
    player.join()
    watches = [r for r in api.requests if r.query.get("watch", "").lower() == "true"]
    assert watches and all(r.query["fieldSelector"] == f"metadata.name=lp-{controller.run_id}"
                           "-controller" for r in watches)
    assert controller.exit_codes() == {"adder/0": 0, "client/0": 0}
    assert controller.restarts() == {"client/0": 1}
    controller.stop()


def test_a_watch_answered_gone_lists_again_and_follows_on(api):
    api.gone_watches = 1  # the version listed is compacted away before the watch starts
    controller = _launch()
    player = threading.Thread(target=_finish, args=(api, controller, _outcome()))
    player.start()
    assert controller.wait(timeout=30) is True
    player.join()
    assert api.gone_answered == 1
    job = f"metadata.name=lp-{controller.run_id}-controller"
    lists = [r for r in api.requests if r.method == "GET" and "watch" not in r.query
             and r.query.get("fieldSelector") == job]
    assert len(lists) >= 2  # listed again after the 410, then watched from the new version
    controller.stop()


def test_a_failed_node_is_raised_named_with_its_traceback(api):
    controller = _launch(programs.adder_and_failing())
    player = threading.Thread(target=_finish, args=(api, controller, _outcome(
        program="failing", failed_node="bad/0", reason="RuntimeError: boom",
        traceback="Traceback...\nRuntimeError: boom\n"), "Failed"))
    player.start()
    with pytest.raises(lp.NodeFailedError) as raised:
        controller.wait(timeout=30)
    player.join()
    assert raised.value.node == "bad/0" and raised.value.reason == "RuntimeError: boom"
    assert str(raised.value) == ("Node bad/0 of program 'failing' failed:\nTraceback...\n"
                                 "RuntimeError: boom")
    controller.stop()


def test_stop_deletes_everything_of_the_launch_by_label_and_nothing_else(api):
    kept = _launch()
    controller = _launch()
    job = f"lp-{controller.run_id}-controller"
    api.add_pod(NAMESPACE, f"{job}-abcde", job, "")
    with controller:  # __exit__: stop(), then wait()
        pass
    deletes = [r for r in api.requests if r.method == "DELETE"]
    assert sorted(r.path.rsplit("/", 1)[1] for r in deletes) == [
        "configmaps", "jobs", "secrets", "services"]
    for request in deletes:
        assert request.query["labelSelector"] == f"{LAUNCH_LABEL}={controller.run_id}"
        assert request.query["propagationPolicy"] == "Foreground"
    left = {obj["metadata"]["labels"][LAUNCH_LABEL] for obj in api.objects.values()}
    assert left == {kept.run_id}  # its pod went with its Job; the other launch is whole
    assert controller.stop_reason == "stopped: its Kubernetes objects were deleted"
    kept.kill()
    assert not api.objects
    assert kept.wait(timeout=10) is True


def test_a_refused_object_fails_the_launch_named_and_leaves_nothing(api):
    api.refuse["jobs"] = (403, 'jobs is forbidden: exceeded quota "pods"')
    with pytest.raises(lp.KubernetesError) as raised:
        _launch()
    assert 'exceeded quota "pods"' in str(raised.value)
    assert "Kubernetes refused Job lp-adder-client-" in str(raised.value)
    assert not api.objects


def test_attach_finds_a_launch_by_its_id_and_names_the_others(api):
    controller = _launch()
    attached = lp.attach(controller.run_id, namespace=NAMESPACE)
    assert attached.program_name == "adder_client"
    with pytest.raises(errors.LaunchError) as raised:
        lp.attach("no-such-launch", namespace=NAMESPACE)
    assert controller.run_id in str(raised.value)
    attached.stop()
    assert not api.objects


def test_no_cluster_to_talk_to_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(errors.LaunchError) as raised:
        _launch()
    assert "no kubeconfig" in str(raised.value) and "not a pod" in str(raised.value)


def test_validate_refuses_what_could_not_start():
    program = programs.adder_and_client()
    with pytest.raises(TypeError, match="lp.KubernetesSettings"):
        lp.launch(program, launch_type="kubernetes")
    with pytest.raises(ValueError, match="is required"):
        lp.launch(program, launch_type="kubernetes", kubernetes=KubernetesSettings())
    lp.launch(program, launch_type="kubernetes", kubernetes=SETTINGS, dry_run=True)
    assert os.environ.get("KUBECONFIG", "") != "unchanged"  # validate touches no cluster


def test_the_client_is_imported_only_when_a_launch_needs_it():
    code = ("import sys, launchpad.cli, launchpad.launch.kubernetes.launcher, "
            "launchpad.launch.kubernetes.controller_pod; "
            "assert 'kubernetes' not in sys.modules, 'imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_resume_the_controller_refused_is_raised_named_and_the_launch_deleted(api):
    settings = KubernetesSettings(image="x", namespace=NAMESPACE, state_volume="lp-state")
    controller = lp.launch(programs.stateful(), launch_type="kubernetes", kubernetes=settings,
                           resume="stateful-1a2b3c")
    why = ("resume='stateful-1a2b3c': program 'stateful' differs from the run's in groups "
           "counter (their nodes, or their kinds)")
    player = threading.Thread(target=_finish, args=(api, controller, _outcome(
        program="stateful", exit_codes={}, stop_reason=f"refused: {why}", refused=why),
        "Failed"))
    player.start()
    with pytest.raises(errors.StateError, match="differs from the run's in groups counter"):
        controller.wait(timeout=30)
    player.join()
    assert not api.objects
    with pytest.raises(errors.StateError):  # and again, as a failed node is
        controller.wait(timeout=1)


CHANGEABLE = KubernetesSettings(image="registry.example/app:1", namespace=NAMESPACE,
                                allow_changes=True)


def test_a_changeable_launch_gives_its_controller_a_role_and_stop_deletes_it(api):
    controller = _launch(settings=CHANGEABLE)
    posts = [r.path.rsplit("/", 1)[1] for r in api.requests if r.method == "POST"]
    assert posts == ["secrets", "configmaps", "serviceaccounts", "roles", "rolebindings",
                     *CREATED[2:]]
    for request in api.requests:  # (POSTs only, so far)
        kubernetes_validate.validate(request.body, "1.33", strict=True)
    name = f"lp-{controller.run_id}-controller"
    (job,) = [j for j in api.of_kind("jobs") if j["metadata"]["name"] == name]
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == name
    assert "automountServiceAccountToken" not in job["spec"]["template"]["spec"]
    nodes = [j for j in api.of_kind("jobs") if j["metadata"]["name"] != name]
    assert all(j["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
               for j in nodes)  # only the controller may reach the API
    attached = lp.attach(controller.run_id, namespace=NAMESPACE)
    attached.stop()
    assert not api.objects  # its ServiceAccount, Role and RoleBinding too


def _as(api: FakeKubernetesApi, token: str):
    """The official client, as the bearer of `token`."""
    from kubernetes import client

    configuration = client.Configuration(host=api.url, api_key={"authorization": token},
                                         api_key_prefix={"authorization": "bearer"})
    return client.ApiClient(configuration)


def test_the_controllers_role_reaches_only_its_launchs_kinds_in_its_namespace(api):
    from kubernetes import client

    controller = _launch(settings=CHANGEABLE)
    token = api.access.mint(NAMESPACE, f"lp-{controller.run_id}-controller")
    as_controller = _as(api, token)
    core, batch = client.CoreV1Api(as_controller), client.BatchV1Api(as_controller)
    assert core.list_namespaced_config_map(NAMESPACE).items  # its questions are ConfigMaps
    batch.delete_namespaced_job(f"lp-{controller.run_id}-adder-0", NAMESPACE)
    for forbidden in (lambda: core.read_namespaced_secret(f"lp-{controller.run_id}",
                                                          NAMESPACE),
                      lambda: core.list_namespaced_pod(NAMESPACE),
                      lambda: core.list_namespaced_config_map("default"),
                      lambda: batch.delete_collection_namespaced_job(NAMESPACE)):
        with pytest.raises(client.ApiException) as refused:
            forbidden()
        assert refused.value.status == 403
    controller.stop()


def test_without_allow_changes_what_needs_the_controller_is_refused_saying_so(api):
    controller = _launch()
    for question in (lambda: controller.scale("adder", 2), controller.status,
                     lambda: controller.apply(programs.adder_and_client())):
        with pytest.raises(errors.LaunchError, match=r"without lp.KubernetesSettings\("
                                                     r"allow_changes=True\)"):
            question()
    assert not [r for r in api.requests if r.method == "POST" and "configmaps" in r.path
                and r.body["metadata"]["name"] != f"lp-{controller.run_id}"]
    controller.stop()


def test_a_program_that_ended_has_no_controller_to_ask(api):
    controller = _launch(settings=CHANGEABLE)
    api.set_status("jobs", NAMESPACE, f"lp-{controller.run_id}-controller",
                   {"conditions": [{"type": "Complete", "status": "True"}]})
    assert controller.status() is None
    with pytest.raises(lp.ProgramStoppedError, match="not running"):
        controller.scale("adder", 2)
    controller.stop()
