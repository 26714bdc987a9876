"""DaemonThreadPool: courier's pools run work like ThreadPoolExecutor, on threads that never
hold up the interpreter's exit (a handler stuck after its server stopped, say)."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from launchpad.courier._process.threads import ENDED, DaemonThreadPool, Pollers

pytestmark = pytest.mark.timeout(60)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_runs_work_on_daemon_threads_and_returns_results_and_errors():
    pool = DaemonThreadPool(2, thread_name_prefix="test-pool")
    assert pool.submit(lambda a, b=0: a + b, 1, b=2).result(10) == 3
    assert pool.submit(threading.current_thread).result(10).daemon
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).result(10)
    pool.shutdown()


def test_never_runs_more_than_max_workers_at_once():
    pool = DaemonThreadPool(2, thread_name_prefix="test-pool")
    release = threading.Event()
    lock = threading.Lock()
    running, peak = [0], [0]

    def work():
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1

    futures = [pool.submit(work) for _ in range(6)]
    assert not futures[-1].done()
    release.set()
    for future in futures:
        future.result(10)
    assert peak[0] == 2
    pool.shutdown()


def test_idle_threads_are_reused():
    pool = DaemonThreadPool(8, thread_name_prefix="test-pool")
    names = {pool.submit(lambda: threading.current_thread().name).result(10) for _ in range(20)}
    assert len(names) == 1
    pool.shutdown()


def test_shutdown_refuses_new_work_and_can_cancel_what_waits():
    pool = DaemonThreadPool(1, thread_name_prefix="test-pool")
    release = threading.Event()
    busy = pool.submit(release.wait, 10)
    waiting = pool.submit(lambda: "never")
    pool.shutdown(cancel_futures=True)
    assert waiting.cancelled()
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(print)
    release.set()
    assert busy.result(10) is True


def test_shutdown_without_cancelling_still_runs_queued_work():
    pool = DaemonThreadPool(1, thread_name_prefix="test-pool")
    release = threading.Event()
    pool.submit(release.wait, 10)
    queued = pool.submit(lambda: "ran")
    pool.shutdown()
    release.set()
    assert queued.result(10) == "ran"


_STUCK_HANDLER = textwrap.dedent("""
    import threading
    from launchpad import courier

    entered = threading.Event()

    class Stuck:
        def block(self):
            entered.set()
            threading.Event().wait()  # a handler that never returns

    server = courier.Server(Stuck())
    client = courier.Client(server.start())
    client.futures.block()
    assert entered.wait(30)
    server.stop(grace=0.2)
    print("server stopped", flush=True)
""")


def test_a_handler_stuck_after_its_server_stopped_does_not_keep_the_process_alive():
    result = subprocess.run([sys.executable, "-c", _STUCK_HANDLER], cwd=ROOT, timeout=45,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "server stopped" in result.stdout
    assert "still running: block" in result.stderr  # the warning names the stuck method


# --- Pollers ---

class _Events:
    """A place Pollers wait in: events put in order, and the end, which every waiter sees."""

    def __init__(self):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()

    def put(self, event) -> None:
        self._queue.put(event)

    def end(self) -> None:
        self._queue.put(ENDED)

    def wait(self):
        event = self._queue.get()
        if event is ENDED:
            self._queue.put(ENDED)  # for the next waiter too
        return event


def _pollers_alive() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "test-pollers" and t.is_alive())


def _until(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            return False
        threading.Event().wait(0.01)
    return True


def test_pollers_handle_a_burst_of_blocking_events_at_once_then_shrink_and_end():
    burst = 24
    events, all_in, ended = _Events(), threading.Barrier(burst + 1), threading.Event()
    ends = []

    def handle(event) -> None:
        if event == "block":
            all_in.wait(timeout=10)  # every one of the burst is handled at the same time

    def on_end() -> None:
        ends.append(1)
        ended.set()

    pollers = Pollers("test-pollers", events.wait, handle, on_end, max_threads=64, spare=2)
    pollers.start()
    for _ in range(burst):
        events.put("block")
    all_in.wait(timeout=10)  # (broken, and raising, if the burst was not served at once)
    assert _until(lambda: _pollers_alive() <= 3), _pollers_alive()  # the spare ones, + 1
    events.end()
    assert ended.wait(10)
    assert _until(lambda: _pollers_alive() == 0)
    assert ends == [1]


def test_pollers_never_run_more_threads_than_allowed():
    events, release = _Events(), threading.Event()
    running, most = [0], [0]
    lock = threading.Lock()

    def handle(event) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1

    pollers = Pollers("test-pollers", events.wait, handle, lambda: None, max_threads=4)
    pollers.start()
    for _ in range(10):
        events.put("work")
    assert _until(lambda: running[0] == 4)
    release.set()
    events.end()
    assert _until(lambda: _pollers_alive() == 0)
    assert most[0] == 4


def test_pollers_with_relief_handle_quick_events_on_one_thread():
    """Events that come while one thread is busy wait for it: no thread is added per event
    taken (as without relief, where the last waiter taking one adds a thread)."""
    events, handlers, ended = _Events(), set(), threading.Event()

    def handle(event) -> None:
        handlers.add(threading.current_thread())

    pollers = Pollers("test-pollers", events.wait, handle, ended.set, max_threads=64,
                      relief_secs=10.0)  # (longer than any preemption of a quick handler)
    for _ in range(200):
        events.put("quick")
    pollers.start()
    events.end()
    assert ended.wait(10)
    assert len(handlers) == 1


def test_pollers_with_relief_add_a_thread_for_events_behind_a_blocked_one():
    events, release, second_handled, ended = (_Events(), threading.Event(),
                                              threading.Event(), threading.Event())

    def handle(event) -> None:
        if event == "block":
            release.wait(10)
        else:
            second_handled.set()

    pollers = Pollers("test-pollers", events.wait, handle, ended.set, max_threads=64,
                      relief_secs=0.02)
    pollers.start()
    events.put("block")
    events.put("quick")
    assert second_handled.wait(10)  # while the first is still blocked
    assert not release.is_set()
    release.set()
    assert _until(lambda: _pollers_alive() == 1)  # the one that finished last ends
    events.end()
    assert ended.wait(10)
    overseers = [t for t in threading.enumerate() if t.name == "test-pollers-overseer"]
    for overseer in overseers:
        overseer.join(10)
    assert not any(t.is_alive() for t in overseers)
