"""Courier over TLS with mutual authentication: certificates, calls, the token, and refusals.

Every test makes its own CA and certificates with `TLS.generate`; a second `generate` is a
CA the server does not trust.
"""

from __future__ import annotations

import pickle
import sys
import time

import grpc
import numpy as np
import pytest

from launchpad import courier
from launchpad.courier import TLS
from launchpad.courier._grpc import credentials
from launchpad.courier._shared_memory import lanes
from tests.courier.conftest import TOKEN, Service, assert_reconnects
from tests.hostile import MkdirOnUnpickle

x509 = pytest.importorskip("cryptography.x509")

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.usefixtures("no_leaked_threads", "courier_transport")]

# A refused connection is retried until connect_timeout: short here, so a refusal shows soon.
CONNECT_TIMEOUT = 1.0
# How long past connect_timeout a refused call may take to fail: bounded, never a hang.
SLACK = 4.0


class WithoutCertificate(TLS):
    """A client's TLS that trusts the CA but presents no certificate of its own (its gRPC
    credentials are made so by `_without_certificate_presents_none`)."""


@pytest.fixture(autouse=True)
def _without_certificate_presents_none(monkeypatch):
    made = credentials.channel_credentials

    def channel_credentials(tls: TLS) -> grpc.ChannelCredentials:
        if isinstance(tls, WithoutCertificate):
            return grpc.ssl_channel_credentials(root_certificates=tls.ca)
        return made(tls)

    monkeypatch.setattr(credentials, "channel_credentials", channel_credentials)


@pytest.fixture(scope="module")
def tls() -> TLS:
    return TLS.generate()


@pytest.fixture
def server(serve, service, tls):
    return serve(service, token=TOKEN, tls=tls)


@pytest.fixture
def client(connect, server, tls):
    return connect(server, token=TOKEN, tls=tls)


# --- Certificates ---

