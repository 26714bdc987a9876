"""Fixtures for launching real programs: one test body per launch type (the leak checks they
use are in tests/conftest.py)."""

import pytest

import launchpad as lp
from tests.launch import helpers
from tests.launch.helpers import Box

THREAD_LAUNCH_TYPES = ["local_mt", "test_mt"]
PROCESS_LAUNCH_TYPES = ["local_mp", "test_mp"]
# slurm and ray run on the session's test clusters (tests/cluster), on simulated hosts.
CLUSTER_LAUNCH_TYPES = ["slurm", "ray"]
LAUNCH_TYPES = THREAD_LAUNCH_TYPES + PROCESS_LAUNCH_TYPES + CLUSTER_LAUNCH_TYPES
# Every launcher whose nodes are processes of their own: on this host, and on a cluster's.
NODE_PROCESS_LAUNCH_TYPES = ["local_mp", *CLUSTER_LAUNCH_TYPES]


@pytest.fixture
def box(no_leaked_threads):
    """`box()` makes a Box that nodes in any process can put values into."""
    boxes = []

    def make():
        boxes.append(Box())
        return boxes[-1]

    yield make
    for made in boxes:
        made.close()


def _on_the_test_cluster(request, launch_type: str) -> dict:
    """Points the engine's clients at the session's cluster and Boxes at its gateway; the
    launch options that keep the run's files in the test's own folder."""
    cluster = request.getfixturevalue(f"{launch_type}_cluster")
    monkeypatch = request.getfixturevalue("monkeypatch")
    for name, value in cluster.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(helpers, "BOX_HOST", cluster.network.gateway)
    if launch_type == "ray":
        return {}
    run_dir = request.getfixturevalue("tmp_path")
    return {"slurm": lp.SlurmSettings(run_dir=str(run_dir))}


@pytest.fixture
def cluster_first(request):
    """Starts the session's test cluster, when the test runs under a cluster launch type,
    before the leak checks take their note of what runs (its daemons outlive the test, as
    they should)."""
    callspec = getattr(request.node, "callspec", None)
    for launch_type in CLUSTER_LAUNCH_TYPES:
        if callspec is not None and launch_type in callspec.params.values():
            request.getfixturevalue(f"{launch_type}_cluster")


def _launcher(launch_type, request):
    controllers = []
    defaults = (_on_the_test_cluster(request, launch_type)
                if launch_type in CLUSTER_LAUNCH_TYPES else {})

    def launch(program, **kwargs):
        kwargs = {**defaults, **kwargs}
        if launch_type.startswith("test_"):
            kwargs.setdefault("test_case", request)
        controller = lp.launch(program, launch_type=launch_type, **kwargs)
        controllers.append(controller)
        return controller

    launch.launch_type = launch_type
    return launch, controllers


def _stop_all(controllers, failures_expected=False):
    """Stops every program; a node failure the test did not expect fails it."""
    for controller in controllers:
        controller.stop()
    for controller in controllers:
        try:
            assert controller.wait(timeout=30), "program did not stop"
        except lp.NodeFailedError:
            if not failures_expected:
                raise


@pytest.fixture(params=LAUNCH_TYPES)
def launch(request, cluster_first, no_leaked_threads, no_leaked_processes):
    """`launch(program, **kwargs)` under each launch type; every program is stopped after."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers)


# One launch type of each engine: threads, processes of this host, Slurm, Ray.
EACH_ENGINE = ["local_mt", "local_mp", *CLUSTER_LAUNCH_TYPES]


@pytest.fixture(params=EACH_ENGINE)
def launch_each_engine(request, cluster_first, no_leaked_threads, no_leaked_processes):
    """As `launch`, under one launch type of each engine: for tests of a node type, which
    test_mt and test_mp run as local_mt and local_mp do (they differ in the test case's
    cleanup, which tests/launch/test_launch.py tests under `launch`)."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers)


@pytest.fixture(params=EACH_ENGINE)
def launch_local(request, cluster_first, no_leaked_threads, no_leaked_processes):
    """As `launch`, under local_mt and local_mp: for programs expected to fail, whose failure a
    test_* launcher would turn into a failed test."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers, failures_expected=True)


@pytest.fixture
def launch_failing(request, cluster_first, no_leaked_threads, no_leaked_processes):
    """As `launch`, under the launch types a test names (`@pytest.mark.parametrize(
    "launch_failing", [...], indirect=True)`), for programs expected to fail; the function
    says which (`launch_failing.launch_type`)."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers, failures_expected=True)


@pytest.fixture
def launch_mp_local(no_leaked_threads, no_leaked_processes, request):
    """As `launch`, under local_mp only: for programs expected to fail."""
    launch, controllers = _launcher("local_mp", request)
    yield launch
    _stop_all(controllers, failures_expected=True)


@pytest.fixture
def launch_one_mp(no_leaked_threads, no_leaked_processes, request):
    """As `launch_mp`, under local_mp only: for programs too heavy to run twice."""
    launch, controllers = _launcher("local_mp", request)
    yield launch
    _stop_all(controllers)


@pytest.fixture(params=PROCESS_LAUNCH_TYPES)
def launch_mp(request, cluster_first, no_leaked_threads, no_leaked_processes):
    """As `launch`, under the process launch types of this host only."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers)


@pytest.fixture(params=["local_mp", *CLUSTER_LAUNCH_TYPES])
def launch_processes(request, cluster_first, no_leaked_threads, no_leaked_processes):
    """As `launch`, with each node a process of its own, on this host and on the test
    cluster's hosts (a test may kill one: `controller.node_pids()` has its pid on its host)."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers)


@pytest.fixture
def ray_launch(request, ray_cluster, monkeypatch, no_leaked_threads, no_leaked_processes):
    """`ray_launch(program, **options)` launches on the test cluster; programs are stopped
    after (a failure a test expects does not fail it)."""
    launch, controllers = _launcher("ray", request)
    yield launch
    _stop_all(controllers, failures_expected=True)


@pytest.fixture
def slurm(request, slurm_cluster, monkeypatch, tmp_path, no_leaked_threads,
          no_leaked_processes):
    """`slurm(program, **options)` launches on the test cluster; programs are stopped after
    (test_slurm.py, test_slurm_agents.py)."""
    launch, controllers = _launcher("slurm", request)
    yield launch
    _stop_all(controllers, failures_expected=True)
