"""Simulated hosts on one machine: one Linux network namespace per host, joined by a bridge.

Why: a distributed program must be tested where its processes really are on different hosts,
with different addresses, and reach each other over TCP. A network namespace gives a process its
own interfaces and address while it still sees the same filesystem (the interpreter, the project,
/tmp), which stands in for a cluster's shared filesystem.

Layout: a bridge in the root namespace holds the gateway address (`10.213.X.1/24`), where the
launching process and any controller run; host K is a namespace with a veth `eth0` into that
bridge, address `10.213.X.(K+1)`, loopback up and a default route via the gateway. `ip_forward`
is left as it is (0), so nothing is routed off the machine. Each namespace gets
`/etc/netns/NAME/resolv.conf` pointing at loopback (a lookup there fails at once instead of
hanging for the unreachable resolver) and a `hosts` file naming every host.

The /24 is claimed with an abstract Unix socket (released when the process ends, whatever way it
ends) and only if no address or route of the root namespace is in it, so concurrent sessions on
one machine take different ranges. Every name made here carries this process's pid.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import select
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

_NETNS_ETC = "/etc/netns"
_SECOND_OCTET = "10.213"
_counter = itertools.count()


@dataclass(frozen=True)
class Host:
    """One simulated host: the network namespace `name`, reached at `address`."""

    name: str
    address: str
    veth: str  # the root namespace's end of its link into the bridge


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed: {result.stderr.strip()}")
    return result


def namespace_pids(name: str) -> list[int]:
    """Pids of the live processes inside network namespace `name` (none if it is gone)."""
    result = _ip("netns", "pids", name, check=False)
    pids = [int(word) for word in result.stdout.split() if word.isdigit()]
    return [pid for pid in pids if pid != os.getpid()]  # (should we be inside it)


def wait_gone(pids: Iterable[int], timeout: float) -> set[int]:
    """Waits (on pidfds, an event) up to `timeout` s for `pids` to end; returns those left."""
    fds: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):  # already gone
            fds[os.pidfd_open(pid)] = pid
    deadline = time.monotonic() + timeout
    try:
        while fds and (left := deadline - time.monotonic()) > 0:
            for fd in select.select(list(fds), [], [], left)[0]:
                del fds[fd]
                os.close(fd)
        return set(fds.values())
    finally:
        for fd in fds:
            os.close(fd)


def _signal(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def end_processes(list_pids: Callable[[], list[int]], grace: float = 5.0,
                  timeout: float = 10.0) -> None:
    """Ends every process `list_pids()` names: SIGTERM, up to `grace` s to end, then SIGKILL
    (listed again, for what started meanwhile) until none is left; raises after `timeout` s more.

    Why both: slurmd's SIGTERM does not end the job steps it started, and they may ignore it.
    """
    pids = list_pids()
    _signal(pids, signal.SIGTERM)
    wait_gone(pids, grace)
    deadline = time.monotonic() + timeout
    while pids := list_pids():
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes still alive after SIGKILL: {sorted(pids)}")
        _signal(pids, signal.SIGKILL)
        wait_gone(pids, min(1.0, max(0.0, deadline - time.monotonic())))


class HostNetwork:
    """`count` simulated hosts (network namespaces) on one bridge; see the module docstring.

    Use as a context manager, or call start() and stop(). `gateway`, `subnet` and `hosts` are
    set by start().
    """

    def __init__(self, count: int) -> None:
        if not 1 <= count <= 250:
            raise ValueError(f"count must be in 1..250, not {count}")
        self.count = count
        # Interface names must fit 15 characters: "lp" + pid in hex (<= 6) + a counter.
        self.prefix = f"lp{os.getpid():x}{next(_counter)}"
        self.bridge = f"{self.prefix}b"
        self.gateway = ""
        self.subnet = ""
        self.hosts: list[Host] = []
        self._claim: socket.socket | None = None
        self._names = [f"{self.prefix}h{k}" for k in range(1, count + 1)]

    def __enter__(self) -> HostNetwork:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def exec_argv(self, host: Host, argv: Sequence[str]) -> list[str]:
        """The command line that runs `argv` on `host` (inside its namespace)."""
        return ["ip", "netns", "exec", host.name, *argv]

    def pids(self, host: Host | None = None) -> list[int]:
        """Live processes inside `host`'s namespace, or inside all of this network's."""
        names = [host.name] if host else [h.name for h in self.hosts]
        return [pid for name in names for pid in namespace_pids(name)]

    def start(self) -> HostNetwork:
        """Makes the bridge and the namespaces; on failure, removes what it made and raises."""
        if self._claim is not None:
            return self
        try:
            third = self._claim_subnet()
            network = ipaddress.ip_network(f"{_SECOND_OCTET}.{third}.0/24")
            self.subnet = str(network)
            self.gateway = str(network[1])
            self._check_names_free()
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for k, name in enumerate(self._names, start=1):
                self.hosts.append(Host(name, str(network[k + 1]), f"{self.prefix}v{k}"))
            for host in self.hosts:
                self._add_host(host)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Removes everything start() made (idempotent; also after a partial start). Any
        process still inside a namespace is ended first: the namespaces are this network's."""
        if self._claim is None:
            return
        existing = [name for name in self._names if os.path.exists(f"/run/netns/{name}")]
        try:
            end_processes(lambda: [p for n in existing for p in namespace_pids(n)], grace=1.0)
        finally:
            for name in existing:
                _ip("netns", "del", name, check=False)
            for name in self._names:
                shutil.rmtree(os.path.join(_NETNS_ETC, name), ignore_errors=True)
            with contextlib.suppress(OSError):
                os.rmdir(_NETNS_ETC)  # only if empty: others' folders stay
            for k in range(1, self.count + 1):  # gone with its namespace, but for a partial start
                if _link_exists(f"{self.prefix}v{k}"):
                    _ip("link", "del", f"{self.prefix}v{k}", check=False)
            if _link_exists(self.bridge):
                _ip("link", "del", self.bridge, check=False)
            self.hosts = []
            self._claim.close()
            self._claim = None

    def _add_host(self, host: Host) -> None:
        _ip("netns", "add", host.name)
        folder = os.path.join(_NETNS_ETC, host.name)
        os.makedirs(folder)
        with open(os.path.join(folder, "resolv.conf"), "w") as f:
            f.write("nameserver 127.0.0.1\n")
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback",
                 f"{host.address} {socket.gethostname()}", f"{self.gateway} {self.prefix}gw"]
        with open(os.path.join(folder, "hosts"), "w") as f:
            f.write("\n".join(lines + [f"{h.address} {h.name}" for h in self.hosts]) + "\n")
        _ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.name)
        _ip("link", "set", host.veth, "master", self.bridge, "up")
        _ip("-n", host.name, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", host.name, "link", "set", "eth0", "up")
        _ip("-n", host.name, "link", "set", "lo", "up")
        _ip("-n", host.name, "route", "add", "default", "via", self.gateway)

    def _claim_subnet(self) -> int:
        """Picks X for 10.213.X.0/24, starting from one derived from the pid: free of this
        machine's addresses and routes, and not claimed by another live process."""
        used = _used_networks()
        start = os.getpid() % 250
        for offset in range(250):
            third = (start + offset) % 250 + 2
            candidate = ipaddress.ip_network(f"{_SECOND_OCTET}.{third}.0/24")
            if any(candidate.overlaps(network) for network in used):
                continue
            claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                claim.bind(f"\0launchpad-tests-hostnetwork-{_SECOND_OCTET}.{third}")
            except OSError:
                claim.close()
                continue
            self._claim = claim
            return third
        raise RuntimeError(f"no free /24 in {_SECOND_OCTET}.0.0/16")

    def _check_names_free(self) -> None:
        taken = [n for n in self._names if os.path.exists(f"/run/netns/{n}")]
        taken += [n for n in (self.bridge, *(f"{self.prefix}v{k}" for k in
                  range(1, self.count + 1))) if _link_exists(n)]
        if taken:
            raise RuntimeError(f"names already in use (left by a crashed run?): {taken}")


def _used_networks() -> list[ipaddress.IPv4Network]:
    """The root namespace's IPv4 addresses (as their networks) and routes narrower than /8."""
    words = _ip("-4", "-o", "addr").stdout.split() + _ip("-4", "route").stdout.split()
    found = []
    for word in words:
        with contextlib.suppress(ValueError):
            network = ipaddress.ip_network(word, strict=False)
            if network.prefixlen > 8:
                found.append(network)
    return found


def _link_exists(name: str) -> bool:
    return os.path.exists(f"/sys/class/net/{name}")
