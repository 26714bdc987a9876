"""Address parsing."""

import pytest

import launchpad as lp


@pytest.mark.parametrize("address, port", [
    ("localhost:1234", 1234), ("127.0.0.1:80", 80), ("[::1]:8080", 8080),
    ("unix:host:5", 5)])
def test_get_port_from_address(address, port):
    assert lp.get_port_from_address(address) == port


@pytest.mark.parametrize("address", ["localhost", "host:http", "", 1234])
def test_get_port_from_address_rejects_addresses_without_a_port(address):
    with pytest.raises(ValueError, match="port"):
        lp.get_port_from_address(address)
