"""CacherNode under every launch type: cached answers, background refresh, stale data refused."""

import threading
import time

import pytest

import launchpad as lp
from tests.launch.helpers import TIMEOUT


class Learner:
    """Its variables change on every read; it can be made to stop answering."""

    def __init__(self):
        self._version = 0
        self._reads = 0
        self._broken = threading.Event()

    def get_variables(self, name):
        if self._broken.is_set():
            raise ConnectionError("learner is down")
        self._reads += 1
        self._version += 1
        return name, self._version

    def reads(self):
        return self._reads

    def break_down(self):
        self._broken.set()


def _eventually(predicate, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)  # polls a remote state that changes in the background


def _program(refresh_ms, stale_ms):
    program = lp.Program("cached")
    learner = program.add_node(lp.CourierNode(Learner), label="learner")
    cacher = program.add_node(lp.CacherNode(learner, refresh_ms, stale_ms), label="cacher")
    return program, learner, cacher


def test_cacher_answers_from_its_cache_and_refreshes_in_the_background(launch):
    program, learner, cacher = _program(refresh_ms=50, stale_ms=60_000)
    launch(program)
    cache = cacher.dereference()
    first = cache.get_variables("w")
    assert first[0] == "w"
    answers = {cache.get_variables("w") for _ in range(20)}
    reads = learner.dereference().reads()
    assert reads < 21  # most of the 21 reads came from the cache
    _eventually(lambda: cache.get_variables("w")[1] > max(v for _, v in answers))


def test_cacher_refuses_data_older_than_stale_after(launch):
    program, learner, cacher = _program(refresh_ms=20, stale_ms=300)
    launch(program)
    cache = cacher.dereference()
    cache.get_variables("w")
    learner.dereference().break_down()
    _eventually(lambda: _raises_stale(cache))
    with pytest.raises(lp.StaleDataError, match="stale_after_ms=300"):
        cache.get_variables("w")


def _raises_stale(cache):
    try:
        cache.get_variables("w")
        return False
    except lp.StaleDataError:
        return True


def test_cacher_arguments_are_checked():
    program = lp.Program("p")
    learner = program.add_node(lp.CourierNode(Learner), label="learner")
    with pytest.raises(ValueError, match="shorter than refresh_interval_ms"):
        lp.CacherNode(learner, 100, 10)
    with pytest.raises(TypeError, match="pass its handle"):
        lp.CacherNode(Learner, 10, 100)
