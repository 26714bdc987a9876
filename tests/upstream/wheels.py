"""Launchpad's own sources, fetched at test time: the released dm-launchpad wheels (0.5.2,
and the last nightly, its last commit), downloaded with `pip download --no-deps` and
unpacked, `.py` files only, into a cache of the checkout (.upstream/, git-ignored). Nothing of
them is committed.

Of each, `staged/` holds only what the suite runs - Launchpad's `*_test.py` files and its
examples - at their paths in Launchpad's packages; the runner (runner.py) lays them over
ours, so that `launchpad.launch.serialization_test` or `launchpad.examples.hello_world.launch`
import as in Launchpad's tree, while every other module comes from ours.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import shutil
import subprocess
import sys
import zipfile

from tests.processes import ROOT

CACHE = os.environ.get("LAUNCHPAD_UPSTREAM_CACHE", os.path.join(ROOT, ".upstream"))
# The wheels are built for Python 3.10 (their C++ courier links TensorFlow 2.8): only their
# Python sources are used, so the platform is named, not matched.
_PIP_TARGET = ["--only-binary=:all:", "--python-version", "3.10",
               "--platform", "manylinux2014_x86_64"]


@dataclasses.dataclass(frozen=True)
class Release:
    """One dm-launchpad release whose sources the suite runs."""

    distribution: str
    version: str

    @property
    def name(self) -> str:
        return f"{self.distribution}-{self.version}"

    @property
    def folder(self) -> str:
        return os.path.join(CACHE, self.name)

    @property
    def sources(self) -> str:
        """Every .py file of the wheel, at its path."""
        return os.path.join(self.folder, "sources")

    @property
    def staged(self) -> str:
        """The tests and examples only (see the module doc)."""
        return os.path.join(self.folder, "staged")


RELEASES = [Release("dm-launchpad", "0.5.2"),
            Release("dm-launchpad-nightly", "0.5.2.dev20230323")]


def _is_staged(path: str) -> bool:
    """What the suite runs of Launchpad: its tests and its examples."""
    return path.endswith("_test.py") or "/examples/" in f"/{path}"


def fetch(release: Release) -> Release:
    """Downloads and unpacks `release` unless the cache has it; returns it.

    Raises:
      RuntimeError: pip could not download it (the registry is not reachable).
    """
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one download, whichever test process comes first
        if os.path.isdir(release.staged):
            return release
        download = os.path.join(release.folder, "download")
        shutil.rmtree(release.folder, ignore_errors=True)
        os.makedirs(download)
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--disable-pip-version-check", *_PIP_TARGET, "-d", download,
             f"{release.distribution}=={release.version}"],
            capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise RuntimeError(f"pip download {release.name} failed (the suite needs the "
                               f"package registry): {result.stderr.strip()[-2000:]}")
        (wheel,) = [os.path.join(download, f) for f in os.listdir(download)]
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.endswith(".py"):
                    archive.extract(member, release.sources)
                    if _is_staged(member):
                        archive.extract(member, release.staged)
        _add_package_files(release.staged)
        shutil.rmtree(download)
    return release


def _add_package_files(top: str) -> None:
    """Makes each staged folder a package, as it is in Launchpad's tree."""
    for folder, _, files in os.walk(top):
        if folder != top and "__init__.py" not in files:
            open(os.path.join(folder, "__init__.py"), "w").close()
