"""Installing a package that requires dm-launchpad on top of ours, by the recipe of
docs/migrating.md ("Installing packages that require dm-launchpad"): the stand-in wheels
(`python -m launchpad.standin_wheels DIR`, `make compat-wheels`) given to pip with
`--find-links`.

Each test makes a fresh venv that sees this venv's packages (ours, as installed here, and
what it needs) through a .pth file, so nothing is reinstalled; a throw-away package that
requires dm-launchpad as Acme, Mava and oat do is pip-installed into it. pip reads no index
(`--no-index`: the stand-ins and the throw-away package are the only things it may install)
and no pip configuration of the machine, so the test needs no network. Without the stand-ins
pip finds nothing, as it finds nothing on PyPI for Python 3.11+ (dm-launchpad was released
as wheels for CPython <= 3.10 only).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from launchpad import standin_wheels
from tests.processes import ROOT

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(300)]

OURS = standin_wheels.our_version()
NIGHTLY = f"{standin_wheels.NIGHTLY}+launchpadnext.{OURS}"


def _installed(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


# Our `tensorflow` extra is TensorFlow; our `reverb` extra is Reverb and TensorFlow on
# Python <= 3.11, nothing on 3.12+. Where this venv lacks them, pip (with no index) cannot
# install them: those cases are skipped.
_HAS_TENSORFLOW = _installed("tensorflow-cpu")
_HAS_REVERB = sys.version_info >= (3, 12) or (_installed("dm-reverb") and _HAS_TENSORFLOW)


@dataclasses.dataclass
class Venv:
    python: pathlib.Path
    home: pathlib.Path  # a folder outside the checkout, to run things in
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.python), *args], cwd=self.home, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def pip(self, *args: str) -> subprocess.CompletedProcess:
        return self.run("-m", "pip", *args)


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The stand-in wheels, written as a user with our package installed writes them."""
    folder = tmp_path_factory.mktemp("standins")
    result = subprocess.run([sys.executable, "-m", "launchpad.standin_wheels", str(folder)],
                            cwd=folder, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return folder


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The throw-away packages: each requires dm-launchpad as a package of the wild does."""
    folder = tmp_path_factory.mktemp("packages")
    for name, requirement in REQUIREMENTS.items():
        standin_wheels.write_wheel(folder, name, "1.0", "requires dm-launchpad", [requirement])
    return folder


def _environment(home: pathlib.Path) -> dict[str, str]:
    """The test's environment, without what points Python at another venv or configures pip
    (this machine's pip.conf, PIP_FIND_LINKS): pip as it is out of the box."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1", "HOME": str(home)}


@pytest.fixture
def venv(tmp_path: pathlib.Path) -> Venv:
    """A fresh venv that sees this one's packages (ours among them), pip included."""
    home = tmp_path / "user"
    home.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home / "venv")],
                   check=True, capture_output=True, timeout=60)
    python = home / "venv" / "bin" / "python"
    site_packages = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    # addsitedir, not a bare path: this venv's own .pth files (ours, editable) apply too.
    pathlib.Path(site_packages, "this_venv.pth").write_text(
        "".join(f"import site; site.addsitedir({path!r})\n" for path in ours))
    return Venv(python, home, _environment(home))


def _install(venv: Venv, *finds: pathlib.Path, package: str) -> subprocess.CompletedProcess:
    """The recipe: `pip install --find-links DIR PACKAGE`, with no index here."""
    links = [arg for folder in finds for arg in ("--find-links", str(folder))]
    return venv.pip("install", "--no-index", *links, package)


# The throw-away packages, named by what they require: as Acme 0.4.0 (`==0.5.0`), most
# code (`==0.5.2`), a range, Reverb's extra with XManager's (which ours takes as nothing),
# oat (`[tensorflow]`), and Mava's older releases (the nightly).
REQUIREMENTS = {
    "needs-dm-launchpad": "dm-launchpad==0.5.2",
    "needs-dm-launchpad-050": "dm-launchpad==0.5.0",
    "needs-dm-launchpad-range": "dm-launchpad>=0.5.0,<0.6",
    "needs-dm-launchpad-reverb": "dm-launchpad[reverb,xmanager]>=0.5",
    "needs-dm-launchpad-tensorflow": "dm-launchpad[tensorflow]",
    "needs-dm-launchpad-nightly": "dm-launchpad-nightly",
}
CASES = [
    ("needs-dm-launchpad", "dm-launchpad", f"0.5.2+launchpadnext.{OURS}"),
    ("needs-dm-launchpad-050", "dm-launchpad", f"0.5.0+launchpadnext.{OURS}"),
    ("needs-dm-launchpad-range", "dm-launchpad", f"0.5.2+launchpadnext.{OURS}"),
    pytest.param("needs-dm-launchpad-reverb", "dm-launchpad", f"0.5.2+launchpadnext.{OURS}",
                 marks=pytest.mark.skipif(not _HAS_REVERB, reason="our reverb extra is not "
                                          "installed: pip install '.[reverb]'")),
    pytest.param("needs-dm-launchpad-tensorflow", "dm-launchpad",
                 f"0.5.2+launchpadnext.{OURS}",
                 marks=pytest.mark.skipif(not _HAS_TENSORFLOW, reason="our tensorflow extra "
                                          "is not installed: pip install '.[tensorflow]'")),
    ("needs-dm-launchpad-nightly", "dm-launchpad-nightly", NIGHTLY),
]


