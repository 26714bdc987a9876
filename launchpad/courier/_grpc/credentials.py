"""gRPC's credentials of a `TLS` (tls.py): what a server presents and requires, and what a
client trusts and presents. Mutual: each end proves itself with a certificate of the CA."""

from __future__ import annotations

import grpc

from launchpad.courier.tls import TLS


def server_credentials(tls: TLS) -> grpc.ServerCredentials:
    """A server's credentials: presents `tls.cert`, requires a client certificate from
    `tls.ca`."""
    return grpc.ssl_server_credentials(
        [(tls.key, tls.cert)], root_certificates=tls.ca, require_client_auth=True)


def channel_credentials(tls: TLS) -> grpc.ChannelCredentials:
    """A client's credentials: trusts servers certified by `tls.ca`, presents `tls.cert`."""
    return grpc.ssl_channel_credentials(
        root_certificates=tls.ca, private_key=tls.key, certificate_chain=tls.cert)
