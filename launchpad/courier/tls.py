"""TLS with mutual authentication for courier: the certificates of one program.

Between hosts, courier's streams can travel over TLS where both ends prove themselves: the
server presents a certificate its clients check against the program's CA, and it requires
each client to present one from the same CA. The program's secret token is still checked on
top, as without TLS (see channels.py): TLS says "a peer of this CA", the token "a peer of
this launch".

Nodes move between hosts and addresses when they restart, so a certificate names the program,
not an address: every node presents the same leaf certificate (valid for both ends of a
connection), and clients verify the server's certificate against `server_name` whatever
address they dialled. `TLS.generate` makes a fresh CA and that leaf for one launch; the CA's
own key is thrown away, so nothing else can ever be certified by it.

A `TLS` holds its PEM bytes, not paths, so it pickles into a node's private spec file and
works on a host that has none of the launcher's files. Its repr shows only `server_name`:
never the key, and no kilobytes of certificates in a log.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import os
import re
from typing import Union

PemSource = Union[bytes, str, os.PathLike]

# Hosts' clocks differ: a certificate made on one is valid on the others from a while before.
_CLOCK_SKEW = datetime.timedelta(hours=1)


@dataclasses.dataclass(frozen=True, init=False)
class TLS:
    """The CA, certificate and private key a courier server and its clients use for TLS.

    Args:
      ca: the CA certificate both ends check the other's certificate against.
      cert: this end's certificate (chain), issued by `ca`.
      key: the private key of `cert`.
      server_name: the name clients require in the server's certificate (its subject
        alternative name), whatever address they connect to.

    Each of `ca`, `cert` and `key` is PEM bytes or the path of a PEM file, read at once.
    """

    ca: bytes = dataclasses.field(repr=False)
    cert: bytes = dataclasses.field(repr=False)
    key: bytes = dataclasses.field(repr=False)
    server_name: str = "launchpad"

    def __init__(self, ca: PemSource, cert: PemSource, key: PemSource,
                 server_name: str = "launchpad"):
        if not server_name:
            raise ValueError("TLS server_name must not be empty")
        object.__setattr__(self, "ca", _read_pem("ca", ca, "CERTIFICATE"))
        object.__setattr__(self, "cert", _read_pem("cert", cert, "CERTIFICATE"))
        object.__setattr__(self, "key", _read_pem("key", key, "PRIVATE KEY"))
        object.__setattr__(self, "server_name", server_name)

    @classmethod
    def generate(cls, server_name: str = "launchpad", valid_days: int = 365) -> TLS:
        """Makes a fresh CA and one leaf certificate it issues, for both servers and clients.

        The leaf names `server_name` (DNS subject alternative name) and may authenticate
        either end of a connection; keys are EC P-256. The CA's key is not kept. Needs the
        `cryptography` package (`pip install 'launchpad-next[tls]'`).
        """
        if valid_days < 1:
            raise ValueError(f"valid_days must be >= 1, got {valid_days}")
        try:
            from cryptography import x509
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
        except ImportError as e:
            raise ImportError("TLS.generate needs the 'cryptography' package: "
                              "pip install 'launchpad-next[tls]'") from e

        def name(common_name: str) -> x509.Name:
            return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

        def key_usage(**granted: bool) -> x509.KeyUsage:
            usages = ("digital_signature", "content_commitment", "key_encipherment",
                      "data_encipherment", "key_agreement", "key_cert_sign", "crl_sign",
                      "encipher_only", "decipher_only")
            return x509.KeyUsage(**{usage: granted.get(usage, False) for usage in usages})

        now = datetime.datetime.now(datetime.timezone.utc)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        leaf_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = name(f"{server_name} CA")

        def issue(subject: x509.Name, public_key, extensions) -> x509.Certificate:
            builder = (x509.CertificateBuilder()
                       .subject_name(subject).issuer_name(ca_name).public_key(public_key)
                       .serial_number(x509.random_serial_number())
                       .not_valid_before(now - _CLOCK_SKEW)
                       .not_valid_after(now + datetime.timedelta(days=valid_days)))
            for extension, critical in extensions:
                builder = builder.add_extension(extension, critical=critical)
            return builder.sign(ca_key, hashes.SHA256())

        ca_cert = issue(ca_name, ca_key.public_key(), [
            (x509.BasicConstraints(ca=True, path_length=0), True),
            (key_usage(key_cert_sign=True, crl_sign=True), True),
            (x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False),
        ])
        leaf_cert = issue(name(server_name), leaf_key.public_key(), [
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (key_usage(digital_signature=True), True),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                    ExtendedKeyUsageOID.CLIENT_AUTH]), False),
            (x509.SubjectAlternativeName([x509.DNSName(server_name)]), False),
            (x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False),
        ])
        pem = serialization.Encoding.PEM
        return cls(
            ca=ca_cert.public_bytes(pem), cert=leaf_cert.public_bytes(pem),
            key=leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()),
            server_name=server_name)


def _read_pem(field: str, source: PemSource, kind: str) -> bytes:
    """The PEM bytes of `source` (bytes, or a file's path) holding a `kind` block (e.g.
    "CERTIFICATE", or "PRIVATE KEY" which matches "EC PRIVATE KEY" too); errors name the
    field and the path."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, origin = bytes(source), "the bytes given"
    elif isinstance(source, (str, os.PathLike)):
        origin = os.fspath(source)
        try:
            with open(origin, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"TLS {field}: no such file: {origin}") from None
        except OSError as e:
            raise OSError(f"TLS {field}: cannot read {origin}: {e.strerror or e}") from e
    else:
        raise TypeError(f"TLS {field} must be PEM bytes or the path of a PEM file, "
                        f"got {type(source).__name__}")
    if not re.search(rb"-----BEGIN [A-Z0-9 ]*" + kind.encode() + rb"-----", data):
        raise ValueError(f"TLS {field}: {origin} is not PEM (no '-----BEGIN {kind}-----' line)")
    return data


def tls_tag(tls: TLS | None) -> str:
    """What tells one TLS from any other (and from none): a fast path is only taken by a
    client whose TLS is the server's own (as a program's nodes share one); any other goes
    through gRPC, whose handshake accepts or refuses it."""
    if tls is None:
        return ""
    kind = f"{type(tls).__module__}.{type(tls).__qualname__}|{tls.server_name}|".encode()
    return hashlib.sha256(kind + tls.ca + tls.cert).hexdigest()
