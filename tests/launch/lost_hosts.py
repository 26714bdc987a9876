"""What the lost-host tests share (launch/slurm/test_lost_host.py, launch/ray/test_lost_node.py):
a stateful node, a program of them, a host killed whole, and the check that its nodes came
back elsewhere with their state while the others never noticed."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import launchpad as lp
from tests.cluster.netns import Host, HostNetwork, wait_gone

# Where a lost node comes back within: its engine must first see it gone (a Slurm agent's
# ping, Ray's health checks), then the restart starts it elsewhere.
BACK_WITHIN_SECS = 90.0


class Counter:
    """Counts its ticks; the count is its state (lp.StatePolicy), saved every half second."""

    def __init__(self):
        self.count = 0
        self.saved = -1
        self._lock = threading.Lock()

    def tick(self) -> int:
        with self._lock:
            self.count += 1
            return self.count

    def last_saved(self) -> int:
        return self.saved

    def save_state(self) -> int:
        with self._lock:
            self.saved = self.count
            return self.count

    def restore_state(self, count: int) -> None:
        self.count = self.saved = count


def program(name: str, actors: int) -> lp.Program:
    """A learner and `actors` actors, all Counters that keep their state; actors restart."""
    made = lp.Program(name)
    state = lp.StatePolicy(every_secs=0.5)
    with made.group("learner", state=state):
        made.add_node(lp.CourierNode(Counter))
    with made.group("actor", state=state, restart=lp.RestartPolicy(max_restarts=2)):
        for _ in range(actors):
            made.add_node(lp.CourierNode(Counter))
    return made


def client(launched: lp.Program, name: str):
    label, _, index = name.partition("/")
    return launched.groups[label][int(index)].create_handle().dereference()


def ticked_and_saved(controller, launched: lp.Program) -> dict:
    """Every node started, ticked 5 times and its count saved: each node's client."""
    names = [node.name for node in launched.get_all_nodes()]
    for name in names:
        assert controller.wait_for_started(name, BACK_WITHIN_SECS), name
    clients = {name: client(launched, name) for name in names}
    for name in names:
        assert [clients[name].tick() for _ in range(5)] == [1, 2, 3, 4, 5]
    for name in names:
        _until(lambda name=name: clients[name].last_saved() == 5, f"{name} saved")
    return clients


def lose_host(controller, launched: lp.Program, clients: dict, network: HostNetwork,
              host: Host) -> list[str]:
    """Kills `host` whole, then checks that its nodes came back on another host with their
    state, and that the others never stopped; returns the names of those that moved."""
    hosts = controller.hosts()
    moving = [name for name in clients if hosts[name] == host.address]
    while pids := network.pids(host):  # every process of it at once, as a machine that dies
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # ended since it was listed
                os.kill(pid, signal.SIGKILL)
        wait_gone(pids, 5.0)
    for name in moving:
        assert controller.wait_for_restarts(name, 1, BACK_WITHIN_SECS), name
        assert controller.wait_for_started(name, BACK_WITHIN_SECS), name
        assert controller.hosts()[name] != host.address
        assert client(launched, name).tick() == 6  # its state, restored
    for name in set(clients) - set(moving):
        assert clients[name].tick() == 6  # never stopped
        assert controller.restarts().get(name, 0) == 0
    assert controller.failure is None
    return moving


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + BACK_WITHIN_SECS
    while not condition():
        assert time.monotonic() < deadline, f"not within {BACK_WITHIN_SECS:g}s: {what}"
        time.sleep(0.1)  # polls a node's answer: the state store has no event to wait on
