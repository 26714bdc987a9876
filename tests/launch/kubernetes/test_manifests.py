"""The manifests of a Kubernetes launch: every example's, written by `launchpad
kubernetes-manifests`, validates strictly against Kubernetes 1.33's schemas; no secret is in a
ConfigMap, an environment value or a command line; resources, restarts and settings land
where Kubernetes reads them; bad input is refused, named."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys

import kubernetes_validate
import pytest
import yaml

import launchpad as lp
from launchpad.launch.kubernetes import manifests as kubernetes_manifests
from launchpad.launch.kubernetes import states
from launchpad.launch.kubernetes.names import LAUNCH_LABEL
from launchpad.launch.kubernetes.settings import KubernetesSettings
from launchpad.launch.runtime import errors
from tests.launch.kubernetes import programs
from tests.processes import ROOT

KUBERNETES_VERSION = "1.33"
SETTINGS = KubernetesSettings(image="registry.example/app:1", namespace="lp-test")
EXAMPLES = {  # example -> the --arg options its make_program needs
    "hello_world": [], "consumer_producers": [], "batching": [], "program_wait": [],
    "replay": ["--arg", "num_actors=2", "--arg", "num_trajectories=4"], "agent": [],
    "resnet": [],
}
CHANGEABLE = "consumer_producers"  # written with --allow-changes: its controller's Role too
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


@pytest.fixture(scope="module")
def example_manifests(tmp_path_factory) -> dict[str, pathlib.Path]:
    """Each example's manifests, written by the CLI (one process per example, all at once:
    examples define clashing absl flags, and several import TensorFlow)."""
    folder = tmp_path_factory.mktemp("manifests")
    commands = {name: [sys.executable, "-m", "launchpad.cli", "kubernetes-manifests",
                       f"examples.{name}.launch:make_program", "-o", str(folder / name),
                       "--image", SETTINGS.image, "--namespace", SETTINGS.namespace,
                       *(["--tls"] if name == "hello_world" else []),
                       *(["--allow-changes"] if name == CHANGEABLE else []), *args]
                for name, args in EXAMPLES.items()}
    running = {name: subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
               for name, argv in commands.items()}
    for name, process in running.items():
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, f"{name}:\n{output}"
        assert "launchpad: wrote " in output, output
    return {name: folder / name for name in EXAMPLES}


def _load(folder: pathlib.Path) -> list[dict]:
    return [yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.yaml"))]


def _secrets_of(objects: list[dict]) -> list[bytes]:
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    values = [base64.b64decode(v) for v in secret["data"].values()]
    return [v for v in values if v != b"launchpad"]  # (the TLS server name is no secret)


def _assert_no_secret_outside_the_secret(objects: list[dict]) -> None:
    secrets = _secrets_of(objects)
    assert secrets and all(len(s) >= 16 for s in secrets)
    for obj in objects:
        if obj["kind"] == "Secret":
            continue
        text = json.dumps(obj).encode()  # env values, commands, labels, annotations
        blobs = [base64.b64decode(v) for v in obj.get("binaryData", {}).values()]
        for secret in secrets:
            assert secret not in text, f"{obj['kind']} {obj['metadata']['name']}"
            assert base64.b64encode(secret) not in text
            for blob in blobs:  # the sealed specs, decoded: no token, no key inside
                assert secret not in blob, f"a spec of ConfigMap {obj['metadata']['name']}"


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_every_example_validates_strictly_and_keeps_its_secret(example, example_manifests):
    folder = example_manifests[example]
    checked = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "kubernetes-validate"), "--strict",
         "-k", KUBERNETES_VERSION, *map(str, sorted(folder.glob("*.yaml")))],
        capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "passed" in checked.stdout and "WARN" not in checked.stdout, checked.stdout
    objects = _load(folder)
    kinds = [o["kind"] for o in objects]
    nodes = kinds.count("Job") - 1
    access = ["ServiceAccount", "Role", "RoleBinding"] if example == CHANGEABLE else []
    assert kinds == ["Secret", "ConfigMap", *access, *["Service"] * (nodes + 1),
                     *["Job"] * (nodes + 1)]
    launch = objects[0]["metadata"]["labels"][LAUNCH_LABEL]
    for obj in objects:
        assert obj["metadata"]["labels"][LAUNCH_LABEL] == launch
        assert obj["metadata"]["namespace"] == SETTINGS.namespace
        assert _DNS_1035.match(obj["metadata"]["name"]), obj["metadata"]["name"]
    _assert_no_secret_outside_the_secret(objects)
    assert stat_mode(folder) == 0o700  # the Secret is among them


def stat_mode(path: pathlib.Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_tls_program_validates_and_its_key_stays_in_the_secret():
    objects = lp_manifests(programs.adder_and_client(), tls=True)
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    assert set(secret["data"]) == {"token", "tls.ca", "tls.crt", "tls.key", "tls.server-name"}
    assert b"PRIVATE KEY" in base64.b64decode(secret["data"]["tls.key"])
    _assert_no_secret_outside_the_secret(objects)


def lp_manifests(program, resources=None, settings=SETTINGS, **options) -> list[dict]:
    return kubernetes_manifests.kubernetes_manifests(program, resources, settings, **options)


def _job(objects: list[dict], node: str) -> dict:
    (job,) = [o for o in objects if o["kind"] == "Job"
              and o["metadata"].get("annotations", {}).get("launchpad.dev/name") == node]
    return job


def test_a_stateful_groups_pods_mount_the_state_volume_and_the_others_do_not():
    program = programs.stateful()
    program.add_node(lp.CourierNode(programs.Adder), label="adder")
    objects = kubernetes_manifests.kubernetes_manifests(
        program, settings=KubernetesSettings(image="x", namespace="lp-test",
                                             state_volume="lp-state"))
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    stateful = _job(objects, "counter/0")["spec"]["template"]["spec"]
    assert {"name": "launchpad-state", "persistentVolumeClaim": {"claimName": "lp-state"}} in (
        stateful["volumes"])
    assert {"name": "launchpad-state", "mountPath": states.STATE_MOUNT} in (
        stateful["containers"][0]["volumeMounts"])
    plain = _job(objects, "adder/0")["spec"]["template"]["spec"]
    assert all(v["name"] != "launchpad-state" for v in plain["volumes"])
    # The controller's pod mounts it too: it writes the groups there, and checks a resume.
    (controller,) = [o for o in objects if o["kind"] == "Job"
                     and o["metadata"]["name"].endswith("-controller")]
    assert {"name": "launchpad-state", "mountPath": states.STATE_MOUNT} in (
        controller["spec"]["template"]["spec"]["containers"][0]["volumeMounts"])


def test_resources_become_requests_and_limits_and_groups_without_ask_nothing():
    gpu = lp.Resources(cpus=4, gpus=2, memory_mb=2048, extra={"example.com/fpga": 1})
    objects = lp_manifests(programs.adder_and_client(), {"adder": gpu})
    (adder,) = _job(objects, "adder/0")["spec"]["template"]["spec"]["containers"]
    assert adder["resources"] == {
        "requests": {"cpu": "4", "memory": "2048Mi", "nvidia.com/gpu": "2",
                     "example.com/fpga": "1"},
        "limits": {"memory": "2048Mi", "nvidia.com/gpu": "2", "example.com/fpga": "1"}}
    (client,) = _job(objects, "client/0")["spec"]["template"]["spec"]["containers"]
    assert "resources" not in client
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_a_groups_restarts_are_its_jobs_backoff_limit_and_the_pods_are_as_designed():
    objects = lp_manifests(programs.adder_and_flaky("/tmp/unused"),
                           termination_notice_secs=7)
    flaky, adder = _job(objects, "flaky/0"), _job(objects, "adder/0")
    assert flaky["spec"]["backoffLimit"] == 1 and adder["spec"]["backoffLimit"] == 0
    controller = [o for o in objects if o["kind"] == "Job"
                  and o["metadata"]["labels"]["launchpad.dev/role"] == "controller"][0]
    assert controller["spec"]["backoffLimit"] == 0
    pod = flaky["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["terminationGracePeriodSeconds"] == 12  # the grace period, and a margin
    (container,) = pod["containers"]
    name = flaky["metadata"]["name"]
    assert container["command"] == ["python", "-m", "launchpad.launch", "--pod-spec",
                                    f"/var/run/launchpad/specs/{name}.spec"]
    assert {"name": "LAUNCHPAD_SECRET_DIR", "value": "/var/run/launchpad/secret"} in (
        container["env"])
    assert [v.get("secret", v.get("configMap"))["defaultMode"] for v in pod["volumes"]] == [
        0o400, 0o400]
    assert all(m["readOnly"] for m in container["volumeMounts"])
    (service,) = [o for o in objects if o["kind"] == "Service"
                  and o["metadata"]["name"] == name]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod_labels(flaky).items()
    controller_service = [o for o in objects if o["kind"] == "Service"
                          and o["metadata"]["name"] == controller["metadata"]["name"]][0]
    assert controller_service["spec"]["ports"][0]["port"] == SETTINGS.controller_port
    assert controller_service["spec"]["selector"].items() <= pod_labels(controller).items()


def pod_labels(job: dict) -> dict:
    return job["spec"]["template"]["metadata"]["labels"]


def test_a_restarting_groups_pods_are_evicted_from_a_lost_host_after_the_liveness_timeout():
    objects = lp_manifests(programs.adder_and_flaky("/tmp/unused"), liveness_timeout_secs=7.5)
    lost = [{"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 8} for taint in ("unreachable", "not-ready")]
    assert _job(objects, "flaky/0")["spec"]["template"]["spec"]["tolerations"] == lost
    assert "tolerations" not in _job(objects, "adder/0")["spec"]["template"]["spec"]
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
           "effect": "NoExecute", "tolerationSeconds": 600}
    objects = lp_manifests(programs.adder_and_flaky("/tmp/unused"),
                           settings=dataclasses.replace(SETTINGS, tolerations=[own]),
                           liveness_timeout_secs=7.5)
    assert _job(objects, "flaky/0")["spec"]["template"]["spec"]["tolerations"] == [
        own, lost[1]]  # the user's own toleration of a taint is theirs
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_settings_land_in_every_pod_and_object():
    settings = KubernetesSettings(
        image="registry.example/app:2", namespace="ml", image_pull_policy="Always",
        service_account="trainer", image_pull_secrets=["registry-key"],
        node_selector={"pool": "gpu"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        labels={"team": "rl"}, annotations={"owner": "me"}, env={"MODE": "fast"},
        controller_port=9000)
    objects = lp_manifests(programs.adder_and_client(), settings=settings)
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        assert obj["metadata"]["namespace"] == "ml"
        assert obj["metadata"]["labels"]["team"] == "rl"
        assert obj["metadata"]["annotations"]["owner"] == "me"
    for job in (o for o in objects if o["kind"] == "Job"):
        pod = job["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "trainer"
        assert pod["imagePullSecrets"] == [{"name": "registry-key"}]
        assert pod["nodeSelector"] == {"pool": "gpu"}
        assert pod["tolerations"][0]["key"] == "gpu"
        (container,) = pod["containers"]
        assert container["image"] == "registry.example/app:2"
        assert container["imagePullPolicy"] == "Always"
        assert {"name": "MODE", "value": "fast"} in container["env"]
    controller = [o for o in objects if o["kind"] == "Job"][0]
    assert controller["spec"]["template"]["spec"]["containers"][0]["ports"][0][
        "containerPort"] == 9000


def test_long_names_stay_valid_and_distinct():
    program = lp.Program("A Very Long Program Name, With Spaces and Ünïcode " * 2)
    with program.group("an_extremely_long_group_label_" * 3):
        for _ in range(3):
            program.add_node(lp.PyNode(programs.fail))
    objects = lp_manifests(program)
    names = [o["metadata"]["name"] for o in objects if o["kind"] == "Job"]
    assert len(set(names)) == 4
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        assert _DNS_1035.match(obj["metadata"]["name"]), obj["metadata"]["name"]


@pytest.mark.parametrize("call, error, words", [
    (lambda: lp_manifests(programs.adder_and_client(), settings=None), TypeError,
     "lp.KubernetesSettings(image=...)"),
    (lambda: lp_manifests(programs.adder_and_client(), settings={"image": "x"}), TypeError,
     "lp.KubernetesSettings"),
    (lambda: lp_manifests(programs.adder_and_client(), settings=KubernetesSettings()),
     ValueError, "image=...) is required"),
    (lambda: lp_manifests(programs.adder_and_client(), {"learner": lp.Resources()}),
     ValueError, "resources names groups ['learner']"),
    (lambda: lp_manifests(programs.adder_and_client(), {"adder": 2}), TypeError,
     "resources['adder'] must be an lp.Resources"),
    (lambda: lp_manifests(programs.adder_and_client(),
                          {"adder": lp.Resources(extra={"bad name!": 1})}),
     ValueError, "resources['adder'].extra names ['bad name!']"),
    (lambda: KubernetesSettings(image="x", namespace="Not_A_Label"), ValueError, "namespace"),
    (lambda: KubernetesSettings(image="x", labels={"launchpad.dev/launch": "x"}), ValueError,
     "launchpad's own"),
    (lambda: KubernetesSettings(image="x", tolerations="gpu"), TypeError, "tolerations"),
    (lambda: KubernetesSettings(image="x", controller_port=0), ValueError, "controller_port"),
    (lambda: KubernetesSettings(image="x", image_pull_policy="Sometimes"), ValueError,
     "image_pull_policy"),
    (lambda: lp_manifests(programs.adder_and_client(), settings=KubernetesSettings(
        image="x", env={"LAUNCHPAD_SECRET_DIR": "/x"})), ValueError, "LAUNCHPAD_SECRET_DIR"),
    (lambda: lp_manifests(lp.Program("empty")), ValueError, "a Program with nodes"),
    (lambda: lp_manifests(programs.stateful()), ValueError,
     "Group 'counter' keeps state (lp.StatePolicy): give lp.KubernetesSettings(state_volume="),
    (lambda: KubernetesSettings(image="x", state_volume="Not A Claim"), ValueError,
     "state_volume must name a PersistentVolumeClaim"),
    (lambda: lp_manifests(programs.stateful(), settings=KubernetesSettings(
        image="x", state_volume="lp-state"), resume="../other-user"), ValueError,
     "resume='../other-user' is not the id of a Kubernetes launch"),
    (lambda: lp_manifests(programs.adder_and_client(), resume="adder-1a2b3c"),
     errors.StateError, "resume='adder-1a2b3c': no group of program 'adder_client' keeps"),
], ids=["no-settings", "settings-type", "no-image", "unknown-group", "not-resources",
        "extra-name", "namespace", "reserved-label", "tolerations-string", "port",
        "pull-policy", "secret-dir-env", "no-nodes", "state-without-volume", "volume-name",
        "resume-not-an-id", "resume-stateless"])
def test_bad_input_is_refused_and_named(call, error, words):
    with pytest.raises(error) as raised:
        call()
    assert words in str(raised.value)


def test_the_cli_names_a_target_that_is_no_program(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "launchpad.cli", "kubernetes-manifests",
         "tests.launch.kubernetes.programs:Adder", "-o", str(tmp_path / "out"), "--image", "x"],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "tests.launch.kubernetes.programs:Adder() returned Adder, not a Program" in done.stderr
    assert not (tmp_path / "out").exists()
