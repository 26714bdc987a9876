"""A real Ray cluster (a head and worker nodes, each on its own simulated host), for tests.

Why: launching on Ray is only shown to work by launching on Ray. Each Ray node is a
`ray start --block` child of the test process, below reaper.py (tests/cluster/daemons.py), so
it is ended by signalling exactly that process and what runs below it - never `ray stop`,
which ends every Ray process on the machine. The head runs in the root namespace on the
network's gateway address (where the launching process runs, as on a cluster's login node);
worker K inside host K's network namespace (netns.HostNetwork), so actors on different nodes
have different addresses and talk over TCP through the bridge.

Every port is chosen free, none of Ray's defaults (6379, 8265, ...) is used, and every node
has a temporary folder of its own, short enough for Ray's Unix sockets (107 bytes), removed
at the end. Per ENGINES.md: a `ray start` still starting ignores SIGTERM, so stop() follows
with SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import Sequence

from tests.cluster.daemons import descendants, free_port, tail, under_reaper, wait_for
from tests.cluster.netns import Host, HostNetwork, end_processes

_READY_TIMEOUT_SECS = 60.0
_WORKER_PORTS = 200  # ports for each node's worker processes, one block below the ephemeral
_BLOCKS = range(20000, 32000, _WORKER_PORTS)  # range, so no outgoing connection takes one


def ray_unavailable() -> str | None:
    """Why a Ray cluster cannot run here, or None if it can."""
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed (the `ray` extra: pip install 'launchpad-next[ray]')"
    if not os.access(_ray_command(), os.X_OK):
        return f"Ray's `ray` command is not beside this interpreter ({_ray_command()})"
    return None


def auth_env(token_path: str) -> dict[str, str]:
    """The variables that make Ray (nodes and clients) use the token in `token_path`."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token_path}


def make_token(path: str) -> None:
    """Writes a fresh token to `path` (readable by this user only) unless it exists."""
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))


def _free_block(address: str, size: int) -> int:
    """The first port of `size` consecutive ports free on `address` (of _BLOCKS, in random
    order)."""
    for first in random.sample(list(_BLOCKS), len(_BLOCKS)):
        sockets = []
        try:
            for port in range(first, first + size):
                sockets.append(socket.socket())
                sockets[-1].bind((address, port))
            return first
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError(f"no {size} consecutive free ports on {address}")


def _ray_command() -> str:
    return os.path.join(os.path.dirname(sys.executable), "ray")


