"""A question to a Kubernetes program's controller through the API (relay.py), the asking
side alone: the test answers as the controller would, or as someone who may make ConfigMaps
in the namespace but holds no token."""

from __future__ import annotations

import base64
import contextlib
import threading

import cloudpickle
import pytest

pytest.importorskip("kubernetes", reason="the official Kubernetes client is not installed "
                                         "(the `kubernetes` extra)")

from launchpad.launch.kubernetes import pod as kubernetes_pod
from launchpad.launch.kubernetes.api import Api
from launchpad.launch.kubernetes.errors import KubernetesError
from launchpad.launch.kubernetes.names import ROLE_LABEL
from launchpad.launch.kubernetes.relay import RelayedClient
from launchpad.launch.runtime.errors import UnsafePathError

pytestmark = pytest.mark.usefixtures("no_leaked_threads")

NAMESPACE = "lp-test"
LAUNCH = "relayed-1a2b3c"
TOKEN = "0123456789abcdef0123456789abcdef"


@contextlib.contextmanager
def _answering(api, answer_of):
    """Answers each question, while in the block, as `answer_of(answer name) -> sealed bytes`
    says, on a thread (the store's listeners may not call the API); joins them at its end."""
    threads: list[threading.Thread] = []
    client = Api.connect()

    def heard(kind: str, plural: str, obj: dict) -> None:
        if kind == "ADDED" and plural == "configmaps" and (
                obj["metadata"]["labels"].get(ROLE_LABEL) == "question"):
            name = obj["metadata"]["name"].replace("-q-", "-a-")
            answer = {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": name, "namespace": NAMESPACE,
                                   "labels": {ROLE_LABEL: "answer"}},
                      "binaryData": {"sealed": base64.b64encode(answer_of(name)).decode()}}
            threads.append(threading.Thread(target=client.create, args=(NAMESPACE, answer)))
            threads[-1].start()

    api.listeners.append(heard)
    try:
        yield
    finally:
        api.listeners.remove(heard)
        for thread in threads:
            thread.join()


def _sealed(answer_name: str, outcome: str, value, token: str = TOKEN) -> bytes:
    """An answer as the controller's pod writes it: (its name, outcome, value), sealed."""
    return kubernetes_pod.seal(cloudpickle.dumps((answer_name, outcome, value)), token)


def _ask():
    return RelayedClient(Api.connect(), NAMESPACE, LAUNCH, TOKEN).scale("worker", 3,
                                                                         timeout=30)


def test_the_answer_sealed_for_its_question_is_what_the_call_returns(api):
    with _answering(api, lambda name: _sealed(name, "answered", ["worker/2"])):
        assert _ask() == ["worker/2"]
    assert [c["metadata"]["labels"][ROLE_LABEL] for c in api.of_kind("configmaps")] == [
        "question"]  # the answer read and deleted (the question is the controller's to delete)


@pytest.mark.parametrize(("answer_of", "raised", "match"), [
    pytest.param(lambda name: _sealed(name, "raised", ValueError("no group 'worker'")),
                 ValueError, "no group 'worker'", id="what-the-controller-raised"),
    pytest.param(lambda name: _sealed(f"lp-{LAUNCH}-a-0ld0ld00", "answered", ["worker/9"]),
                 KubernetesError, "holds the answer to another question",
                 id="a-genuine-answer-copied-to-another-questions-name"),
    pytest.param(lambda name: _sealed(name, "answered", ["worker/2"], token="another-token"),
                 UnsafePathError, "not sealed with this program's token",
                 id="an-answer-not-sealed-with-the-token-refused-before-unpickling"),
])
def test_an_answer_that_is_no_result_is_raised(api, answer_of, raised, match):
    with _answering(api, answer_of), pytest.raises(raised, match=match):
        _ask()


def test_no_answer_in_time_is_named_and_the_question_is_taken_back(api):
    client = RelayedClient(Api.connect(), NAMESPACE, LAUNCH, TOKEN)
    with pytest.raises(KubernetesError, match=f"controller of launch {LAUNCH} did not answer "
                                              "status within 1s"):
        client.status(timeout=1)
    assert api.of_kind("configmaps") == []
