"""The fork server: starts node processes as forks of an interpreter that has the core imported.

A fresh interpreter importing grpc, numpy and cloudpickle costs 0.15-0.25 s of CPU, so 100 nodes
on 2 cores would take over 10 s to start. The fork server pays that once per launch; each node is
then a fork (milliseconds), and the forks share the imported code's memory pages (`_preload`
prepares the server for that; see also fork_heap.py). Nodes that import a heavy library (Reverb,
and with it TensorFlow: 3-4 s of CPU and some 200 MB of private pages each) are forked from a
second server that imported it first, one per set of such imports (`Node.heavy_imports`), so
that 32 actors holding a Reverb client share one copy of TensorFlow::

    launcher (ForkServer, a Spawner)            fork server (this module's main)
      spawn(spec, stdio) -- request + fds -->     fork -> child: own process group, stdio, worker
                         <-- started(pid) --
                         <-- exited(pid, code)    SIGCHLD -> waitpid

The server runs no thread of its own (the only others are OpenBLAS's idle workers, which
OpenBLAS stops around a fork) and never creates a gRPC object, so forking it is safe (gRPC
must not exist in a process that forks). It exits when the launcher closes the socket, or dies.
Nodes stay children of the server, which reports each exit status to the launcher.

It is started by ForkServer (`python -c "...fork_server import main; main()" --fd N`), not
by hand, and not with -m: this module is imported by the launchers already.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import gc
import importlib
import os
import pickle
import selectors
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence

from launchpad import courier
from launchpad.launch.node_process import fork_heap
from launchpad.launch.runtime.process import ExecSpawner, Spawner, Stdio, own_process_group
from launchpad.nodes.python.local_multi_processing import PythonProcess

_MAX_MESSAGE = 1 << 20
_CLOSE_TIMEOUT_SECS = 10.0


class ForkServer(Spawner):
    """A Spawner that forks nodes from the fork servers of one launch: one with the core
    imported, started at once, and one per other set of heavy imports nodes ask for
    (`Node.heavy_imports`: Reverb for a node holding a Reverb handle), started with its first
    node. Nodes that need a fresh interpreter get one."""

    def __init__(self):
        self._fallback = ExecSpawner()
        self._lock = threading.Lock()
        self._servers = {(): _Server(())}
        self._closed = False

    def spawn(self, spec_path: str, settings: PythonProcess, stdio: Stdio, own_group: bool,
              on_exit: Callable[[int], None],
              imports: tuple[str, ...] = ()) -> concurrent.futures.Future:
        if settings.needs_fresh_interpreter():
            return self._fallback.spawn(spec_path, settings, stdio, own_group, on_exit)
        if any(name.startswith(_READ_AT_IMPORT) for name in settings.env or {}):
            imports = ()  # the node imports them itself, after its variables are set
        with self._lock:
            if self._closed:
                raise RuntimeError("the fork server of this launch has ended")
            preload = tuple(sorted(imports))
            server = self._servers.get(preload)
            if server is None:
                server = self._servers[preload] = _Server(preload)
        return server.spawn(spec_path, stdio, own_group, on_exit)

    def close(self) -> None:
        """Ends the fork servers (each once every node it started has ended)."""
        with self._lock:
            self._closed = True
        for server in self._servers.values():
            server.close()


# Variables that TensorFlow (which Reverb imports) reads when it is imported: a node that sets
# one is not forked from a server that imported it already.
_READ_AT_IMPORT = ("TF_",)


class _Server:
    """One fork server process (with `preload` imported), and the launcher's end of it."""

    def __init__(self, preload: tuple[str, ...]):
        self._lock = threading.Lock()
        self._socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._server = subprocess.Popen(
            [sys.executable, "-c",
             "from launchpad.launch.node_process.fork_server import main; main()",
             "--fd", str(theirs.fileno()), *(f"--preload={module}" for module in preload)],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, **own_process_group())
        theirs.close()
        self._next_request = 0
        self._starting: dict[int, tuple[concurrent.futures.Future, Callable]] = {}
        self._on_exit: dict[int, Callable[[int], None]] = {}
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="lp-fork-server", daemon=True)
        self._reader.start()

    def spawn(self, spec_path: str, stdio: Stdio, own_group: bool,
              on_exit: Callable[[int], None]) -> concurrent.futures.Future:
        started: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the fork server of this launch has ended")
            request = self._next_request
            self._next_request += 1
            self._starting[request] = (started, on_exit)
            message = pickle.dumps((request, spec_path, own_group))
            socket.send_fds(self._socket, [message], list(stdio))
        return started

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._socket.shutdown(socket.SHUT_WR)
        try:
            self._server.wait(timeout=_CLOSE_TIMEOUT_SECS)
        except subprocess.TimeoutExpired:  # it still waits for a node that will not end
            self._server.kill()
            self._server.wait()
        self._reader.join()
        self._socket.close()

    def _read(self) -> None:
        while True:
            try:
                data = self._socket.recv(_MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                self._server_ended()
                return
            kind, key, value = pickle.loads(data)
            with self._lock:
                if kind == "started":
                    future, on_exit = self._starting.pop(key)
                    self._on_exit[value] = on_exit
                elif kind == "failed":
                    future, _ = self._starting.pop(key)
                else:  # exited
                    on_exit = self._on_exit.pop(key, None)
            if kind == "started":
                future.set_result(value)
            elif kind == "failed":
                future.set_exception(RuntimeError(f"the fork server could not start a node: "
                                                  f"{value}"))
            elif on_exit is not None:
                on_exit(value)

    def _server_ended(self) -> None:
        """The server is gone: its nodes can no longer be reported, so they are ended."""
        with self._lock:
            self._closed = True
            starting, self._starting = self._starting, {}
            live, self._on_exit = self._on_exit, {}
        for future, _ in starting.values():
            future.set_exception(RuntimeError("the fork server of this launch has ended"))
        for pid, on_exit in live.items():
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            on_exit(-signal.SIGKILL)


# --- the server process ---------------------------------------------------------------------


def _child(inherited: list, spec_path: str, own_group: bool, fds: list[int]) -> None:
    """Runs in the fork: becomes the node's process; never returns."""
    # Imported here, not at the top: the fork server's own start imports only this module.
    from launchpad.launch.node_process import runner
    code = 70  # EX_SOFTWARE: the worker itself broke
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        for resource in inherited:  # the server's socket, selector and wake-up pipe
            os.close(resource) if isinstance(resource, int) else resource.close()
        if own_group:
            os.setpgid(0, 0)  # a group, not a session: see process.own_process_group
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds):
            if fd > 2:
                os.close(fd)
        if "numpy" in sys.modules:  # forks share the parent's seed: give each its own
            sys.modules["numpy"].random.seed()
        code = runner.run_process(runner.read_spec(spec_path))
    except BaseException:  # noqa: BLE001 - report what broke, then leave the fork
        import traceback
        traceback.print_exc()
    finally:
        runner.exit_process(code)