class RayCluster:
    """A head on the gateway and one Ray node per host of `network` (see the module doc).

    Args:
      work_dir: where the nodes' logs go.
      network: the simulated hosts; each gets a worker node.
      auth_token_path: the file of the cluster's token (Ray's token authentication), made
        here if missing. Ray reads its authentication settings once, when first imported, so
        a test process must have `auth_env(path)` in its environment before it imports Ray.
      cpus_per_node: the CPUs each node offers (whatever the machine has).
    """

    def __init__(self, work_dir: str, network: HostNetwork, auth_token_path: str,
                 cpus_per_node: int = 4):
        self.work_dir = work_dir
        self._auth = auth_env(auth_token_path)
        self.network = network
        self.cpus_per_node = cpus_per_node
        self.address = ""  # the head's GCS address, "ip:port" (RAY_ADDRESS)
        self.node_addresses: list[str] = []  # the head's, then each worker's
        self._processes: list[subprocess.Popen] = []
        self._temp_dirs: list[str] = []

    def __enter__(self) -> RayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def env(self) -> dict[str, str]:
        """What a client of this cluster needs in its environment: the head's address and
        the cluster's token (Ray's token authentication, on for this cluster)."""
        return {"RAY_ADDRESS": self.address, **self._auth}

    def start(self) -> RayCluster:
        """Starts the head, then the workers, and returns once every node is alive (within
        60 s, or it stops what it started and raises with the nodes' logs)."""
        os.makedirs(self.work_dir, exist_ok=True)
        make_token(self._auth["RAY_AUTH_TOKEN_PATH"])
        gateway = self.network.gateway
        self.address = f"{gateway}:{free_port(gateway)}"
        try:
            self._start_node("head", None, ["--head", f"--port={self.address.split(':')[1]}"])
            for host in self.network.hosts:
                self._start_node(host.name, host, [f"--address={self.address}"])
            wait_for(self._all_alive, _READY_TIMEOUT_SECS, "every Ray node alive",
                     f"Ray cluster in {self.work_dir}", self.logs)
        except BaseException:
            with contextlib.suppress(RuntimeError, OSError, subprocess.SubprocessError):
                self.stop()
            raise
        return self

    def stop(self) -> None:
        """Ends every Ray process this cluster started (SIGTERM to each node's `ray start`
        and what runs below it, a grace, SIGKILL) and removes the temporary folders."""
        errors: list[Exception] = []
        for process in reversed(self._processes):  # workers first, then the head
            try:
                end_processes(lambda p=process: [*descendants(p.pid), p.pid]
                              if p.poll() is None else [], grace=5.0)
                process.wait(timeout=10)
            except (RuntimeError, OSError, subprocess.SubprocessError) as error:
                errors.append(error)
        for folder in self._temp_dirs:
            shutil.rmtree(folder, ignore_errors=True)
        self._processes, self._temp_dirs, self.node_addresses = [], [], []
        if errors:
            raise errors[0]

    def logs(self) -> str:
        """The last lines of every node's output (for error messages)."""
        names = sorted(n for n in os.listdir(self.work_dir) if n.endswith(".out"))
        return "".join(f"--- {n}\n{tail(os.path.join(self.work_dir, n))}" for n in names)

    def _start_node(self, label: str, host: Host | None, role: Sequence[str]) -> None:
        address = host.address if host else self.network.gateway
        temp_dir = f"/tmp/lpray-{os.getpid()}-{len(self._temp_dirs)}"
        shutil.rmtree(temp_dir, ignore_errors=True)
        self._temp_dirs.append(temp_dir)
        # A host's namespace has ports of its own, all free: any unused number serves there.
        gateway = self.network.gateway
        names = ["node-manager-port", "object-manager-port", "dashboard-agent-listen-port",
                 "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port"]
        # The head's headless dashboard starts even when not included: its port is moved.
        head = ["--include-dashboard=false", "dashboard-port"] if host is None else []
        first_worker_port = _free_block(gateway, _WORKER_PORTS)
        workers = range(first_worker_port, first_worker_port + _WORKER_PORTS)
        ports: dict[str, int] = {}
        taken = {int(self.address.rsplit(":", 1)[1])}  # the head's GCS port
        for name in names + head[1:]:  # each free, and none twice or among the workers'
            while (port := free_port(gateway)) in workers or port in taken:
                pass
            ports[name] = port
            taken.add(port)
        argv = [_ray_command(), "start", "--block", *role, f"--node-ip-address={address}",
                f"--temp-dir={temp_dir}", f"--num-cpus={self.cpus_per_node}",
                f"--object-store-memory={80 * 2**20}", *head[:1], "--disable-usage-stats",
                f"--min-worker-port={first_worker_port}",
                f"--max-worker-port={workers[-1]}",
                *(f"--{name}={port}" for name, port in ports.items())]
        if host is not None:
            argv = self.network.exec_argv(host, argv)
        env = {**{k: v for k, v in os.environ.items()
                  if k not in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}, **self._auth}
        with open(os.path.join(self.work_dir, f"{label}.out"), "wb") as out:
            self._processes.append(subprocess.Popen(
                under_reaper(argv), env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, cwd=self.work_dir))
        self.node_addresses.append(address)

    def _all_alive(self) -> bool:
        for process in self._processes:
            if process.poll() is not None:
                raise RuntimeError(f"a `ray start` exited ({process.returncode})")
        return set(self.node_addresses) <= set(self.alive_nodes())

    def alive_nodes(self) -> list[str]:
        """The addresses of the nodes the head counts alive."""
        return self._ask("[n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']]") or []

    def named_actors(self) -> list[dict]:
        """The named actors alive in the cluster, in every namespace."""
        return self._ask("ray.util.list_named_actors(all_namespaces=True)")

    def _ask(self, expression: str):
        """`expression`'s value (JSON), computed by a driver of its own, so that this
        process's own Ray connection stays the launches'; None if the cluster cannot tell."""
        script = (f"import json, ray; ray.init(address={self.address!r}, "
                  f"log_to_driver=False, logging_level='error'); print(json.dumps({expression}))")
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                timeout=60, stdin=subprocess.DEVNULL,
                                env={**os.environ, **self._auth})
        if result.returncode != 0:
            return None
        return json.loads(result.stdout.strip().splitlines()[-1])