def test_without_the_standins_pip_finds_no_dm_launchpad(venv, packages):
    result = _install(venv, packages, package="needs-dm-launchpad")
    assert result.returncode != 0, result.stdout
    assert "No matching distribution found for dm-launchpad==0.5.2" in result.stderr, \
        result.stderr


@pytest.mark.parametrize("package, standin, version", CASES)
def test_the_package_installs_over_ours_with_the_standin(venv, standins, packages, package,
                                                         standin, version):
    result = _install(venv, standins, packages, package=package)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert f"Successfully installed {standin}-{version} {package}-1.0" in output, output
    assert "does not provide the extra" not in output, output

    shown = venv.pip("show", standin)
    assert shown.returncode == 0, shown.stderr
    fields = dict(re.findall(r"^([\w-]+): ?(.*)$", shown.stdout, re.MULTILINE))
    assert (fields["Name"], fields["Version"], fields["Requires"]) == (
        standin, version, "launchpad-next"), shown.stdout
    assert fields["Summary"].startswith(f"Stand-in for {standin}"), shown.stdout

    # launchpad and courier are ours; the stand-in installed its metadata only.
    imported = venv.run("-c", "import courier, launchpad, importlib.metadata as m; "
                              "print(launchpad.__file__); print(courier.__file__); "
                              f"print(*m.files({standin!r}), sep='\\n')")
    assert imported.returncode == 0, imported.stderr
    module, courier_module, *files = imported.stdout.splitlines()
    assert (module, courier_module) == (os.path.join(ROOT, "launchpad", "__init__.py"),
                                        os.path.join(ROOT, "courier", "__init__.py"))
    assert files and all(re.fullmatch(r"[\w.+-]+\.dist-info/[A-Z_]+", f) for f in files), files

    checked = venv.pip("check")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_uninstalling_the_standin_leaves_ours(venv, standins, packages):
    result = _install(venv, standins, packages, package="needs-dm-launchpad")
    assert result.returncode == 0, result.stdout + result.stderr
    removed = venv.pip("uninstall", "--yes", "--verbose", "dm-launchpad")
    assert removed.returncode == 0, removed.stderr
    paths = re.findall(r"Removing file or directory (\S+)", removed.stdout)
    assert [pathlib.Path(p).name for p in paths] == [
        f"dm_launchpad-0.5.2+launchpadnext.{OURS}.dist-info"], removed.stdout
    imported = venv.run("-c", "import courier, launchpad; print(launchpad.__file__)")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == os.path.join(ROOT, "launchpad", "__init__.py")
    assert (pathlib.Path(ROOT) / "launchpad" / "__init__.py").is_file()


def test_a_wheel_per_release_and_the_last_nightly(standins):
    names = sorted(path.name for path in standins.iterdir())
    assert names == sorted(
        [f"dm_launchpad-{v}+launchpadnext.{OURS}-py3-none-any.whl"
         for v in standin_wheels.RELEASES]
        + [f"dm_launchpad_nightly-{NIGHTLY}-py3-none-any.whl"])
    with zipfile.ZipFile(standins / f"dm_launchpad-0.5.2+launchpadnext.{OURS}-py3-none-any.whl"
                         ) as wheel:
        assert all(".dist-info/" in name for name in wheel.namelist()), wheel.namelist()


def test_make_compat_wheels_writes_the_same_bytes(standins, tmp_path):
    """The Makefile runs the module as a file with any Python (nothing installed): the
    wheels are the same, byte for byte, as the installed module's."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    result = subprocess.run(["make", "--no-print-directory", "compat-wheels",
                             f"COMPAT_WHEELS={tmp_path}"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    made = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    assert made == {path.name: path.read_bytes() for path in standins.iterdir()}


def test_a_pin_adds_a_version_and_a_wrong_one_is_refused(tmp_path):
    pinned = standin_wheels.main([str(tmp_path), "--pin",
                                  "dm-launchpad-nightly==0.3.0.dev20211105"])
    assert pinned == 0
    assert (tmp_path / f"dm_launchpad_nightly-0.3.0.dev20211105+launchpadnext.{OURS}"
            "-py3-none-any.whl").is_file()
    with pytest.raises(SystemExit):
        standin_wheels.main([str(tmp_path), "--pin", "dm-reverb==0.14.0"])