def test_generate_makes_a_leaf_for_both_ends_naming_the_server_name():
    tls = TLS.generate(server_name="my-program", valid_days=2)
    leaf = x509.load_pem_x509_certificate(tls.cert)
    ca = x509.load_pem_x509_certificate(tls.ca)
    assert tls.server_name == "my-program"
    assert leaf.issuer == ca.subject
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["my-program"]
    usages = set(leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    assert usages == {x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                      x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH}
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    lifetime = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert 2 <= lifetime.days <= 3  # two days, from a little before now (clock skew)


def test_generate_without_cryptography_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cryptography", None)
    with pytest.raises(ImportError, match=r"pip install 'launchpad-next\[tls\]'"):
        TLS.generate()


def test_files_are_read_at_construction(tls, tmp_path):
    paths = {}
    for field in ("ca", "cert", "key"):
        paths[field] = tmp_path / f"{field}.pem"
        paths[field].write_bytes(getattr(tls, field))
    from_files = TLS(str(paths["ca"]), paths["cert"], paths["key"])
    for path in paths.values():
        path.unlink()  # read already: the files are no longer needed
    assert from_files == tls


def test_a_missing_file_is_named_with_its_field(tls, tmp_path):
    missing = tmp_path / "absent.pem"
    with pytest.raises(FileNotFoundError, match=f"TLS cert: no such file: {missing}"):
        TLS(tls.ca, missing, tls.key)


@pytest.mark.parametrize("field", ["ca", "cert", "key"])
def test_a_file_that_is_not_pem_is_named_with_its_field(tls, tmp_path, field):
    not_pem = tmp_path / "not.pem"
    not_pem.write_bytes(b"\x30\x82 DER, not PEM")
    sources = {"ca": tls.ca, "cert": tls.cert, "key": tls.key, field: not_pem}
    with pytest.raises(ValueError, match=f"TLS {field}: {not_pem} is not PEM"):
        TLS(**sources)


def test_a_certificate_given_as_the_key_is_refused(tls):
    with pytest.raises(ValueError, match="TLS key: .*PRIVATE KEY"):
        TLS(tls.ca, tls.cert, tls.cert)


def test_a_source_of_another_type_is_a_type_error(tls):
    with pytest.raises(TypeError, match="TLS ca must be PEM bytes or the path"):
        TLS(123, tls.cert, tls.key)


def test_repr_shows_no_key_and_pickling_keeps_everything(tls):
    assert repr(tls) == "TLS(server_name='launchpad')"
    assert pickle.loads(pickle.dumps(tls)) == tls


# --- Calls over TLS ---

def test_small_calls_and_remote_errors(client):
    assert client.add(2, 3) == 5
    assert client.ping() == "pong"
    with pytest.raises(KeyError):
        client.raise_key_error("missing")


@pytest.mark.parametrize("same_host_shortcut", ["1", "0"])
def test_a_1_mib_array_round_trips(connect, serve, service, tls, monkeypatch,
                                   same_host_shortcut):
    # With the shortcut off, the array travels through TLS itself, as between hosts.
    monkeypatch.setenv(lanes.ENV_SWITCH, same_host_shortcut)
    client = connect(serve(service, token=TOKEN, tls=tls), token=TOKEN, tls=tls)
    array = np.arange(1 << 18, dtype=np.float32)
    np.testing.assert_array_equal(client.identity(array), array)


def test_futures(client):
    futures = [client.futures.add(i, 1) for i in range(50)]
    assert [f.result(timeout=10) for f in futures] == [i + 1 for i in range(50)]


def test_a_pickled_client_keeps_its_tls(client):
    assert pickle.loads(pickle.dumps(client)).ping() == "pong"


def test_a_server_restarted_on_the_same_port_is_reconnected_to(serve, connect, tls):
    first = serve(Service(), token=TOKEN, tls=tls)
    client = connect(first, token=TOKEN, tls=tls)
    assert client.ping() == "pong"
    first.stop()
    replacement = Service()
    serve(replacement, port=first.port, token=TOKEN, tls=tls)
    assert_reconnects(client)
    assert replacement.calls == 1


# --- The token, on top of TLS ---

@pytest.mark.parametrize("token", ["wrong-token", ""])
def test_a_certified_client_without_the_token_is_refused_before_unpickling(
        server, connect, tls, tmp_path, token):
    path = tmp_path / "created-by-unpickling"
    with pytest.raises(courier.PermissionDeniedError):
        connect(server, token=token, tls=tls).identity(MkdirOnUnpickle(str(path)))
    assert not path.exists()


# --- Refusals: each fails in bounded time, and the server serves others meanwhile ---

# What a refused client uses, made from the server's TLS.
REFUSED_CLIENTS = {
    "plaintext client": lambda tls: None,
    "certificate of another CA": lambda tls: TLS.generate(),
    "no client certificate": lambda tls: WithoutCertificate(tls.ca, tls.cert, tls.key),
    "another server name": lambda tls: TLS(tls.ca, tls.cert, tls.key, server_name="elsewhere"),
}


def _assert_unavailable_within(client: courier.Client, seconds: float) -> str:
    start = time.monotonic()
    with pytest.raises(courier.ServerUnavailableError) as info:
        client.ping()
    assert time.monotonic() - start < seconds
    return str(info.value)


@pytest.mark.parametrize("wait_for_ready", [True, False])
@pytest.mark.parametrize("case", list(REFUSED_CLIENTS))
def test_a_client_the_server_refuses_fails_and_others_are_served(
        server, connect, client, tls, case, wait_for_ready):
    assert client.ping() == "pong"
    refused = connect(server, token=TOKEN, tls=REFUSED_CLIENTS[case](tls),
                      connect_timeout=CONNECT_TIMEOUT, wait_for_ready=wait_for_ready)
    message = _assert_unavailable_within(refused, CONNECT_TIMEOUT + SLACK)
    assert server.address in message
    assert client.ping() == "pong"
    assert connect(server, token=TOKEN, tls=tls).add(1, 1) == 2


def test_a_refused_handshake_is_named_in_the_error(server, connect):
    refused = connect(server, token=TOKEN, tls=TLS.generate(), connect_timeout=CONNECT_TIMEOUT)
    message = _assert_unavailable_within(refused, CONNECT_TIMEOUT + SLACK)
    assert "over TLS" in message and "CERTIFICATE_VERIFY_FAILED" in message


@pytest.mark.parametrize("wait_for_ready", [True, False])
def test_a_tls_client_of_a_plaintext_server_fails(serve, connect, service, tls,
                                                  wait_for_ready):
    plaintext = serve(service, token=TOKEN)
    refused = connect(plaintext, token=TOKEN, tls=tls, connect_timeout=CONNECT_TIMEOUT,
                      wait_for_ready=wait_for_ready)
    message = _assert_unavailable_within(refused, CONNECT_TIMEOUT + SLACK)
    assert "handshake" in message.lower()
    assert connect(plaintext, token=TOKEN).ping() == "pong"


def test_a_key_that_is_not_the_certificates_fails_to_start_the_server(tls):
    mismatched = TLS(tls.ca, tls.cert, TLS.generate().key)
    server = courier.Server(Service(), tls=mismatched)
    try:
        with pytest.raises(courier.AddressInUseError, match="TLS key"):
            server.start()
    finally:
        server.stop()
