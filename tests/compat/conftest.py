"""Fixtures of the tests of Launchpad's surface: launching under the local launch types."""

import pytest

from tests.launch.conftest import _launcher, _stop_all, box  # noqa: F401 - fixtures

LOCAL_LAUNCH_TYPES = ["local_mt", "local_mp", "test_mt", "test_mp"]


@pytest.fixture(params=LOCAL_LAUNCH_TYPES)
def launch(request, no_leaked_threads, no_leaked_processes):
    """`launch(program, **kwargs)` under each launch type of this host; stopped after."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers)


@pytest.fixture(params=["local_mt", "local_mp"])
def launch_failing(request, no_leaked_threads, no_leaked_processes):
    """As `launch`, for programs expected to fail (under local_*: a test_* launcher would
    fail the test)."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers, failures_expected=True)