def _send(sock: socket.socket, *message) -> None:
    try:
        sock.send(pickle.dumps(message))
    except OSError:
        pass  # the launcher is gone; nodes notice it by themselves


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        children.discard(pid)
        _send(sock, "exited", pid, os.waitstatus_to_exitcode(status))


def serve(fd: int) -> None:
    """Forks a node per request until the launcher closes the socket and every node ended."""
    sock = socket.socket(fileno=fd)
    wake = os.pipe()
    os.set_blocking(wake[1], False)
    signal.set_wakeup_fd(wake[1])
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the selector through the pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher decides how nodes end
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake[0], selectors.EVENT_READ)
    children: set[int] = set()
    open_socket = True
    while open_socket or children:
        for key, _ in selector.select():
            if key.fileobj is not sock:
                os.read(wake[0], 4096)
                _reap(sock, children)
                continue
            try:
                message, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 3)
            except OSError:  # ECONNRESET: the launcher went with our reports unread
                message, fds = b"", []
            if not message:  # the launcher is done (or gone): serve the nodes left, then end
                selector.unregister(sock)
                open_socket = False
                continue
            request, spec_path, own_group = pickle.loads(message)
            try:
                pid = os.fork()
            except OSError as e:
                _send(sock, "failed", request, str(e))
                pid = -1
            if pid == 0:
                _child([sock, selector, *wake], spec_path, own_group, fds)
            for received in fds:
                os.close(received)
            if pid > 0:
                children.add(pid)
                if own_group:
                    # The child makes its group too; doing it here as well means the group
                    # exists once "started" is sent, so a kill right after it reaches the node.
                    with contextlib.suppress(OSError):
                        os.setpgid(pid, pid)
                _send(sock, "started", request, pid)


def main() -> None:
    parser = argparse.ArgumentParser(prog="launchpad fork server")
    parser.add_argument("--fd", type=int, required=True, help="the launcher's socket")
    parser.add_argument("--preload", action="append", default=[],
                        help="a module to import for the forks besides the core (repeated)")
    args = parser.parse_args()
    _preload(args.preload)
    serve(args.fd)


# Modules every node needs, imported once for all forks; gRPC loads some only when its first
# server or channel is made (which must not happen here). A module a node imports after its
# fork costs it about 0.4 MB of pages copied (tests/launch/node_process/test_fork_server.py
# checks that a fork serving and calling with courier imports nothing).
_PRELOAD = ("launchpad", "launchpad.launch.node_process.runner", "concurrent.futures.thread",
            "grpc._server", "grpc._interceptor", "grpc._utilities", "grpc._channel",
            "grpc._simple_stubs", "grpc.experimental")


def _preload(extra: Sequence[str] = ()) -> None:
    """Prepares this process so that its forks share as many of its pages as they can.

    `extra` are a set of nodes' heavy imports (Reverb, and with it TensorFlow). Importing
    them starts no thread of theirs: the threads such a process has are OpenBLAS's idle
    workers (numpy's and SciPy's), which OpenBLAS stops and restarts around a fork itself."""
    for module in _PRELOAD:
        try:
            importlib.import_module(module)
        except ImportError:  # a private gRPC module moved: nodes import what they need
            pass
    if extra:
        from launchpad.launch.node_process import runner
        runner.quiet_tensorflow_notes()
    for module in extra:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - the node imports it again, and says why it fails
            pass
    # Courier sets these in every process: here, once, rather than in each fork (glibc
    # consolidates the heap's free chunks when an option is set: 0.5 MB of pages per fork).
    courier.retain_freed_memory()
    fork_heap.take_free_chunks()
    # Objects that exist now are shared by every fork: keep the collector from scanning them,
    # which would touch (and so copy) their pages in each node.
    gc.freeze()


if __name__ == "__main__":
    main()
