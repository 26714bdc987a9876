"""Laying a release's staged folder (wheels.py: Launchpad's tests and examples at their paths
in its packages) under ours.

An import finder, installed by tests/upstream/site/sitecustomize.py in every process of an
upstream run - the runner's, and the node processes of the programs it launches, which
import the tests' modules by name as Launchpad's did - when $LAUNCHPAD_UPSTREAM_STAGED names
the folder: a module that ours does not have (a `*_test.py`, `launchpad.examples...`) comes
from there, every other one from ours, so no module of Launchpad's implementation is ever
run.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _StagedFinder(importlib.abc.MetaPathFinder):
    """Finds what ours does not have in the staged folder (see the module doc)."""

    def __init__(self, staged: str):
        self._staged = staged

    def find_spec(self, fullname, path, target=None):
        if importlib.machinery.PathFinder.find_spec(fullname, path) is not None:
            return None  # ours has it
        base = os.path.join(self._staged, *fullname.split("."))
        if os.path.isfile(os.path.join(base, "__init__.py")):
            return importlib.util.spec_from_file_location(
                fullname, os.path.join(base, "__init__.py"), submodule_search_locations=[base])
        if os.path.isfile(base + ".py"):
            return importlib.util.spec_from_file_location(fullname, base + ".py")
        return None


def install(staged: str) -> None:
    """Lays the staged folder `staged` under ours, in this process."""
    sys.meta_path.insert(0, _StagedFinder(os.path.abspath(staged)))


def environment(staged: str) -> dict[str, str]:
    """The environment of a run over the staged folder `staged`."""
    path = [SITE, ROOT, os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "LAUNCHPAD_UPSTREAM_STAGED": staged,
            "PYTHONPATH": os.pathsep.join(p for p in path if p)}
