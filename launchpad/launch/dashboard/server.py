"""The dashboard's HTTP server: a program's page, its status as JSON and `/metrics`.

One per launch that asks for it, in the launching process, beside the controller whose
status it shows: `Dashboard` binds its port before the controller is made (which is given
its URL), and `serve` starts answering once it is. It binds loopback only and answers
nothing without the token made for the launch (`?token=` in the URL, or `Authorization:
Bearer TOKEN`): any request without it gets 403 and an empty body, so the port says nothing
to another user of the host. It stops
with the controller's stop sequence, its threads and socket with it. Paths::

    /                        the page (static/index.html; it reads the token from its URL)
    /static/NAME             its script and style sheet
    /api/status              the program's status (views.status_json), which the page polls
    /api/logs?node=label/i   the end of a node's log: {"node", "text", "kept"}
    /api/graph               {"svg": whether /graph.svg draws the program, "text": it as text}
    /graph.svg               the program's picture (graph.py)
    /metrics                 Prometheus' text format (exporter.py)
"""

from __future__ import annotations

import hmac
import http.server
import importlib.resources
import json
import secrets
import threading
import urllib.parse
from collections.abc import Callable

from absl import logging

from launchpad.launch.dashboard import exporter, graph, views
from launchpad.launch.runtime import terminals
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.errors import DashboardError
from launchpad.program import Program

HOST = "127.0.0.1"
_TOKEN_MARK = "__TOKEN__"  # where index.html has the token (in its script's and style's URLs)
_STATIC = {"dashboard.js": "text/javascript; charset=utf-8",
           "dashboard.css": "text/css; charset=utf-8"}
# Every answer: not cached, not sniffed, no referrer (the page's URL holds the token), and
# nothing loaded or run but this server's own files.
_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; "
                                "img-src 'self'; connect-src 'self'; base-uri 'none'; "
                                "form-action 'none'; frame-ancestors 'none'"),
}
_JSON = "application/json"
# (status code, body, content type) of an answer.
Answer = tuple[int, bytes, str]


