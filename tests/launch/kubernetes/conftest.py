"""What the Kubernetes tests share: the in-memory API, and a kubeconfig pointing at it."""

import pytest

from tests.launch.kubernetes.fake_api import FakeKubernetesApi


@pytest.fixture
def api(tmp_path, monkeypatch):
    """The fake API, and a kubeconfig whose current context points at it."""
    with FakeKubernetesApi() as fake:
        config = tmp_path / "kubeconfig"
        config.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{fake.url}"}}}}]
users: [{{name: me, user: {{token: not-a-real-token}}}}]
contexts: [{{name: fake, context: {{cluster: fake, user: me}}}}]
current-context: fake
""")
        monkeypatch.setenv("KUBECONFIG", str(config))
        yield fake
