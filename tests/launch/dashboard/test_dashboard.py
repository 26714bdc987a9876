"""The web dashboard (launch/dashboard/): its JSON, /metrics, the token, and the page itself
in a real headless Chromium (Debian's chromium and chromium-driver, driven by selenium)."""

from __future__ import annotations

import contextlib
import json
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import portpicker
import pytest
from prometheus_client.parser import text_string_to_metric_families

import launchpad as lp
from tests.launch.dashboard import dashboard_program
from tests.launch.dashboard.dashboard_program import CALLER_SAYS, CRASH_MESSAGE
from tests.processes import live_descendants

TIMEOUT = 30
ROOT = pathlib.Path(__file__).resolve().parents[3]
ARTIFACTS = ROOT / "test-artifacts"  # the screenshots (gitignored)
PATHS = ["/", "/static/dashboard.js", "/static/dashboard.css", "/api/status",
         "/api/logs?node=adder/0", "/api/graph", "/graph.svg", "/metrics", "/nothing-here"]


def request(url: str, headers: dict | None = None, method: str = "GET") -> tuple[int, bytes]:
    """The status code and body of a request (errors too)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {},
                                                           method=method),
                                    timeout=TIMEOUT) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Dashboard:
    """What a test reads of a launch's dashboard."""

    def __init__(self, controller: lp.Controller):
        self.url = controller.dashboard_url
        self.base, _, self.token = self.url.partition("/?token=")

    def get(self, path: str) -> bytes:
        code, body = request(self.base + path, {"Authorization": f"Bearer {self.token}"})
        assert code == 200, (path, code)
        return body

    def status(self) -> dict:
        return json.loads(self.get("/api/status"))

    def node(self, name: str) -> dict:
        return next(n for n in self.status()["nodes"] if n["name"] == name)


