"""Stand-in wheels of `dm-launchpad` and `dm-launchpad-nightly`, so that pip installs packages
that require them (Acme, Mava, oat) on top of this one.

    python -m launchpad.standin_wheels DIR [--pin DIST==VERSION ...]
    pip install --find-links DIR PACKAGE

dm-launchpad was released as wheels for CPython 3.6 to 3.10 only, with no source distribution
(so was its nightly), so on Python 3.11+ pip finds nothing to install for a package that
requires it. Each wheel written here installs no file: only its metadata, which requires
`launchpad-next` (the `launchpad` and `courier` import names are this package's), with
dm-launchpad's extras mapped onto ours (`reverb`, `tensorflow`; `xmanager` onto nothing).
Uninstalling one removes its metadata only.

One wheel is written per release of dm-launchpad (any pin a package declares is met by one)
and one for the last nightly; `--pin` adds a version (an older nightly a package pins). Each
version carries a local label, `0.5.2+launchpadnext.0.1.0`: it meets the same specifiers as
0.5.2 (`==0.5.2`, `>=0.5`, `<0.6`) and sorts above it, so where pip could also take the real
wheel from PyPI (Python 3.10) it takes the stand-in. The wheels are reproducible: the same
bytes every time (fixed dates, a fixed order).

This module imports nothing but the standard library and nothing of launchpad, so that the
Makefile runs it from a checkout with any Python 3 (`make compat-wheels`).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import os
import pathlib
import re
import sys
import zipfile
from collections.abc import Mapping, Sequence

PROJECT = "launchpad-next"
# Every release of dm-launchpad on PyPI (none after 2023), and its last nightly.
RELEASES = ("0.1.0rc0", "0.3.0rc0", "0.3.0", "0.3.1", "0.3.2", "0.4.0", "0.4.1", "0.5.0",
            "0.5.1", "0.5.2")
NIGHTLY = "0.5.2.dev20230323"
# dm-launchpad's extras, and the extra of ours each stands for ("" none: there is no
# XManager here).
EXTRAS = {"reverb": "reverb", "tensorflow": "tensorflow", "xmanager": ""}
_DATE = (1980, 1, 1, 0, 0, 0)  # the zip format's first date: the same bytes every build
_VERSION = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")


def our_version() -> str:
    """This package's public version: its checkout's pyproject.toml when run from one (what
    the Makefile does, with nothing installed), else its installed metadata."""
    pyproject = pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml"
    text = pyproject.read_text() if pyproject.is_file() else ""
    found = re.search(r'^version = "([^"]+)"$', text, re.MULTILINE)
    if f'name = "{PROJECT}"' in text and found:
        return found[1].split("+")[0]
    return importlib.metadata.version(PROJECT).split("+")[0]


def _normalized(name: str) -> str:
    """A distribution's name as wheel files spell it: `dm_launchpad`."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write_wheel(folder: str | os.PathLike, name: str, version: str, summary: str,
                requires: Sequence[str] = (),
                extras: Mapping[str, Sequence[str]] | None = None) -> pathlib.Path:
    """Writes a pure-Python wheel holding metadata only, and returns its path.

    Args:
      folder: where the wheel goes (made if missing); a wheel of the same name is replaced.
      name: the distribution's name.
      version: its version (PEP 440, a local label allowed).
      summary: its one-line description.
      requires: its requirements (PEP 508).
      extras: its extras, each with its requirements (an empty list: an extra that brings
        nothing, declared so that pip does not warn of it).
    """
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{_normalized(name)}-{version}"
    info = f"{stem}.dist-info"
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                f"Summary: {summary}", "Requires-Python: >=3.10",
                *(f"Requires-Dist: {r}" for r in requires)]
    for extra, extra_requires in sorted((extras or {}).items()):
        metadata.append(f"Provides-Extra: {extra}")
        metadata += [f'Requires-Dist: {r}; extra == "{extra}"' for r in extra_requires]
    files = {
        f"{info}/METADATA": "\n".join(metadata) + "\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: launchpad.standin_wheels\n"
                         "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    encoded = {path: text.encode() for path, text in files.items()}
    record = [_record_line(path, data) for path, data in encoded.items()]
    encoded[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    path = folder / f"{stem}-py3-none-any.whl"
    partial = path.with_name(path.name + ".part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as wheel:
        for member, data in encoded.items():
            entry = zipfile.ZipInfo(member, _DATE)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(entry, data)
    os.replace(partial, path)  # a reader never sees half a wheel
    return path


def write_standin(folder: str | os.PathLike, name: str, version: str,
                  ours: str | None = None) -> pathlib.Path:
    """Writes the stand-in wheel of `name` (dm-launchpad or dm-launchpad-nightly) at
    `version` (a public version: the local label is added here), and returns its path."""
    if not _VERSION.match(version):
        raise ValueError(f"{version!r} is not a public version (e.g. 0.5.2, 0.5.2.dev20230323)")
    ours = ours or our_version()
    extras = {extra: [f"{PROJECT}[{mapped}]>={ours}"] if mapped else []
              for extra, mapped in EXTRAS.items()}
    summary = (f"Stand-in for {name}: installs no files; launchpad and courier are "
               f"{PROJECT}'s")
    return write_wheel(folder, name, f"{version}+launchpadnext.{ours}", summary,
                       [f"{PROJECT}>={ours}"], extras)


def write_all(folder: str | os.PathLike,
              pins: Sequence[tuple[str, str]] = ()) -> list[pathlib.Path]:
    """Writes every stand-in into `folder`: one per release of dm-launchpad, the last
    nightly, and each (name, version) of `pins`. Returns their paths."""
    wanted = [("dm-launchpad", v) for v in RELEASES] + [("dm-launchpad-nightly", NIGHTLY)]
    ours = our_version()
    return [write_standin(folder, name, version, ours)
            for name, version in dict.fromkeys([*wanted, *pins])]


def _pin(text: str) -> tuple[str, str]:
    name, _, version = text.partition("==")
    if name not in ("dm-launchpad", "dm-launchpad-nightly") or not _VERSION.match(version):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected dm-launchpad==VERSION or dm-launchpad-nightly==VERSION")
    return name, version


def main(argv: Sequence[str] | None = None) -> int:
    """The command: writes the stand-ins into the folder it is given, and names them."""
    parser = argparse.ArgumentParser(
        prog="python -m launchpad.standin_wheels",
        description="Writes stand-in wheels of dm-launchpad and dm-launchpad-nightly (no "
                    "files; they require launchpad-next) for `pip install --find-links DIR`.")
    parser.add_argument("folder", help="where the wheels go (made if missing)")
    parser.add_argument("--pin", action="append", type=_pin, default=[],
                        metavar="DIST==VERSION",
                        help="one more version to stand in for, e.g. "
                             "dm-launchpad-nightly==0.3.0.dev20211105 (repeatable)")
    args = parser.parse_args(argv)
    for path in write_all(args.folder, args.pin):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
