"""Nodes run outside any launch, as Launchpad's unit tests (and Mava's) run them: addresses
bound by an address builder, `node.run()` called on a thread, a handle dereferenced in the
test; colocations run by hand."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

import launchpad as lp
from launchpad.launch import worker_manager
from launchpad.launch.test_multi_threading import address_builder
from tests.launch.helpers import TIMEOUT
from tests.processes import ROOT


class _Counter:
    def __init__(self):
        self.calls = 0

    def add(self, n):
        self.calls += n
        return self.calls


def test_a_courier_node_serves_on_its_bound_address_for_its_handle(no_leaked_threads):
    node = lp.CourierNode(_Counter)
    handle = node.create_handle()
    address_builder.bind_addresses([node])
    stop = lp.context.standalone("test")
    thread = threading.Thread(target=lambda: _run_in(stop, node))
    thread.start()
    client = handle.dereference()
    assert client.add(2) == 2 and client.futures.add(3).result(TIMEOUT) == 5
    assert client.address == node.courier_address.resolve()
    stop.notify_stop()
    thread.join(TIMEOUT)
    assert not thread.is_alive()


def _run_in(node_context, node):
    token = lp.context.enter(node_context)
    try:
        node.run()
    finally:
        lp.context.leave(token)


def test_a_standalone_server_refuses_a_caller_without_this_processs_token():
    from launchpad import courier
    node = lp.CourierNode(_Counter)
    address_builder.bind_addresses([node])
    stop = lp.context.standalone("test")
    thread = threading.Thread(target=lambda: _run_in(stop, node))
    thread.start()
    try:
        stranger = courier.Client(node.courier_address.resolve(), token="not-this-process",
                                  connect_timeout=5, transport="grpc")
        with pytest.raises(courier.PermissionDeniedError):
            stranger.add(1)
    finally:
        stop.notify_stop()
        thread.join(TIMEOUT)


def test_a_multi_threading_colocation_runs_its_nodes_by_hand_raising_their_failure():
    manager = worker_manager.WorkerManager(register_in_thread=True)
    try:
        done = threading.Event()
        colocation = lp.MultiThreadingColocation([lp.PyNode(done.set), lp.PyNode(int)])
        colocation.run()
        assert done.is_set()
        with pytest.raises(lp.ColocationError, match="ZeroDivisionError"):
            lp.MultiThreadingColocation([lp.PyNode(divmod, 1, 0)]).run()
    finally:
        manager.cleanup_after_test(None)


_CHILD = textwrap.dedent("""
    import os, sys
    import launchpad as lp

    def write(path, fail_first):
        if fail_first and not os.path.exists(path + ".failed"):
            open(path + ".failed", "w").close()
            raise SystemExit(3)
        with open(path, "w") as f:
            f.write(str(os.getpid()))

    folder = sys.argv[1]
    colocation = lp.MultiProcessingColocation(
        [lp.PyNode(write, os.path.join(folder, "a"), True),
         lp.PyNode(write, os.path.join(folder, "b"), False)], num_retries_on_failure=1)
    colocation.run()
    print("ran", os.getpid())
""")


def test_a_multi_processing_colocation_runs_each_node_in_a_child_retrying_as_asked(
        tmp_path, no_leaked_processes):
    result = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    parent = int(result.stdout.split()[1])
    pids = {int((tmp_path / name).read_text()) for name in ("a", "b")}
    assert len(pids) == 2 and parent not in pids
    assert (tmp_path / "a.failed").exists()


def test_a_multi_processing_colocation_out_of_retries_fails_naming_the_budget(tmp_path):
    code = _CHILD.replace("num_retries_on_failure=1", "num_retries_on_failure=0")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "num_retries_on_failure (=0) is reached" in result.stderr
    assert not [n for n in os.listdir(tmp_path) if n.startswith("launchpad-")]
