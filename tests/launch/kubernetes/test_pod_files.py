"""What a pod's runner reads from its volumes, and what it refuses before anything is
unpickled: a spec not sealed with the program's token (changed in the ConfigMap, or another
launch's), a file others may write, another user's, or a link leading out of its volume."""

from __future__ import annotations

import os
import pickle

import pytest

from launchpad.courier.tls import TLS
from launchpad.launch.kubernetes import pod as kubernetes_pod
from launchpad.launch.runtime import spec
from launchpad.launch.runtime.errors import UnsafePathError
from tests.hostile import MkdirOnUnpickle
from tests.launch.kubernetes.pods import make_volume

TOKEN = "0123456789abcdef0123456789abcdef"


def _spec() -> spec.NodeSpec:
    return spec.NodeSpec(node=b"not unpickled here", program_name="p", label="worker",
                         index=0, controller_address="lp-p-controller.ns.svc:7070",
                         token="", termination_notice_secs=1.0)


def _volumes(tmp_path, specs: dict[str, bytes], secret: dict[str, bytes] | None = None):
    secret_dir = make_volume(str(tmp_path / "secret"),
                             secret or {kubernetes_pod.TOKEN_KEY: TOKEN.encode()}, 0o400)
    specs_dir = make_volume(str(tmp_path / "specs"), specs, 0o400)
    return secret_dir, specs_dir


def test_a_sealed_spec_is_read_with_the_token_and_tls_of_the_secret(tmp_path):
    tls = TLS.generate()
    secret = {"token": TOKEN.encode(), "tls.ca": tls.ca, "tls.crt": tls.cert,
              "tls.key": tls.key, "tls.server-name": b"launchpad"}
    sealed = kubernetes_pod.seal(spec.encode(_spec()), TOKEN)
    secret_dir, specs_dir = _volumes(tmp_path, {"w.spec": sealed}, secret)
    assert os.path.islink(os.path.join(specs_dir, "w.spec"))  # read where the links lead
    read = kubernetes_pod.read_spec(os.path.join(specs_dir, "w.spec"), secret_dir)
    assert (read.token, read.tls, read.label) == (TOKEN, tls, "worker")


@pytest.mark.parametrize("token", ["another launch's token!!", None], ids=["forged", "torn"])
def test_a_spec_not_sealed_with_the_programs_token_is_refused_unread(tmp_path, token):
    """Nothing of it is unpickled: the payload would make a folder."""
    target = tmp_path / "unpickled"
    payload = pickle.dumps(MkdirOnUnpickle(str(target)))
    sealed = kubernetes_pod.seal(payload, token or TOKEN)
    if token is None:  # sealed right, then one byte changed in the ConfigMap
        sealed = sealed[:-1] + bytes([sealed[-1] ^ 1])
    secret_dir, specs_dir = _volumes(tmp_path, {"w.spec": sealed})
    with pytest.raises(UnsafePathError, match="not sealed with this program's token"):
        kubernetes_pod.read_spec(os.path.join(specs_dir, "w.spec"), secret_dir)
    assert not target.exists()


def test_files_others_may_write_or_own_or_that_lead_out_are_refused(tmp_path):
    sealed = kubernetes_pod.seal(spec.encode(_spec()), TOKEN)
    secret_dir, specs_dir = _volumes(tmp_path, {"a.spec": sealed, "b.spec": sealed})
    real = os.path.realpath(os.path.join(specs_dir, "a.spec"))
    os.chmod(real, 0o666)
    with pytest.raises(UnsafePathError, match="others may write to it"):
        kubernetes_pod.read_spec(os.path.join(specs_dir, "a.spec"), secret_dir)
    if os.geteuid() == 0:
        os.chown(os.path.realpath(os.path.join(specs_dir, "b.spec")), 4321, 4321)
        with pytest.raises(UnsafePathError, match="belongs to uid 4321"):
            kubernetes_pod.read_spec(os.path.join(specs_dir, "b.spec"), secret_dir)
    outside = tmp_path / "outside.spec"
    outside.write_bytes(sealed)
    os.chmod(outside, 0o400)
    os.symlink(str(outside), os.path.join(specs_dir, "c.spec"))
    with pytest.raises(UnsafePathError, match="leads out of its volume"):
        kubernetes_pod.read_spec(os.path.join(specs_dir, "c.spec"), secret_dir)


def test_a_secret_without_a_token_is_named(tmp_path):
    secret_dir, specs_dir = _volumes(tmp_path, {"w.spec": b""}, {"other": b"x"})
    with pytest.raises(FileNotFoundError, match="No program token at"):
        kubernetes_pod.read_spec(os.path.join(specs_dir, "w.spec"), secret_dir)


def test_a_pods_node_reads_its_spec_and_leaves_the_variable_to_no_child(tmp_path, monkeypatch):
    sealed = kubernetes_pod.seal(spec.encode(_spec()), TOKEN)
    secret_dir, specs_dir = _volumes(tmp_path, {"w.spec": sealed})
    monkeypatch.setenv(kubernetes_pod.SECRET_DIR_ENV, secret_dir)
    read = kubernetes_pod.read_node_spec(os.path.join(specs_dir, "w.spec"))
    assert read.token == TOKEN
    assert kubernetes_pod.SECRET_DIR_ENV not in os.environ
