"""DaemonThreadPool: courier's pools run work like ThreadPoolExecutor, on threads that never
hold up the interpreter's exit (a handler stuck after its server stopped, say)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

from launchpad.courier.threads import DaemonThreadPool

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
