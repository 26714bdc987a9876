"""An in-memory Kubernetes API server of ours, over real HTTP(S), for the official client to
talk to.

Why not kmock's emulator: it ignores label and field selectors and has no delete-collection,
which are what a launch's teardown and its controller's watch are made of. This one serves the
few resources a launch uses (secrets, configmaps, services, serviceaccounts, pods and their
logs under /api/v1; jobs under /apis/batch/v1; roles and rolebindings under
/apis/rbac.authorization.k8s.io/v1) with what the client relies on: create (409 if it
exists), get, delete, list and delete-collection by `labelSelector` (equality terms) and
`fieldSelector` (metadata.name), watches from a `resourceVersion` (ADDED, MODIFIED, DELETED,
ending after `timeoutSeconds`), Status bodies for errors, and the garbage collector's one job
here: a Job deleted without orphaning takes its pods. A ServiceAccount's token may do only
what its Roles allow (fake_access.py). Every request is recorded. The test plays the
cluster's controllers: it adds pods and sets a Job's status (`add_pod`, `set_status`), which
watchers see as events, or lets kubelet.py do it, which hears every change (`listeners`).
"""

from __future__ import annotations

import dataclasses
import datetime
import http.server
import json
import re
import ssl
import threading
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

from tests.launch.kubernetes.fake_access import Access, Certificate, verb_of

_PATH = re.compile(r"^/(?:api/v1|apis/(batch|rbac\.authorization\.k8s\.io)/v1)/namespaces/"
                   r"([^/]+)/([a-z]+)(?:/([^/]+)(?:/(log))?)?$")
_KINDS = {"secrets": "Secret", "configmaps": "ConfigMap", "services": "Service",
          "serviceaccounts": "ServiceAccount", "pods": "Pod", "jobs": "Job", "roles": "Role",
          "rolebindings": "RoleBinding"}


@dataclasses.dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any


