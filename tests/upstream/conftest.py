"""Launchpad's own sources for the upstream suite, fetched once per test session."""

import pytest

from tests.upstream import wheels


@pytest.fixture(scope="session", params=wheels.RELEASES, ids=lambda r: r.name)
def release(request) -> wheels.Release:
    """Each dm-launchpad release, downloaded and unpacked (wheels.py)."""
    return wheels.fetch(request.param)