def poll(condition, what: str, timeout: float = TIMEOUT):
    """`condition()`'s first truthy value, polled until `timeout` (nodes report every 2 s:
    there is no event to wait on from here)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.1)


@pytest.fixture
def launch():
    """`launch(program, **kwargs)` under local_mp with node logs kept and a dashboard on a
    free port; every program is ended after the test (ask for the leak checks first: they
    look once it has ended them)."""
    controllers = []

    def launch(program, **kwargs):
        kwargs.setdefault("dashboard_port", portpicker.pick_unused_port())
        controller = lp.launch(program, launch_type="local_mp", terminal="output_to_files",
                               **kwargs)
        controllers.append(controller)
        return controller

    yield launch
    for controller in controllers:
        controller.kill()
    for controller in controllers:
        with contextlib.suppress(lp.NodeFailedError):
            assert controller.wait(timeout=TIMEOUT), "program did not stop"


def launch_restarting(launch, name: str) -> tuple[lp.Controller, Dashboard, int]:
    """The restarting program, once it runs and its crasher has failed; the adder called
    `add` (and `refuse`, which raises) from here: returns how many times."""
    program, adder = dashboard_program.restarting_program(name)
    controller = launch(program)
    for node in ("adder/0", "caller/0", "caller/1"):
        assert controller.wait_for_started(node, TIMEOUT), node
    assert controller.wait_for_restarts("crasher/0", 1, TIMEOUT)
    adder = adder.dereference()
    adds = 7
    assert [adder.add(i, 1) for i in range(adds)] == list(range(1, adds + 1))
    for _ in range(2):
        with pytest.raises(ValueError, match="refused on purpose"):
            adder.refuse()
    dashboard = Dashboard(controller)
    poll(lambda: dashboard.node("adder/0")["methods"].get("refuse", {}).get("errors") == 2,
         "the adder's report of the calls")
    return controller, dashboard, adds


def test_status_logs_graph_and_metrics_of_a_running_program(no_leaked_threads,
                                                            no_leaked_processes, launch):
    controller, dashboard, adds = launch_restarting(launch, "dash-metrics")
    status = dashboard.status()
    assert status["program"] == "dash-metrics" and status["state"] == "running"
    states = {node["name"]: node["state"] for node in status["nodes"]}
    assert states == {"adder/0": "running", "caller/0": "running", "caller/1": "running",
                      "crasher/0": "restarting"}
    crasher = dashboard.node("crasher/0")
    assert crasher["restarts"] == 1
    [failure] = crasher["failures"]
    assert failure["restarted"] and CRASH_MESSAGE in failure["traceback"]
    add = dashboard.node("adder/0")["methods"]["add"]
    assert add["calls"] == adds and add["errors"] == 0 and "counts" not in add
    assert add["p50_secs"] > 0

    logs = json.loads(dashboard.get("/api/logs?node=caller/1"))
    assert logs["kept"] and CALLER_SAYS in logs["text"]
    code, body = request(f"{dashboard.base}/api/logs?node=nobody/0&token={dashboard.token}")
    assert code == 404 and "nobody/0" in json.loads(body)["error"]

    graph = json.loads(dashboard.get("/api/graph"))
    assert '"crasher/0"' in graph["text"]  # the DOT source
    if shutil.which("dot"):
        svg = dashboard.get("/graph.svg")
        assert graph["svg"] and b"<svg" in svg and b"crasher" in svg
    else:
        assert not graph["svg"]

    families = {f.name: f for f in text_string_to_metric_families(
        dashboard.get("/metrics").decode())}
    for family in families.values():
        for sample in family.samples:
            labels = sample.labels
            assert labels["program"] == "dash-metrics", sample
            assert labels["node"] == f"{labels['label']}/{labels['index']}", sample

    def value(family: str, sample: str, **labels) -> float:
        [found] = [s.value for s in families[family].samples
                   if s.name == sample and labels.items() <= s.labels.items()]
        return found

    assert value("launchpad_rpc_calls", "launchpad_rpc_calls_total", node="adder/0",
                 method="add") == adds
    assert value("launchpad_rpc_errors", "launchpad_rpc_errors_total", node="adder/0",
                 method="refuse") == 2
    assert value("launchpad_rpc_calls", "launchpad_rpc_calls_total", node="adder/0",
                 method="tick") > 0
    buckets = [s for s in families["launchpad_rpc_latency_seconds"].samples
               if s.name.endswith("_bucket") and s.labels["method"] == "add"]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and buckets[-1].labels["le"] == "+Inf"
    assert counts[-1] == adds == value("launchpad_rpc_latency_seconds",
                                       "launchpad_rpc_latency_seconds_count", method="add")
    assert value("launchpad_node_state", "launchpad_node_state", node="crasher/0",
                 state="restarting") == 1
    assert value("launchpad_node_state", "launchpad_node_state", node="crasher/0",
                 state="running") == 0
    assert value("launchpad_node_up", "launchpad_node_up", node="adder/0") == 1
    assert value("launchpad_node_up", "launchpad_node_up", node="crasher/0") == 0
    assert value("launchpad_node_restarts", "launchpad_node_restarts_total",
                 node="crasher/0") == 1
    assert value("launchpad_node_memory_bytes", "launchpad_node_memory_bytes",
                 node="adder/0") > 0


def test_every_path_refuses_a_request_without_the_token(capsys, no_leaked_threads):
    program = lp.Program("dash-token")
    program.add_node(lp.CourierNode(dashboard_program.Adder), "adder")
    port = portpicker.pick_unused_port()
    controller = lp.launch(program, launch_type="local_mt", dashboard_port=port)
    try:
        assert controller.dashboard_url.startswith(f"http://127.0.0.1:{port}/?token=")
        assert (f"launchpad: dashboard of dash-token at {controller.dashboard_url}\n"
                in capsys.readouterr().err)
        dashboard = Dashboard(controller)
        wrong = "0" * len(dashboard.token)
        for path in PATHS:
            url = dashboard.base + path
            join = "&" if "?" in path else "?"
            for refused in (request(url), request(f"{url}{join}token={wrong}"),
                            request(f"{url}{join}token="),
                            request(url, {"Authorization": f"Bearer {wrong}"}),
                            request(url, {"Authorization": dashboard.token}),
                            request(url, method="POST")):
                assert refused == (403, b""), path
        assert request(dashboard.base + "/", method="POST",
                       headers={"Authorization": f"Bearer {dashboard.token}"}) == (405, b"")
        code, page = request(controller.dashboard_url)
        assert code == 200 and b"<title>Launchpad dashboard</title>" in page
        assert dashboard.status()["nodes"][0]["name"] == "adder/0"
    finally:
        controller.stop()
        assert controller.wait(timeout=TIMEOUT)
    with pytest.raises(ConnectionRefusedError):  # its socket closed with the program
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT).close()


def test_a_taken_port_fails_the_launch_before_any_node_starts(box, no_leaked_processes):
    values = box()
    program = lp.Program("dash-taken")
    program.add_node(lp.PyNode(values.put, "started"), "node")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(lp.LaunchError, match=rf"^dashboard_port={port}: cannot serve .*"
                                                 rf"127\.0\.0\.1:{port}: Address already in"):
            lp.launch(program, launch_type="local_mp", dashboard_port=port)
    assert values.empty()


def test_the_flag_is_read_at_launch_and_the_option_wins(monkeypatch, no_leaked_threads):
    program = lp.Program("dash-flag")
    program.add_node(lp.CourierNode(dashboard_program.Adder), "adder")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        monkeypatch.setattr(sys, "argv", [sys.argv[0], f"--lp_dashboard_port={port}"])
        with pytest.raises(lp.LaunchError, match=rf"^--lp_dashboard_port={port}: "):
            lp.launch(program, launch_type="local_mt")
        free = portpicker.pick_unused_port()
        controller = lp.launch(program, launch_type="local_mt", dashboard_port=free)
        try:
            assert controller.dashboard_url.startswith(f"http://127.0.0.1:{free}/")
        finally:
            controller.stop()
            assert controller.wait(timeout=TIMEOUT)
        without = lp.launch(program, launch_type="local_mt", dashboard_port=0)
        assert without.dashboard_url is None and without.stop_and_wait()


@pytest.mark.parametrize("port, message", [
    (-1, r"dashboard_port=-1: a dashboard port must be an int in 1\.\.65535"),
    (70000, r"dashboard_port=70000: a dashboard port must be"),
    ("8080", r"dashboard_port='8080': a dashboard port must be"),
])
def test_a_bad_port_is_refused(port, message):
    program = lp.Program("dash-bad")
    program.add_node(lp.PyNode(print), "node")
    with pytest.raises(ValueError, match=message):
        lp.launch(program, launch_type="local_mt", dashboard_port=port)


def test_one_dashboard_shows_one_program():
    programs = [lp.Program(f"dash-{i}") for i in range(2)]
    for program in programs:
        program.add_node(lp.PyNode(print), "node")
    with pytest.raises(ValueError, match="a dashboard shows one program"):
        lp.launch(programs, launch_type="local_mt", dashboard_port=8080)


def test_without_prometheus_client_the_error_names_the_extra():
    code = ("import sys; sys.modules['prometheus_client'] = None\n"
            "import launchpad as lp\n"
            "p = lp.Program('p'); p.add_node(lp.PyNode(print), 'node')\n"
            "try:\n"
            "    lp.launch(p, launch_type='local_mt', dashboard_port=8080)\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.stdout == ("The dashboard's /metrics needs prometheus-client: "
                           "pip install 'launchpad-next[dashboard]'\n"), done.stderr


# ----------------------------------------------------------------------------- in Chromium


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module's page tests; every process of it has ended
    after them."""
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or chromedriver is None:
        pytest.skip("needs Debian's chromium and chromium-driver (`make system-packages` "
                    "installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,1250"):
        options.add_argument(argument)
    before = live_descendants()
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        poll(lambda: not live_descendants() - before, "Chromium's processes ending")


