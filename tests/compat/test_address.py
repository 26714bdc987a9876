"""Launchpad's `lp.Address()`: allocated with `node.allocate_address(address)`, the same
object resolves in the node that owns it and in every node it was passed to; outside a
launch it resolves to what an address builder builds."""

from __future__ import annotations

import os
import pickle
import socket
import threading

import pytest

import launchpad as lp


class _Gate:
    """Opened by the owner once its server listens (the port is picked before it binds)."""

    def __init__(self):
        self._open = threading.Event()

    def open(self):
        self._open.set()

    def wait(self):
        return self._open.wait(20)


def _serve_on(address, gate, box):
    """A server of its own on the address's port (ml-metrics' pattern)."""
    port = lp.get_port_from_address(address.resolve())
    with socket.create_server(("127.0.0.1", port)) as server:
        box.put(("owner", address.resolve()))
        gate.open()
        connection, _ = server.accept()
        connection.sendall(b"hello")
        connection.close()
        lp.wait_for_stop()


def _connect_to(address, gate, box):
    host, port = address.resolve().rsplit(":", 1)
    assert gate.wait()
    with socket.create_connection((host, int(port)), timeout=20) as connection:
        box.put(("peer", address.resolve(), connection.recv(5)))


def test_the_same_address_object_resolves_in_its_node_and_in_those_it_was_passed_to(
        launch, box):
    results = box()
    address = lp.Address()
    program = lp.Program("addresses")
    gate = program.add_node(lp.CourierNode(_Gate), label="gate")
    server = lp.PyNode(_serve_on, address, gate, results)
    server.allocate_address(address)
    program.add_node(server, label="server")
    program.add_node(lp.PyNode(_connect_to, address, gate, results), label="peer")
    launch(program)
    got = dict((value[0], value[1:]) for value in (results.get(), results.get()))
    assert got["peer"] == (got["owner"][0], b"hello")


def test_an_address_belongs_to_one_node():
    address = lp.Address("web")
    lp.PyNode(int).allocate_address(address)
    with pytest.raises(ValueError, match="belongs to .* already"):
        lp.PyNode(int).allocate_address(address)


def test_unnamed_addresses_get_names_of_their_own_and_names_must_differ():
    node = lp.PyNode(int)
    first, second = lp.Address(), lp.Address()
    node.allocate_address(first)
    node.allocate_address(second)
    assert (first.name, second.name) == ("lp0", "lp1")
    with pytest.raises(ValueError, match="already has an address named 'web'"):
        node.allocate_address("web")
        node.allocate_address(lp.Address("web"))


def test_an_address_of_no_node_or_not_launched_cannot_be_resolved_and_says_why():
    with pytest.raises(RuntimeError, match="belongs to no node"):
        lp.Address().resolve()
    address = lp.PyNode(int).allocate_address("web")
    with pytest.raises(RuntimeError, match="in no program yet"):
        address.resolve()


def test_a_bound_address_resolves_to_what_its_builder_builds_and_pickles_so():
    address = lp.Address()
    address.bind(lp.SimpleLocalAddressBuilder())
    host, port = address.resolve().split(":")
    assert host == "localhost" and int(port) > 0
    assert pickle.loads(pickle.dumps(address)).resolve() == address.resolve()
    with pytest.raises(TypeError, match="address builder"):
        address.bind("localhost:1")


def test_the_port_of_an_address_also_of_launchpads_named_ports(monkeypatch):
    assert lp.get_port_from_address("localhost:8080") == 8080
    assert lp.get_port_from_address("[::1]:9") == 9
    monkeypatch.setenv("LP_PORT_web", "4242")
    assert lp.get_port_from_address("host:web") == 4242
    monkeypatch.delenv("LP_PORT_web")
    with pytest.raises(ValueError, match=r"LP_PORT_web"):
        lp.get_port_from_address("host:web")
    assert os.environ.get("LP_PORT_web") is None
