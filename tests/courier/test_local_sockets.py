"""The local transport's guards: who may reach a server's socket, stale sockets, forks."""

from __future__ import annotations

import multiprocessing
import os
import socket
import time

import pytest

from launchpad import courier
from launchpad.courier._in_process import in_process
from launchpad.courier._sockets import unix_sockets
from tests.courier.conftest import TOKEN

pytestmark = pytest.mark.timeout(60)


def _path_of(server: courier.Server) -> str:
    return unix_sockets.socket_path(unix_sockets.socket_dir(), "127.0.0.1", server.port,
                                       None)


def test_a_server_listens_on_a_socket_only_its_user_may_open(serve, service):
    server = serve(service, token=TOKEN)
    path = _path_of(server)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700


def _connect_as_another_user(path: str, results) -> None:
    os.setgid(65534)
    os.setuid(65534)  # nobody
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        results.put("connected")
    except PermissionError:
        results.put("refused")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as another user")
def test_a_process_of_another_user_cannot_connect(serve, service):
    server = serve(service, token=TOKEN)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_connect_as_another_user,
                            args=(_path_of(server), results))
    child.start()
    try:
        assert results.get(timeout=30) == "refused"
    finally:
        child.join(timeout=30)


def test_a_socket_directory_open_to_others_is_not_used(serve, connect, service, monkeypatch,
                                                        tmp_path):
    # A directory of this test's own: the user's shared one, opened to others here, would
    # turn every other process's same-host calls to gRPC (and their logs noisy) meanwhile.
    directory = tmp_path / "sockets"
    directory.mkdir(mode=0o700)
    monkeypatch.setattr(unix_sockets, "DIRECTORY", str(directory))
    assert unix_sockets.socket_dir() == str(directory)
    os.chmod(directory, 0o755)
    assert unix_sockets.socket_dir() is None
    client = connect(serve(service, token=TOKEN), token=TOKEN, transport="local")
    assert client.ping() == "pong"
    assert courier.transport_of(client) == "tcp"  # the server made no socket there
    assert os.listdir(directory) == []
    os.chmod(directory, 0o700)
    assert unix_sockets.socket_dir() == str(directory)


def test_the_sweep_removes_sockets_nobody_listens_on_and_keeps_live_ones(serve, service):
    live = _path_of(serve(service, token=TOKEN))
    directory = unix_sockets.socket_dir()
    stale = os.path.join(directory, "0-sweep-test")
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(stale)  # bound, never listening: the socket of a server that was killed
    left.close()
    young = os.path.join(directory, "1-sweep-test")
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(young)
    left.close()
    old = time.time() - 3600
    for path in (stale, live):
        os.utime(path, (old, old), follow_symlinks=False)
    try:
        unix_sockets.sweep(directory)
        assert not os.path.exists(stale)
        assert os.path.exists(young)  # may be a server between its bind and its listen
        assert os.path.exists(live)
    finally:
        for path in (stale, young):
            if os.path.exists(path):
                os.unlink(path)


def test_the_sweep_keeps_a_socket_bound_in_place_of_a_stale_one_while_it_looked(monkeypatch):
    """A new server of a killed server's port replaces the stale socket with its own, bound
    and not yet listening, while the sweep probes that path: the sweep leaves the new one."""
    directory = unix_sockets.socket_dir()
    path = os.path.join(directory, "0-sweep-replaced-test")
    killed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    killed.bind(path)
    killed.close()
    old = time.time() - 3600
    os.utime(path, (old, old), follow_symlinks=False)
    new = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe = unix_sockets.listening

    def replaced_then_probed(probed: str) -> bool:
        if probed == path:
            os.unlink(path)
            new.bind(path)  # the new server, between its bind and its listen
        return probe(probed)

    monkeypatch.setattr(unix_sockets, "listening", replaced_then_probed)
    try:
        unix_sockets.sweep(directory)
        assert os.path.exists(path)
    finally:
        new.close()
        if os.path.lexists(path):
            os.unlink(path)


def _call_from_a_fork(address: str, results) -> None:
    client = courier.Client(address, token=TOKEN, transport="auto")  # (whatever the run forces)
    results.put((client.ping(), courier.transport_of(client), in_process.InProcessChannel.find(
        address, None) is None))
    courier.close(client)


def test_a_forked_child_reaches_its_parents_server_not_a_copy(serve, service):
    server = serve(service, token=TOKEN)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_call_from_a_fork, args=(server.address, results))
    child.start()
    try:
        assert results.get(timeout=30) == ("pong", "local", True)
    finally:
        child.join(timeout=30)
    assert service.calls == 1  # the parent's object answered