@pytest.fixture
def no_leaked_program_processes(browser):
    """`no_leaked_processes`, but for the browser's own (it starts some as it goes)."""
    before = live_descendants()
    yield
    poll(lambda: not (live_descendants() - before
                      - live_descendants(browser.service.process.pid)),
         "the program's processes ending")


def rows(browser, table: str) -> list[dict]:
    """The rows of a table of the page, each as its data attributes and cells' text (read
    in one go: the page redraws them every second)."""
    return browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr'))"
        ".map(r => ({...r.dataset, cells: Array.from(r.cells).map(c => c.textContent)}))",
        f"#{table}")


def text_of(browser, element_id: str) -> str:
    return browser.execute_script(
        "return document.getElementById(arguments[0]).textContent", element_id)


def wait_until(browser, condition, what: str):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, TIMEOUT, ignored_exceptions=(
        StaleElementReferenceException,)).until(lambda _: condition(), what)


def click_node(browser, name: str) -> None:
    from selenium.webdriver.common.by import By

    def click() -> bool:  # the row is redrawn every second: found again if it went stale
        browser.find_element(By.CSS_SELECTOR, f'#nodes tbody tr[data-node="{name}"]').click()
        return browser.execute_script(
            "return document.getElementById('detail-title').textContent").startswith(name)

    wait_until(browser, click, f"the details of {name}")