class FakeKubernetesApi:
    """See the module doc. Use as a context manager; `url` is where it listens: on `host`,
    over HTTPS (a certificate for `host`, its CA `ca_pem`) if `https`."""

    def __init__(self, host: str = "127.0.0.1", https: bool = False) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.logs: dict[tuple[str, str], str] = {}
        self.requests: list[Request] = []
        self.refuse: dict[str, tuple[int, str]] = {}  # plural -> (code, message) for creates
        self._version = 0
        self._events: list[tuple[int, str, str, dict[str, Any]]] = []  # (rv, type, plural, obj)
        self._changed = threading.Condition()
        self.watches = 0  # watches opened so far (a test waits for one with wait_for_watch)
        # The next watches to answer 410 Gone, as the real API does when the version they
        # start from was compacted away (a client must list again); and how many did.
        self.gone_watches = 0
        self.gone_answered = 0
        self.access = Access()
        # Called with (event type, plural, object) at every change, under the store's lock.
        self.listeners: list[Callable[[str, str, dict[str, Any]], None]] = []
        self._server = http.server.ThreadingHTTPServer((host, 0), _handler(self))
        self._server.daemon_threads = False  # server_close() joins every request's thread
        self._closed = False
        self.ca_pem = b""
        if https:
            certificate = Certificate(host)
            self.ca_pem = certificate.ca_pem
            self._server.socket = certificate.context().wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False)
        self.port = self._server.server_address[1]
        self.url = f"{'https' if https else 'http'}://{host}:{self.port}"

    def __enter__(self) -> FakeKubernetesApi:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="fake-kubernetes-api")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    # --- what the test does, as the cluster would ----------------------------------------

    def of_kind(self, plural: str) -> list[dict[str, Any]]:
        with self._changed:
            return [obj for (p, _, _), obj in self.objects.items() if p == plural]

    def add_pod(self, namespace: str, name: str, job: str, log: str) -> None:
        """A pod of Job `job` (with its template's labels), which printed `log`."""
        template = self.objects[("jobs", namespace, job)]["spec"]["template"]["metadata"]
        labels = {**template.get("labels", {}), "job-name": job}
        self._create("pods", namespace, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": name, "namespace": namespace, "labels": labels,
                "annotations": template.get("annotations", {})},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Succeeded"}})
        self.logs[(namespace, name)] = log

    def set_status(self, plural: str, namespace: str, name: str, status: dict) -> None:
        with self._changed:
            obj = self.objects[(plural, namespace, name)]
            obj["status"] = status
            self._record("MODIFIED", plural, obj)

    def wait_until(self, predicate, timeout: float) -> bool:
        """Waits until `predicate()` holds (looked at again at each change of the store)."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def wait_for_watch(self, count: int, timeout: float) -> bool:
        """Waits until `count` watches have been opened (an event, not a poll)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.watches >= count, timeout)

    # --- the store ---------------------------------------------------------------------------

    def _record(self, kind: str, plural: str, obj: dict[str, Any]) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        copy = json.loads(json.dumps(obj))
        self._events.append((self._version, kind, plural, copy))
        for listener in self.listeners:
            listener(kind, plural, copy)
        self._changed.notify_all()

    def _create(self, plural: str, namespace: str, obj: dict[str, Any]) -> tuple[int, Any]:
        with self._changed:
            if plural in self.refuse:
                code, message = self.refuse[plural]
                return code, _status(code, "Forbidden", message)
            name = obj["metadata"]["name"]
            if (plural, namespace, name) in self.objects:
                return 409, _status(409, "AlreadyExists",
                                    f'{plural} "{name}" already exists')
            obj["metadata"] |= {"namespace": namespace, "uid": str(uuid.uuid4()),
                                "creationTimestamp": datetime.datetime.now(
                                    datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
            self.objects[(plural, namespace, name)] = obj
            self._record("ADDED", plural, obj)
            return 201, obj

    def _delete(self, plural: str, namespace: str, name: str, propagation: str) -> None:
        obj = self.objects.pop((plural, namespace, name))
        self._record("DELETED", plural, obj)
        if plural == "jobs" and propagation != "Orphan":
            for key, pod in list(self.objects.items()):
                if key[0] == "pods" and pod["metadata"]["labels"].get("job-name") == name:
                    self._delete("pods", namespace, key[2], propagation)

    def _matching(self, plural: str, namespace: str, query: dict[str, str]) -> list[dict]:
        return [obj for (p, ns, _), obj in self.objects.items()
                if p == plural and ns == namespace and _selected(obj, query)]

    def handle(self, method: str, path: str, query: dict[str, str], body: Any,
               respond, stream, authorization: str = "") -> None:
        self.requests.append(Request(method, path, query, body))
        found = _PATH.match(path)
        if not found or found.group(3) not in _KINDS:
            return respond(404, _status(404, "NotFound", f"no such path {path}"))
        group, namespace, plural, name, log = found.groups()
        with self._changed:
            refusal = self.access.refusal(authorization, self.objects, group or "", plural,
                                          namespace, verb_of(method, bool(name), query))
        if refusal:
            return respond(403, _status(403, "Forbidden", refusal))
        if method == "DELETE" and name:
            with self._changed:
                obj = self.objects.get((plural, namespace, name))
                if obj is not None:
                    self._delete(plural, namespace, name, query.get("propagationPolicy") or (
                        body or {}).get("propagationPolicy", "Background"))
            return respond(200, obj) if obj else respond(
                404, _status(404, "NotFound", f'{plural} "{name}" not found'))
        if method == "POST" and not name:
            return respond(*self._create(plural, namespace, body))
        if method == "GET" and log:
            text = self.logs.get((namespace, name))
            return respond(404, _status(404, "NotFound", "no pod")) if text is None else (
                respond(200, text))
        if method == "GET" and name:
            with self._changed:
                obj = self.objects.get((plural, namespace, name))
            return respond(200, obj) if obj else respond(
                404, _status(404, "NotFound", f'{plural} "{name}" not found'))
        if method == "GET" and query.get("watch", "").lower() == "true":
            with self._changed:
                gone = self.gone_watches > 0
                if gone:
                    self.gone_watches -= 1
                    self.gone_answered += 1
            if gone:
                return respond(410, _status(410, "Expired", "too old resource version"))
            return stream(self._watch(plural, namespace, query))
        if method == "GET":
            with self._changed:
                items = self._matching(plural, namespace, query)
                version = str(self._version)
            return respond(200, {"apiVersion": "v1", "kind": f"{_KINDS[plural]}List",
                                 "metadata": {"resourceVersion": version}, "items": items})
        if method == "DELETE" and not name:
            propagation = query.get("propagationPolicy") or (body or {}).get(
                "propagationPolicy", "Background")
            with self._changed:
                gone = self._matching(plural, namespace, query)
                for obj in gone:
                    self._delete(plural, namespace, obj["metadata"]["name"], propagation)
            return respond(200, {"apiVersion": "v1", "kind": f"{_KINDS[plural]}List",
                                 "metadata": {}, "items": gone})
        return respond(405, _status(405, "MethodNotAllowed", f"{method} {path}"))

    def _watch(self, plural: str, namespace: str, query: dict[str, str]):
        """The events after `resourceVersion` that match, until `timeoutSeconds` pass."""
        since = int(query.get("resourceVersion") or 0)
        timeout = float(query.get("timeoutSeconds") or 30)
        with self._changed:
            self.watches += 1
            self._changed.notify_all()
        deadline = threading.Event()
        timer = threading.Timer(timeout, lambda: (deadline.set(), self._wake()))
        timer.start()
        try:
            while True:
                with self._changed:
                    self._changed.wait_for(
                        lambda after=since: self._closed or deadline.is_set() or (
                            self._version > after))
                    if self._closed or deadline.is_set():
                        return
                    events = [e for e in self._events if e[0] > since]
                since = events[-1][0]
                for _, kind, of, obj in events:
                    if of == plural and obj["metadata"]["namespace"] == namespace and (
                            _selected(obj, query)):
                        yield {"type": kind, "object": obj}
        finally:
            timer.cancel()

    def _wake(self) -> None:
        with self._changed:
            self._changed.notify_all()


def _selected(obj: dict[str, Any], query: dict[str, str]) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, query.get("labelSelector", "").split(",")):
        key, _, value = term.replace("==", "=").partition("=")
        if labels.get(key) != value:
            return False
    for term in filter(None, query.get("fieldSelector", "").split(",")):
        key, _, value = term.partition("=")
        if key != "metadata.name" or obj["metadata"]["name"] != value:
            return False
    return True


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code,
            "reason": reason, "message": message, "metadata": {}}


def _handler(api: FakeKubernetesApi) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # watches stream chunks, as the real API's do

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def setup(self) -> None:
            if isinstance(self.request, ssl.SSLSocket):  # on this request's thread
                self.request.do_handshake()
            super().setup()

        def _serve(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            api.handle(self.command, url.path, query, body, self._respond, self._stream,
                       self.headers.get("Authorization", ""))

        do_GET = do_POST = do_DELETE = _serve

        def _respond(self, code: int, payload: Any) -> None:
            data = payload.encode() if isinstance(payload, str) else json.dumps(
                payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain" if isinstance(payload, str)
                             else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")  # no idle connection holds a thread
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, events) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                self.wfile.flush()
                for event in events:
                    line = json.dumps(event).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                events.close()  # the client has what it watched for, and went

    return Handler
