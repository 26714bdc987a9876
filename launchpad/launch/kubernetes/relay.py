"""Questions to a Kubernetes program's controller from outside its cluster, through the API.

The controller listens only on the cluster's network, and the launching side may be a laptop
with a kubeconfig. What both can reach is the API, so a question travels as a ConfigMap, in
the way of an operator: the asking side makes `lp-L-q-N` (role `question`) holding the
method, its arguments and the name of the answer, sealed with the program's token (read from
the launch's Secret, which the asker may read); the controller's pod, whose ServiceAccount
may watch the launch's ConfigMaps (KubernetesSettings(allow_changes=True)), finds it, checks
the seal before it unpickles anything, asks its own controller protocol in-process
(service.py's methods, their arguments checked there), makes the answer `lp-L-a-N` (role
`answer`, sealed the same way: what it returned, or what it raised) and deletes the
question. The asker watches for the answer by its name, checks its seal, then unpickles it
(refusing a genuine answer copied to its name: the name is sealed with it), and deletes it.
Only RELAYED methods are asked: scale, change (plan and apply) and status.

A seal that does not check out (a ConfigMap made by someone without the token) is logged
and the question deleted unanswered; its asker times out.
"""

from __future__ import annotations

import base64
import pickle
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import cloudpickle
from absl import logging

from launchpad.launch.kubernetes import names
from launchpad.launch.kubernetes import pod as kubernetes_pod
from launchpad.launch.kubernetes.api import Api
from launchpad.launch.kubernetes.errors import KubernetesError
from launchpad.launch.runtime.errors import UnsafePathError

RELAYED = ("scale", "change", "status")
ANSWER_TIMEOUT_SECS = 300.0  # a shrink waits for the removed nodes' graceful ends
_WATCH_SECS = 30  # a watch is renewed this often (the server ends each one)
_KEY = "sealed"
_RETRY_SECS = 2.0  # how soon a watch that failed is made again


class RelayedClient:
    """The controller protocol's RELAYED methods, asked through the API (see the module
    doc): what a RemoteController's questions call, as they call a ControllerClient's.

    Args:
      api: the API, as the asker's kubeconfig allows.
      namespace, launch_id: where the launch is, and which.
      token: the program's token (its Secret's).
    """

    def __init__(self, api: Api, namespace: str, launch_id: str, token: str):
        self._api = api
        self._namespace = namespace
        self._launch_id = launch_id
        self._token = token

    def scale(self, label: str, count: int, timeout: float | None = None) -> list[str]:
        return self._ask("scale", (label, count), timeout)

    def change(self, program: bytes, fingerprints: dict[str, str], apply: bool,
               only: Sequence[str] = (), timeout: float | None = None) -> Any:
        return self._ask("change", (program, fingerprints, apply, list(only)), timeout)

    def status(self, timeout: float | None = None) -> Any:
        return self._ask("status", (), timeout)

    def close(self) -> None:
        """Nothing to close: each question is its own objects."""

    def _ask(self, method: str, args: tuple, timeout: float | None) -> Any:
        """What the controller answered `method(*args)`: its result, or what it raised.

        Raises:
          KubernetesError: no answer within `timeout` (ANSWER_TIMEOUT_SECS) seconds.
        """
        number = secrets.token_hex(4)
        question = names.object_name(self._launch_id, f"q-{number}")
        answer = names.object_name(self._launch_id, f"a-{number}")
        data = kubernetes_pod.seal(pickle.dumps((method, args, answer)), self._token)
        self._api.create(self._namespace, _config_map(
            self._namespace, question, self._launch_id, "question", data))
        limit = ANSWER_TIMEOUT_SECS if timeout is None else timeout
        answered = False
        try:
            for obj in _added(self._api, self._namespace, limit,
                              field_selector=f"metadata.name={answer}"):
                answered = True  # (the controller deleted the question)
                self._api.delete(self._namespace, "ConfigMap", answer)
                of, outcome, value = pickle.loads(_unsealed(obj, self._token))
                if of != answer:  # a genuine answer, to another question: replayed
                    raise KubernetesError(f"ConfigMap {answer} holds the answer to another "
                                          f"question ({of}): it was copied there")
                if outcome == "raised":
                    raise value
                return value
        finally:
            if not answered:
                self._api.delete(self._namespace, "ConfigMap", question)
        raise KubernetesError(
            f"The controller of launch {self._launch_id} did not answer {method} within "
            f"{limit:g}s; see `kubectl logs -n {self._namespace} "
            f"job/{names.controller_name(self._launch_id)}`")


