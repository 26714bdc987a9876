"""Inside a Kubernetes pod: the program's secret from its mounted Secret, specs from its ConfigMap.

A node's pod runs `python -m launchpad.launch --pod-spec PATH` with `LAUNCHPAD_SECRET_DIR` set
(a path, never the secret itself), the controller's pod `--kubernetes-controller PATH`; both
find::

    $LAUNCHPAD_SECRET_DIR/token                    the program's token
    $LAUNCHPAD_SECRET_DIR/tls.ca, tls.crt, tls.key, tls.server-name
                                                   its TLS material, when it runs over TLS
    /var/run/launchpad/specs/<node>.spec           a node's spec (or the controller's), sealed

The kubelet mounts a volume's files as links into a timestamped folder of the volume
(`<key> -> ..data/<key>`, `..data -> ..2025_01_01_00_00_00.1`), so a file is read where its
links lead, and only if that is inside its volume and a regular file of root (the kubelet) or
of this user that no one else may write.

A ConfigMap is no secret, and whoever may edit ConfigMaps in the namespace could replace a
spec, which is a pickle. So each spec is sealed: an HMAC-SHA256 keyed by the program's token,
which only the Secret holds, precedes it, and nothing of a spec is unpickled before its seal
is checked (the node inside it, cloudpickled bytes, is unpickled later still, by the runner).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
from typing import NoReturn

from launchpad.courier import TLS
from launchpad.launch.runtime import private_files, spec
from launchpad.launch.runtime.errors import UnsafePathError

SECRET_DIR_ENV = "LAUNCHPAD_SECRET_DIR"
TOKEN_KEY = "token"
TLS_KEYS = {"ca": "tls.ca", "cert": "tls.crt", "key": "tls.key"}
SERVER_NAME_KEY = "tls.server-name"
_SEAL = b"launchpad-seal-v1 "


def seal(data: bytes, token: str) -> bytes:
    """`data` preceded by its HMAC-SHA256 keyed by `token` (see the module doc)."""
    mac = hmac.new(token.encode(), data, hashlib.sha256).hexdigest().encode()
    return _SEAL + mac + b"\n" + data


def unseal(sealed: bytes, token: str, path: str) -> bytes:
    """The data `seal(data, token)` sealed.

    Raises:
      UnsafePathError: `sealed` is not sealed with this program's token (named by `path`).
    """
    header, _, data = sealed.partition(b"\n")
    expected = seal(data, token).partition(b"\n")[0]
    if not hmac.compare_digest(header, expected):
        raise UnsafePathError(f"Refused {path}: it is not sealed with this program's token (it "
                              "was changed after launch, or belongs to another launch)")
    return data


def read_mounted(path: str) -> bytes:
    """The bytes of a file of a mounted volume (see the module doc for what is checked).

    Raises:
      FileNotFoundError: there is no such file.
      UnsafePathError: its links lead out of its volume, or it is not a regular file of
        root or of this user, or others may write to it.
    """
    volume = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    target = os.path.realpath(path)
    if os.path.commonpath([volume, target]) != volume:
        raise UnsafePathError(f"Refused to read {path}: it leads out of its volume {volume}, "
                              f"to {target}")
    return private_files.read_private(target, owners=(0, os.geteuid()))


def read_secret(folder: str) -> tuple[str, TLS | None]:
    """(the program's token, its TLS or None) from the mounted Secret at `folder`.

    Raises:
      FileNotFoundError: the Secret has no token (named).
      UnsafePathError: a file of it is refused (see `read_mounted`).
    """
    try:
        token = read_mounted(os.path.join(folder, TOKEN_KEY)).decode().strip()
    except FileNotFoundError:
        raise FileNotFoundError(f"No program token at {os.path.join(folder, TOKEN_KEY)}: "
                                f"{SECRET_DIR_ENV} must name the mounted launch Secret") from None
    if not os.path.exists(os.path.join(folder, TLS_KEYS["ca"])):
        return token, None
    pems = {field: read_mounted(os.path.join(folder, key)) for field, key in TLS_KEYS.items()}
    server_name = read_mounted(os.path.join(folder, SERVER_NAME_KEY)).decode().strip()
    return token, TLS(**pems, server_name=server_name)


def read_sealed(path: str, token: str) -> bytes:
    """The unsealed bytes of the mounted, sealed file at `path`."""
    return unseal(read_mounted(path), token, path)


def read_node_spec(path: str) -> spec.NodeSpec:
    """The spec of the node this pod runs, from its volumes ($LAUNCHPAD_SECRET_DIR names the
    Secret's). The variable goes, so the node's child processes, whose specs are private
    files, do not look there."""
    secret_dir = os.environ.pop(SECRET_DIR_ENV, "")
    if not secret_dir:
        raise FileNotFoundError(f"--pod-spec runs a node of a Kubernetes pod, and "
                                f"{SECRET_DIR_ENV} (its mounted Secret) is not set")
    return read_spec(path, secret_dir)


def read_spec(path: str, secret_dir: str) -> spec.NodeSpec:
    """A node's spec from its pod's volumes, with the program's token and TLS put back in."""
    token, tls = read_secret(secret_dir)
    node_spec = spec.decode(read_sealed(path, token))
    return dataclasses.replace(node_spec, token=token, tls=tls)


def run_node(path: str) -> NoReturn:
    """Runs the node of this pod: `python -m launchpad.launch --pod-spec PATH`."""
    from launchpad.launch.node_process import runner  # (a node's process, and only there)

    runner.exit_process(runner.run_process(read_node_spec(path)))
