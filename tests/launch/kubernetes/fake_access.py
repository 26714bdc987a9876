"""Who asks the fake API (fake_api.py), and what they may do: as the real API decides it.

- A bearer token the test did not mint is the user's kubeconfig: it may do anything.
- A token minted for a ServiceAccount (`mint`, as the kubelet mounts one into a pod that runs
  as it) may do what the Roles bound to that account by RoleBindings of its namespace allow:
  each rule's apiGroups, resources and verbs (`*` matches all), in that namespace only.
  Anything else is 403 Forbidden, worded as the real API words it.
- The API serves HTTPS with a certificate for its address (an IP SAN), as a cluster's API
  does: a pod's in-cluster configuration trusts it through the CA it mounts (`ca_pem`).
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
import ssl
import tempfile
from typing import Any

_VERBS = {"POST": "create", "DELETE": "delete"}


def verb_of(method: str, named: bool, query: dict[str, str]) -> str:
    """The RBAC verb of a request."""
    if method == "GET":
        if query.get("watch", "").lower() == "true":
            return "watch"
        return "get" if named else "list"
    if method == "DELETE" and not named:
        return "deletecollection"
    return _VERBS.get(method, method.lower())


class Access:
    """The tokens minted, and the decisions (see the module doc)."""

    def __init__(self) -> None:
        self._accounts: dict[str, tuple[str, str]] = {}  # token -> (namespace, account)

    def mint(self, namespace: str, account: str) -> str:
        """A token of ServiceAccount `account` of `namespace`."""
        token = secrets.token_hex(16)
        self._accounts[token] = (namespace, account)
        return token

    def refusal(self, authorization: str, objects: dict[tuple[str, str, str], dict[str, Any]],
                group: str, plural: str, namespace: str, verb: str) -> str | None:
        """Why the request is refused (a 403's message), or None if it is allowed."""
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        if token not in self._accounts:
            return None  # the user's kubeconfig
        home, account = self._accounts[token]
        user = f"system:serviceaccount:{home}:{account}"
        if namespace == home and any(
                _allows(rule, group, plural, verb)
                for role in _roles_of(objects, home, account) for rule in role.get("rules", [])):
            return None
        return (f'{plural} is forbidden: User "{user}" cannot {verb} resource "{plural}" in '
                f'API group "{group}" in the namespace "{namespace}"')


def _roles_of(objects: dict[tuple[str, str, str], dict[str, Any]], namespace: str,
              account: str) -> list[dict[str, Any]]:
    roles = []
    for (plural, ns, _), binding in objects.items():
        if plural != "rolebindings" or ns != namespace:
            continue
        if any(s.get("kind") == "ServiceAccount" and s.get("name") == account
               and s.get("namespace", ns) == namespace for s in binding.get("subjects", [])):
            role = objects.get(("roles", namespace, binding["roleRef"]["name"]))
            if role is not None and binding["roleRef"]["kind"] == "Role":
                roles.append(role)
    return roles


def _allows(rule: dict[str, Any], group: str, plural: str, verb: str) -> bool:
    def has(key: str, value: str) -> bool:
        return any(item in ("*", value) for item in rule.get(key, []))

    return has("apiGroups", group) and has("resources", plural) and has("verbs", verb)


class Certificate:
    """A CA and a server certificate it issued for `address` (an IP), as PEM; `context()`
    serves with it."""

    def __init__(self, address: str):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        now = datetime.datetime.now(datetime.timezone.utc)
        ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
            ec.SECP256R1())

        def issued(subject: str, public_key, extensions) -> x509.Certificate:
            builder = (x509.CertificateBuilder()
                       .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                                   subject)]))
                       .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                                  "fake-api CA")]))
                       .public_key(public_key).serial_number(x509.random_serial_number())
                       .not_valid_before(now - datetime.timedelta(minutes=5))
                       .not_valid_after(now + datetime.timedelta(days=1)))
            for extension in extensions:
                builder = builder.add_extension(extension, critical=True)
            return builder.sign(ca_key, hashes.SHA256())

        ca = issued("fake-api CA", ca_key.public_key(),
                    [x509.BasicConstraints(ca=True, path_length=None)])
        server = issued("fake-api", key.public_key(), [
            x509.BasicConstraints(ca=False, path_length=None),
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))])])
        self.ca_pem = ca.public_bytes(serialization.Encoding.PEM)
        self.cert_pem = server.public_bytes(serialization.Encoding.PEM)
        self.key_pem = key.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption())

    def context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.NamedTemporaryFile() as cert, tempfile.NamedTemporaryFile() as key:
            cert.write(self.cert_pem)
            key.write(self.key_pem)
            cert.flush()
            key.flush()
            context.load_cert_chain(cert.name, key.name)
        return context