class Dashboard:
    """The dashboard of `program` on port `port` of loopback: bound now, answering once
    `serve` is given the program's controller.

    Args:
      program: the program launched.
      port: the port to listen on.
      origin: what asked for the port (`dashboard_port=...` or `--lp_dashboard_port=...`),
        for the error when it is taken.
    Raises:
      DashboardError: the port is taken (or not ours to bind).
    """

    def __init__(self, program: Program, port: int, origin: str):
        self._controller: Controller | None = None
        self._exporter: exporter.Exporter | None = None
        self._token = secrets.token_hex(16)
        self._graph = graph.Graph(program)
        static = importlib.resources.files(__package__) / "static"
        self._index = (static / "index.html").read_text().replace(_TOKEN_MARK, self._token)
        self._static = {name: (static / name).read_bytes() for name in _STATIC}
        self._routes: dict[str, Callable[[dict[str, list[str]]], Answer]] = {
            "/": self._page, "/api/status": self._status, "/api/logs": self._logs,
            "/api/graph": self._graph_json, "/graph.svg": self._graph_svg,
            "/metrics": self._metrics,
            **{f"/static/{name}": self._static_file(name) for name in _STATIC}}
        try:
            self._httpd = _Server((HOST, port), _Handler)
        except OSError as e:
            raise DashboardError(f"{origin}: cannot serve the dashboard of program "
                                 f"{program.name!r} on {HOST}:{port}: "
                                 f"{e.strerror or e}") from None
        self._httpd.dashboard = self
        self.port: int = self._httpd.server_address[1]
        self.url = f"http://{HOST}:{self.port}/?token={self._token}"
        self._stopped = False
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.2,),
                                        name=f"lp-dashboard-{program.name}", daemon=True)

    def serve(self, controller: Controller) -> None:
        """Answers for `controller`'s program from now on, until its stop sequence ends;
        prints the URL (the controller has it as `dashboard_url`)."""
        self._controller = controller
        self._exporter = exporter.Exporter(controller.status)
        controller.on_finish(self.stop)
        self._thread.start()
        logging.info("launchpad: dashboard of %s at %s", controller.program_name, self.url)
        terminals.say(f"dashboard of {controller.program_name} at {self.url}")

    def stop(self) -> None:
        """Stops serving: returns once the socket is closed and every thread has ended."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()  # joins the threads of requests under way
        if self._thread.is_alive():
            self._thread.join()

    # --- answering -------------------------------------------------------------------------

    def answer(self, path: str, authorization: str) -> Answer:
        """The answer to a GET of `path` with the request's Authorization header."""
        if not self.authorized(path, authorization):
            return 403, b"", ""
        url = urllib.parse.urlsplit(path)
        route = self._routes.get(url.path)
        if route is None:
            return 404, b"", ""
        return route(urllib.parse.parse_qs(url.query))

    def authorized(self, path: str, authorization: str) -> bool:
        """Whether a request for `path` with that Authorization header has the token."""
        given = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query).get("token", [])
        scheme, _, bearer = authorization.partition(" ")
        if scheme.lower() == "bearer":
            given.append(bearer.strip())
        expected = self._token.encode()
        return any(hmac.compare_digest(token.encode(), expected) for token in given)

    def _page(self, query: dict[str, list[str]]) -> Answer:
        return 200, self._index.encode(), "text/html; charset=utf-8"

    def _static_file(self, name: str) -> Callable[[dict[str, list[str]]], Answer]:
        return lambda query: (200, self._static[name], _STATIC[name])

    def _status(self, query: dict[str, list[str]]) -> Answer:
        return 200, views.status_json(self._controller.status()), _JSON

    def _logs(self, query: dict[str, list[str]]) -> Answer:
        name = query.get("node", [""])[-1]
        if name not in {node.name for node in self._controller.status().nodes}:
            return 404, json.dumps({"error": f"no node {name!r}"}).encode(), _JSON
        text = views.log_tail(self._controller, name)
        return 200, json.dumps({"node": name, "text": text or "",
                                "kept": text is not None}).encode(), _JSON

    def _graph_json(self, query: dict[str, list[str]]) -> Answer:
        picture = self._graph.picture()
        return 200, json.dumps({"svg": picture.svg is not None,
                                "text": picture.text}).encode(), _JSON

    def _graph_svg(self, query: dict[str, list[str]]) -> Answer:
        svg = self._graph.picture().svg
        return (404, b"", "") if svg is None else (200, svg, "image/svg+xml")

    def _metrics(self, query: dict[str, list[str]]) -> Answer:
        return 200, self._exporter.text(), exporter.CONTENT_TYPE


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # a request under way never holds up the interpreter's exit
    block_on_close = True  # server_close() joins them: a stop leaves no thread behind
    dashboard: Dashboard


class _Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.0: one request per connection, so a stop has no idle connection to wait for."""

    server: _Server
    timeout = 10.0  # a connection that sends nothing for this long is closed

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        try:
            code, body, content_type = self.server.dashboard.answer(
                self.path, self.headers.get("Authorization", ""))
        except Exception:  # noqa: BLE001 - one failed answer must not end the server
            logging.exception("The dashboard could not answer a request")
            code, body, content_type = 500, b"", ""
        self._send(code, body, content_type)

    def _refuse(self) -> None:
        """Any method but GET: 403 without the token, else 405."""
        authorized = self.server.dashboard.authorized(self.path,
                                                      self.headers.get("Authorization", ""))
        self._send(405 if authorized else 403, b"", "")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _refuse  # noqa: N815

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """Malformed requests: the status line only, no page."""
        self.close_connection = True
        self._send(code, b"", "")

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        for name, value in _HEADERS.items():
            self.send_header(name, value)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's name
        """Requests are not logged: their URLs hold the token."""