class Answering:
    """The controller pod's side (see the module doc): answers each question with
    `protocol`'s method (the Controller's ControllerService), each on a thread of its own.

    Args:
      api: the API, as the controller's ServiceAccount.
      namespace, launch_id: the launch's.
      token: the program's token.
      protocol: what answers (the controller's `protocol`).
    """

    def __init__(self, api: Api, namespace: str, launch_id: str, token: str, protocol: Any):
        self._api = api
        self._namespace = namespace
        self._launch_id = launch_id
        self._token = token
        self._protocol = protocol
        self._stopped = threading.Event()
        self._seen: set[str] = set()
        self._thread = threading.Thread(target=self._serve, daemon=True,
                                        name="lp-kubernetes-answering")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """No question is taken from now on (the watch under way ends within _WATCH_SECS;
        the thread is a daemon: the pod's process ends without it)."""
        self._stopped.set()

    def _serve(self) -> None:
        selector = f"{names.LAUNCH_LABEL}={self._launch_id},{names.ROLE_LABEL}=question"
        while not self._stopped.is_set():
            try:
                for obj in _added(self._api, self._namespace, None, self._stopped,
                                  label_selector=selector):
                    self._take(obj)
            except Exception as e:  # noqa: BLE001 - the API failed for a while: watched again
                logging.warning("Watching the questions of launch %s failed (%s: %s); "
                                "watching again in %gs", self._launch_id, type(e).__name__, e,
                                _RETRY_SECS)
                self._stopped.wait(_RETRY_SECS)

    def _take(self, obj: Any) -> None:
        if obj.metadata.name not in self._seen:
            self._seen.add(obj.metadata.name)
            threading.Thread(target=self._answer, args=(obj,), daemon=True,
                             name=f"lp-kubernetes-answer-{obj.metadata.name}").start()

    def _answer(self, obj: Any) -> None:
        name = obj.metadata.name
        try:
            method, args, answer = pickle.loads(_unsealed(obj, self._token))
        except (UnsafePathError, KeyError, TypeError, ValueError) as e:
            logging.warning("Ignored ConfigMap %s, which is no question of this program's: %s",
                            name, e)
            self._api.delete(self._namespace, "ConfigMap", name)
            return
        try:
            if method not in RELAYED:
                raise ValueError(f"The controller answers {', '.join(RELAYED)} from outside "
                                 f"its cluster, not {method!r}")
            reply: tuple[str, Any] = ("answered", getattr(self._protocol, method)(*args))
        except Exception as e:  # noqa: BLE001 - what it raised is the answer
            reply = ("raised", e)
        self._api.create(self._namespace, _config_map(
            self._namespace, answer, self._launch_id, "answer",
            kubernetes_pod.seal(_pickled(answer, reply), self._token)))
        self._api.delete(self._namespace, "ConfigMap", name)


def _pickled(answer: str, reply: tuple[str, Any]) -> bytes:
    """`reply` as the answer named `answer` (the name sealed with it, so that a genuine
    answer copied to another question's name is refused), pickled; an exception that cannot
    be is sent as a RuntimeError saying it."""
    try:
        return cloudpickle.dumps((answer, *reply))
    except Exception:  # noqa: BLE001 - any pickling failure
        _, value = reply
        return cloudpickle.dumps((answer, "raised",
                                  RuntimeError(f"{type(value).__name__}: {value}")))


def _config_map(namespace: str, name: str, launch_id: str, role: str,
                data: bytes) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {names.LAUNCH_LABEL: launch_id, names.ROLE_LABEL: role}},
            "immutable": True, "binaryData": {_KEY: base64.b64encode(data).decode()}}


def _unsealed(obj: Any, token: str) -> bytes:
    """The data of a question's or answer's ConfigMap, its seal checked.

    Raises:
      UnsafePathError: not sealed with `token`.
      KeyError: it holds no sealed data.
    """
    data = base64.b64decode((obj.binary_data or {})[_KEY])
    return kubernetes_pod.unseal(data, token, f"ConfigMap {obj.metadata.name}")


def _added(api: Api, namespace: str, timeout: float | None,
           stopped: threading.Event | None = None, **selectors: str) -> Iterator[Any]:
    """The ConfigMaps that `selectors` select: those there now, then each added, for
    `timeout` seconds (None: until `stopped` is set); one may come more than once (each
    watch that ends is followed by a new list)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while (deadline is None or time.monotonic() < deadline) and not (
            stopped and stopped.is_set()):
        listed = api.core.list_namespaced_config_map(namespace, **selectors)
        yield from listed.items
        left = _WATCH_SECS if deadline is None else min(_WATCH_SECS,
                                                        deadline - time.monotonic())
        try:
            for event in api.module.watch.Watch().stream(
                    api.core.list_namespaced_config_map, namespace,
                    resource_version=listed.metadata.resource_version,
                    timeout_seconds=max(1, int(left)), **selectors):
                if event["type"] == "ADDED":
                    yield event["object"]
        except api.refused as e:
            if e.status != 410:  # 410 Gone: the version is too old; list again
                raise
