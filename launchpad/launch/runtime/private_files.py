"""The launch's files on this host (node specs, failure reports, logs), where no other user can
reach them.

Node specs and failure reports are pickles: whoever can write one runs code as the launching
user when it is read. So they live in a launch's work folder,
`$TMPDIR/launchpad-work-<uid>/<program>-<time>-<random>/` (a run's own folder, its record,
is `<run_dir>/launchpad-runs-<uid>/<run id>/`: run_records.py), a folder that is
checked, not trusted: every folder on the way to it must be owned by root or this user and,
when others may write to it, sticky (as /tmp is, so nobody can rename what is ours); the
per-user folder must be ours, not a symlink, and closed to others (0700). A file is read only
if it is a regular file of ours that others cannot write, opened without following symlinks.

The same checks guard other folders of ours in shared places (the nodes' output files of
terminal='output_to_files', output_files.py): a `Use` says, in a refusal, what the folder is
for and how to do without it.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
import tempfile

from launchpad.launch.runtime.errors import UnsafePathError


@dataclasses.dataclass(frozen=True)
class Use:
    """What a checked folder is for, as its refusal says: what cannot be done under it
    (`doing`), and how the user does without it (`fix`)."""

    doing: str
    fix: str


RUN_FILES = Use("keep or read the launch's private files",
                "set TMPDIR (for run records: LAUNCHPAD_RUN_DIR) to a folder only you can "
                "write to")


def make_work_dir(prefix: str) -> str:
    """A new private work folder on this host (node specs, logs, a colocation's children,
    a host agent's files): $TMPDIR/launchpad-work-<uid>/<prefix>XXXXXXXX.

    Raises:
      UnsafePathError: another user could reach the folder (named, with what is wrong).
    """
    return make_private_dir(prefix, os.path.join(tempfile.gettempdir(),
                                                 f"launchpad-work-{os.geteuid()}"))


def make_private_dir(prefix: str, base: str) -> str:
    """A new private folder, <base>/<prefix>XXXXXXXX, `base` being this user's folder of
    such folders (made 0700, or checked: ours, 0700, below safe folders).

    Raises:
      UnsafePathError: another user could reach the folder (named, with what is wrong).
    """
    parent = os.path.realpath(os.path.dirname(base))
    os.makedirs(parent, 0o700, exist_ok=True)
    _check_ancestors(parent)
    base = os.path.join(parent, os.path.basename(base))
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    _check_own_dir(base, 0o077, "other users may open it")
    return tempfile.mkdtemp(prefix=prefix, dir=base)  # 0700, a fresh name


def check_private_dir(path: str, use: Use = RUN_FILES) -> None:
    """Checks, before anything in it is read, that `path` is a folder of this user that no
    one else can write to, below folders that are safe (see the module doc).

    Raises:
      FileNotFoundError: there is no such folder.
      UnsafePathError: another user could have put or replaced what is in it (named, with
        what is wrong and, from `use`, what to do).
    """
    _check_ancestors(os.path.dirname(os.path.realpath(path)), use)
    _check_own_dir(path, 0o022, "other users may write to it", use)


def make_own_dir(path: str, use: Use) -> None:
    """Makes folder `path` (0700, as any missing folder above it) unless it is there, then
    checks it as check_private_dir does: a folder of this user in a shared place (/tmp), which
    another user may have made first, or replaced by a symlink.

    Raises:
      UnsafePathError: it, or a folder above it, is not safe (named, with what to do).
    """
    missing = []
    parent = path
    while not os.path.lexists(parent):  # (os.makedirs gives those above it the umask's mode)
        missing.append(parent)
        parent = os.path.dirname(parent)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass  # made meanwhile: checked below like any other
    check_private_dir(path, use)


def _check_own_dir(path: str, closed: int, why: str, use: Use = RUN_FILES) -> None:
    """`path` is a real folder (not a symlink) of this user, without the mode bits `closed`."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        _refuse(path, "it is not a folder (a symlink, or a file)", use)
    if info.st_uid != os.geteuid():
        _refuse(path, f"it belongs to uid {info.st_uid}, not to this user ({os.geteuid()})",
                use)
    if info.st_mode & closed:
        _refuse(path, f"{why} (mode {stat.S_IMODE(info.st_mode):o}, expected 700)", use)


def _check_ancestors(path: str, use: Use = RUN_FILES) -> None:
    """Every folder from `/` to `path` is safe to keep private files below (see module doc)."""
    current = os.sep
    for part in [p for p in path.split(os.sep) if p]:
        current = os.path.join(current, part)
        info = os.lstat(current)
        if info.st_uid not in (0, os.geteuid()):
            _refuse(current, f"it belongs to uid {info.st_uid}, who could rename what is in it",
                    use)
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            _refuse(current, f"other users may write to it and it is not sticky (mode "
                             f"{stat.S_IMODE(info.st_mode):o})", use)


def _refuse(path: str, why: str, use: Use = RUN_FILES) -> None:
    raise UnsafePathError(f"Cannot {use.doing} under {path}: {why}. Remove it if it is yours "
                          f"to remove, or {use.fix}")


def write_private(path: str, data: bytes) -> None:
    """Writes a new file of ours at `path`, readable by this user only."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    with open(os.open(path, flags, 0o600), "wb") as f:
        f.write(data)


def append_private(path: str, use: Use = RUN_FILES) -> int:
    """A descriptor (close-on-exec) that appends to the file at `path`, made 0600 if missing:
    opened without following a symlink, and kept only if it is a regular file of this user
    that no one else can write (a file another user planted is refused, not written to).

    Raises:
      UnsafePathError: a symlink, not a regular file, another user's, or writable by others
        (named, with what to do).
    """
    flags = (os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
             | os.O_NONBLOCK)  # (a FIFO found there must not hold the launch up)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as e:
        if e.errno == errno.ELOOP:
            _refuse(path, "it is a symbolic link", use)
        if e.errno == errno.ENXIO:
            _refuse(path, "it is not a regular file (a FIFO)", use)
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            _refuse(path, "it is not a regular file", use)
        if info.st_uid != os.geteuid():
            _refuse(path, f"it belongs to uid {info.st_uid}, not to this user "
                          f"({os.geteuid()})", use)
        if info.st_mode & 0o022:
            _refuse(path, f"other users may write to it (mode {stat.S_IMODE(info.st_mode):o},"
                          " expected 600)", use)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_private(path: str, owners: tuple[int, ...] | None = None) -> bytes:
    """The bytes of `path`, if it is a regular file of ours that no one else can write.

    Args:
      path: the file.
      owners: the uids it may belong to (default: this user's only; a Kubernetes volume's
        files belong to root).
    Raises:
      FileNotFoundError: there is no such file.
      UnsafePathError: it is a symlink, not a regular file, another user's, or writable by
        others (nothing of it is read).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise UnsafePathError(f"Refused to read {path}: {e.strerror}") from e
    with open(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(f"Refused to read {path}: not a regular file")
        if info.st_uid not in (owners or (os.geteuid(),)):
            raise UnsafePathError(f"Refused to read {path}: it belongs to uid {info.st_uid}")
        if info.st_mode & 0o022:
            raise UnsafePathError(f"Refused to read {path}: others may write to it (mode "
                                  f"{stat.S_IMODE(info.st_mode):o})")
        return f.read()
