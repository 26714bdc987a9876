"""The controller's address registry: lookups that wait for a node, time out naming it, and
fail at once once it has ended or the program stops; addresses forgotten with their unit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from launchpad.launch.runtime import errors
from launchpad.launch.runtime.controller.registry import AddressRegistry

# server/0 runs alone; inner/0 runs inside the colocation colo/0.
UNITS = {("server", 0): ("server", 0), ("inner", 0): ("colo", 0), ("colo", 0): ("colo", 0)}


@pytest.fixture
def registry():
    return AddressRegistry("prog", dict(UNITS))


def test_a_lookup_waits_for_the_node_and_a_known_address_answers_at_once(registry):
    waiting = registry.future("server", 0, "", timeout=10)
    assert not waiting.done()
    registry.register("server", 0, "", "127.0.0.1:1")
    assert waiting.result(1) == "127.0.0.1:1"
    assert registry.future("server", 0, "", timeout=10).result(0) == "127.0.0.1:1"


def test_a_node_that_does_not_register_in_time_is_named(registry):
    with pytest.raises(errors.NodeNotReadyError, match="server/0 of 'prog' did not register "
                                                       "its address 'metrics' within 0.05s"):
        registry.future("server", 0, "metrics", timeout=0.05).result(5)


def test_an_unknown_node_is_refused_listing_the_nodes(registry):
    with pytest.raises(errors.UnknownNodeError, match="no node ghost/0; its nodes are colo/0, "
                                                      "inner/0, server/0"):
        registry.future("ghost", 0, "", timeout=1)


def test_a_node_that_ended_fails_waiting_and_later_lookups(registry):
    waiting = registry.future("inner", 0, "", timeout=10)
    registry.node_ended(("colo", 0), "node colo/0 failed")
    with pytest.raises(errors.NodeEndedError, match="inner/0: node colo/0 failed"):
        waiting.result(1)
    with pytest.raises(errors.NodeEndedError, match="no longer running"):
        registry.future("inner", 0, "", timeout=10)


def test_a_restarting_node_is_waited_for_again(registry):
    registry.register("inner", 0, "", "127.0.0.1:1", "host-a")
    assert registry.host_of("inner", 0, "") == "host-a"
    registry.node_restarting(("colo", 0))  # forgets the addresses of what the unit holds
    assert registry.host_of("inner", 0, "") == ""
    waiting = registry.future("inner", 0, "", timeout=10)
    assert not waiting.done()
    registry.register("inner", 0, "", "127.0.0.1:2")
    assert waiting.result(1) == "127.0.0.1:2"


def test_once_stopping_only_known_addresses_are_answered(registry):
    registry.register("server", 0, "", "127.0.0.1:1")
    registry.program_stopping()
    assert registry.future("server", 0, "", timeout=1).result(0) == "127.0.0.1:1"
    with pytest.raises(errors.ProgramStoppedError, match="inner/0 will not be reachable"):
        registry.future("inner", 0, "", timeout=1)


def _identity_of_a_new_process(*prefix: str) -> str:
    return subprocess.run([*prefix, sys.executable, "-c",
                           "from launchpad import control; print(control.host_identity())"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_processes_of_one_host_and_network_namespace_share_a_host_identity():
    from launchpad import control
    assert _identity_of_a_new_process() == control.host_identity()


@pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace of its own needs root")
def test_a_process_in_another_network_namespace_has_another_host_identity():
    from launchpad import control
    other = _identity_of_a_new_process("unshare", "--net")
    assert other != control.host_identity()
    assert other.split("/")[0] == control.host_identity().split("/")[0]  # the same kernel
