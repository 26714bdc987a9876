"""Where terminal='output_to_files' writes a local launch's node output: where Launchpad's did.

Each node's stdout and stderr go to one file, `<dir>/<label>/<index>` (the group's label a
folder, the node's index the file's name, no suffix), `dir` being $LAUNCHPAD_LOGGING_DIR, else
/tmp/launchpad_out. Users and their scripts read those files, so they are where Launchpad put
them; the launch prints where (the same words as Launchpad's).

A launch starts its files afresh (emptied when it starts, as Launchpad's `open(path, 'w')`); a
node restarted within the launch appends, so its earlier runs' output stays (why it died).
Two launches at once whose groups share a label write the same files, as under Launchpad:
give one its own $LAUNCHPAD_LOGGING_DIR.

/tmp is shared, so nothing here is trusted (private_files.py's checks, with this use's words):
a missing folder is made 0700; the logging folder and each group's folder must be real
folders (not symlinks) of this user that no one else can write to, below safe folders; each
file is opened without following a symlink, made 0600, and must be a regular file of this
user that no one else can write. Anything else refuses the launch before a node starts, naming
the path, what is wrong, and what to do (remove it, or set $LAUNCHPAD_LOGGING_DIR).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from launchpad.launch.runtime import private_files

LOGGING_DIR_VARIABLE = "LAUNCHPAD_LOGGING_DIR"
DEFAULT_LOGGING_DIR = "/tmp/launchpad_out"  # Launchpad's place: checked, see above
USE = private_files.Use("write the nodes' output (terminal='output_to_files')",
                        f"set {LOGGING_DIR_VARIABLE} to a folder only you can write to")


def logging_dir() -> str:
    """The folder the nodes' files go in: $LAUNCHPAD_LOGGING_DIR, else /tmp/launchpad_out;
    absolute, the folders above it resolved (so each one checked is the one written below)."""
    given = os.path.abspath(os.environ.get(LOGGING_DIR_VARIABLE) or DEFAULT_LOGGING_DIR)
    return os.path.join(os.path.realpath(os.path.dirname(given)), os.path.basename(given))


def path_of(folder: str, name: str) -> str:
    """`<folder>/<label>/<index>`: the file of node `name` (`label/index`)."""
    label, index = name.rsplit("/", 1)
    return os.path.join(folder, label, index)


def prepare(names: Sequence[str]) -> str:
    """The logging folder, made ready for the nodes `names` (`label/index`) before any starts:
    it and each group's folder made or checked, each node's file made or emptied.

    Raises:
      UnsafePathError: a folder or file another user could reach (named, with what to do).
      ValueError: a group's label cannot name a folder of its own.
    """
    folder = logging_dir()
    private_files.make_own_dir(folder, USE)
    for label in dict.fromkeys(name.rsplit("/", 1)[0] for name in names):
        if any(part in ("", ".", "..") for part in label.split("/")):
            raise ValueError(
                f"Group {label!r} cannot have a folder of its own under {folder}, where "
                f"terminal='output_to_files' writes <label>/<index>: give the group a label "
                f"without empty, '.' or '..' parts, or use another terminal")
        private_files.make_own_dir(os.path.join(folder, label), USE)
    for name in names:
        log = open_log(path_of(folder, name))
        try:
            os.ftruncate(log, 0)  # (not O_TRUNC: nothing is emptied before it is checked)
        finally:
            os.close(log)
    return folder


def open_log(path: str) -> int:
    """A descriptor that appends to the node's file at `path` (see the module doc).

    Raises:
      UnsafePathError: a symlink, or a file another user owns or may write (named).
    """
    return private_files.append_private(path, USE)
