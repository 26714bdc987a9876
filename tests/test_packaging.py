"""The package as a user installs it: `python -m build` makes a wheel and an sdist of the
tracked tree with no warning of ours, and the wheel, pip-installed into a fresh venv (no
editable install, no checkout on the path, run from outside it), gives a working `launchpad`
command and runs a program of processes."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

from tests.processes import ROOT, Script, session_members

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(600)]

VERSION = re.search(r'^version = "(.+)"$', pathlib.Path(ROOT, "pyproject.toml").read_text(),
                    re.MULTILINE)[1]
# What points a Python at a checkout or another venv: none of it reaches the user's venv.
OUTSIDE = {"PYTHONPATH": None, "PYTHONHOME": None, "VIRTUAL_ENV": None}
# Setuptools' warnings ("WARNING `project.license` as a TOML table is deprecated"), Python's
# (SetuptoolsDeprecationWarning, BuildBackendWarning, ...) and pip's ("DEPRECATION: ...").
WARNING = re.compile(r"warn|deprecat", re.IGNORECASE)

PROGRAM = '''\
import launchpad as lp


class Squarer:
    def square(self, x):
        return x * x


def main(squarer):
    print("sum of squares:", sum(squarer.square(i) for i in range(5)), flush=True)
    lp.stop()


program = lp.Program("installed")
squarer = program.add_node(lp.CourierNode(Squarer), label="squarer")
program.add_node(lp.PyNode(main, squarer), label="main")
lp.launch(program, launch_type="local_mp").wait()
print("program stopped", flush=True)
'''


@dataclasses.dataclass
class Built:
    wheel: pathlib.Path
    sdist: pathlib.Path
    output: str  # what `python -m build` printed
    tracked: list[str]  # the files of the tree it was built from


@dataclasses.dataclass
class Venv:
    bin: pathlib.Path
    pip_output: str
    home: pathlib.Path  # a folder outside the checkout, to run things in


def _environment() -> dict[str, str]:
    return {name: value for name, value in {**os.environ, **OUTSIDE}.items()
            if value is not None}


def _run(args: list[str], cwd: pathlib.Path, timeout: float = 300,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env or _environment(), capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The wheel and sdist of a copy of the tracked files (existing ones: a file deleted but
    not yet committed is left out), built as a user builds them (isolated, fresh setuptools)."""
    folder = tmp_path_factory.mktemp("build")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    tracked = [name for name in listed if name and os.path.isfile(os.path.join(ROOT, name))]
    source = folder / "source"
    for name in tracked:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, name), source / name)
    # Without PYTHONDONTWRITEBYTECODE, which makes setuptools warn that it cannot byte-compile.
    env = {k: v for k, v in _environment().items() if k != "PYTHONDONTWRITEBYTECODE"}
    result = _run([sys.executable, "-m", "build", "--outdir", str(folder / "dist"),
                   str(source)], cwd=folder, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    wheel, = (folder / "dist").glob("*.whl")
    sdist, = (folder / "dist").glob("*.tar.gz")
    return Built(wheel, sdist, output, tracked)


@pytest.fixture(scope="module")
def venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv with the wheel pip-installed (its dependencies from the configured index)."""
    home = tmp_path_factory.mktemp("user")
    result = _run([sys.executable, "-m", "venv", str(home / "venv")], cwd=home)
    assert result.returncode == 0, result.stdout + result.stderr
    bin_ = home / "venv" / "bin"
    result = _run([str(bin_ / "python"), "-m", "pip", "install", "--no-input",
                   str(built.wheel)], cwd=home)
    assert result.returncode == 0, result.stdout + result.stderr
    return Venv(bin_, result.stdout + result.stderr, home)


def test_the_build_warns_of_nothing(built: Built):
    assert not [line for line in built.output.splitlines() if WARNING.search(line)], \
        built.output


# The packages: launchpad, and Launchpad's top-level `courier` (over launchpad's courier).
PACKAGES = ("launchpad/", "courier/")


def test_the_wheel_holds_the_package_and_its_metadata_only(built: Built):
    names = set(zipfile.ZipFile(built.wheel).namelist())
    metadata = f"launchpad_next-{VERSION}.dist-info/"
    package = {name for name in names if not name.startswith(metadata)}
    assert package == {name for name in built.tracked if name.startswith(PACKAGES)}
    assert f"{metadata}licenses/LICENSE" in names
    assert f"{metadata}entry_points.txt" in names


def test_the_sdist_holds_the_package_readme_license_and_pyproject(built: Built):
    top = f"launchpad_next-{VERSION}/"
    names = {name.removeprefix(top) for name in tarfile.open(built.sdist).getnames()}
    assert {"README.md", "LICENSE", "pyproject.toml", "PKG-INFO"} <= names
    assert {name for name in built.tracked if name.startswith(PACKAGES)} <= names
    outside = {name.split("/")[0] for name in names} - {
        "launchpad", "courier", "launchpad_next.egg-info", "README.md", "LICENSE", "pyproject.toml",
        "MANIFEST.in", "PKG-INFO", "setup.cfg", top.rstrip("/")}
    assert not outside, f"the sdist holds more than the package: {sorted(outside)}"


def test_pip_install_warns_of_no_deprecation(venv: Venv):
    assert "deprecat" not in venv.pip_output.lower(), venv.pip_output


def test_launchpad_and_courier_are_imported_from_the_venv(venv: Venv):
    result = _run([str(venv.bin / "python"), "-c",
                   "import courier, launchpad, sysconfig; print(launchpad.__file__); "
                   "print(courier.__file__); print(sysconfig.get_paths()['purelib'])"],
                  cwd=venv.home)
    assert result.returncode == 0, result.stderr
    module, courier_module, site_packages = result.stdout.split()
    assert module == os.path.join(site_packages, "launchpad", "__init__.py")
    assert courier_module == os.path.join(site_packages, "courier", "__init__.py")
    assert site_packages.startswith(str(venv.home))


def test_the_command_prints_its_version_and_help(venv: Venv):
    version = _run([str(venv.bin / "launchpad"), "--version"], cwd=venv.home, timeout=60)
    assert (version.returncode, version.stdout) == (0, f"launchpad-next {VERSION}\n"), \
        version.stderr
    help_ = _run([str(venv.bin / "launchpad"), "--help"], cwd=venv.home, timeout=60)
    assert help_.returncode == 0, help_.stderr
    assert help_.stdout.startswith("usage: launchpad")
    assert "kubernetes-manifests" in help_.stdout


@pytest.mark.usefixtures("no_leaked_processes")
def test_a_program_of_processes_runs_and_stops(venv: Venv):
    program = venv.home / "installed_program.py"
    program.write_text(PROGRAM)
    script = Script([str(program)], python=str(venv.bin / "python"), cwd=str(venv.home),
                    env=OUTSIDE, new_session=True, timeout=120)
    try:
        status = script.finish()
        left = session_members(script.process.pid)
    finally:
        script.kill_session()
    assert status == 0, script.output
    assert left == [], script.output
    assert "sum of squares: 30\n" in script.output
    assert script.output.endswith("program stopped\n"), script.output
