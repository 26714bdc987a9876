"""What a user reads when a call names no method (issue 44): the node, as label/index, the
method the caller likely meant, and every method the node serves."""

from __future__ import annotations

import pytest

import launchpad as lp
from launchpad import courier


class Server:
    def ping(self) -> str:
        return "pong"

    def put(self, value: int) -> int:
        return value


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_an_unknown_method_names_the_node_and_the_method_meant(launch_type):
    program = lp.Program("typo")
    handle = program.add_node(lp.CourierNode(Server), label="server")
    controller = lp.launch(program, launch_type=launch_type)
    try:
        client = handle.dereference()
        with pytest.raises(lp.courier.UnknownMethodError) as raised:
            client.pnig()
    finally:
        controller.stop()
        controller.wait(timeout=60)
    assert str(raised.value) == ("method pnig not found: node server/0 has no method 'pnig' "
                                 "(did you mean 'ping'?); its methods are: ping, put")


def test_a_server_without_a_name_is_named_by_its_address_and_nothing_close_is_offered():
    server = courier.Server(Server())
    address = server.start()
    client = courier.Client(address)
    try:
        with pytest.raises(courier.UnknownMethodError) as raised:
            client.restart()
    finally:
        courier.close(client)
        server.stop()
    assert str(raised.value) == (f"method restart not found: courier server at {address} has "
                                 "no method 'restart'; its methods are: ping, put")