def screenshot(browser, name: str) -> pathlib.Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    assert browser.save_screenshot(str(path)), path
    print(f"screenshot: {path}")
    return path


def test_the_page_shows_every_node_and_a_crashed_ones_traceback(
        browser, no_leaked_threads, no_leaked_program_processes, launch):
    controller, dashboard, adds = launch_restarting(launch, "dash-page")
    browser.get(controller.dashboard_url)
    expected = {"adder/0": "running", "caller/0": "running", "caller/1": "running",
                "crasher/0": "restarting"}
    wait_until(browser, lambda: {r["node"]: r["state"] for r in rows(browser, "nodes")}
               == expected, "every node with its state")
    shown = {r["node"]: r["cells"] for r in rows(browser, "nodes")}
    assert shown["crasher/0"][2] == "restarting" and shown["crasher/0"][5] == "1"
    assert text_of(browser, "program") == "dash-page"
    wait_until(browser, lambda: any(
        r["node"] == "adder/0" and r["method"] == "add" and r["cells"][2] == str(adds)
        for r in rows(browser, "methods")), "the adder's add calls")
    methods = {(r["node"], r["method"]): r["cells"] for r in rows(browser, "methods")}
    assert methods[("adder/0", "refuse")][3] == "2"
    assert methods[("adder/0", "add")][5].endswith("s")  # p50, with its unit
    if shutil.which("dot"):
        wait_until(browser, lambda: browser.execute_script(
            "return document.getElementById('graph-image').naturalWidth > 0"), "the graph")
    else:
        wait_until(browser, lambda: "crasher" in text_of(browser, "graph-text"),
                   "the program as DOT source")

    click_node(browser, "caller/0")
    wait_until(browser, lambda: CALLER_SAYS in text_of(browser, "log"), "the caller's log")
    click_node(browser, "crasher/0")
    wait_until(browser, lambda: CRASH_MESSAGE in text_of(browser, "failures"),
               "the crasher's traceback")
    failures = text_of(browser, "failures")
    assert "Traceback" in failures and "restarted" in failures
    assert browser.execute_script(  # shown as text, not made into elements
        "return document.querySelectorAll('#failures b, #failures script').length") == 0
    wait_until(browser, lambda: "crasher: about to crash" in text_of(browser, "log"),
               "the crasher's log")
    wait_until(browser, lambda: any(  # the rate, once the adder has reported twice
        r["method"] == "tick" and float(r["cells"][4]) > 0 for r in rows(browser, "methods")),
        "the callers' rate of calls")
    assert controller.scale("caller", 3) == ["caller/2"]
    wait_until(browser, lambda: "group 'caller': 2 -> 3 nodes (added caller/2)" in text_of(
        browser, "changes"), "the program's change, with its time")
    screenshot(browser, "dashboard.png")


def test_the_page_shows_a_node_that_failed_for_good(
        browser, no_leaked_threads, no_leaked_program_processes, launch):
    controller = launch(dashboard_program.failed_program("dash-failed"),
                        termination_notice_secs=120)
    assert controller.wait_for_node("crasher/0", TIMEOUT)
    browser.get(controller.dashboard_url)
    wait_until(browser, lambda: {r["node"]: r["state"] for r in rows(browser, "nodes")}
               == {"crasher/0": "failed", "holdout/0": "running"}, "the failed node")
    assert text_of(browser, "program-state") == "stopping"
    assert CRASH_MESSAGE in text_of(browser, "failure")  # the banner: why it stops
    click_node(browser, "crasher/0")
    wait_until(browser, lambda: CRASH_MESSAGE in text_of(browser, "failures"),
               "the crasher's traceback")
    assert "restarted" not in text_of(browser, "failures")
    screenshot(browser, "dashboard-failed.png")
    controller.kill()
    with pytest.raises(lp.NodeFailedError, match="crasher/0"):
        controller.wait(timeout=TIMEOUT)
