"""A launch's pickles (node specs, failure reports) are kept and read only where no other user
can reach them: the run folder is checked, not trusted, and a refused or unreadable report is
a named failure, never code run or a dead reader thread."""

from __future__ import annotations

import os
import pickle
import stat
import tempfile

import pytest

from launchpad.launch.node_process import fork_server
from launchpad.launch.runtime import private_files, spec
from launchpad.launch.runtime.errors import UnsafePathError
from launchpad.launch.runtime.process import NodeProcess, PythonProcess
from launchpad.launch.runtime.spec import FailureReport
from tests.hostile import MkdirOnUnpickle
from tests.launch.helpers import TIMEOUT

OTHER_UID = 65534  # nobody
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's files needs root")


@pytest.fixture
def tmpdir_here(tmp_path, monkeypatch):
    """TMPDIR is the test's own folder (private to this user, as pytest makes it)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    return tmp_path


def _base(tmp_path):
    return tmp_path / f"launchpad-work-{os.geteuid()}"


def test_run_folders_are_private_and_new_each_time(tmpdir_here):
    first = private_files.make_work_dir("p-")
    second = private_files.make_work_dir("p-")
    assert first != second
    assert os.path.dirname(first) == str(_base(tmpdir_here))
    for folder in (first, os.path.dirname(first)):
        assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700


@needs_root
def test_a_base_folder_made_by_another_user_is_refused(tmpdir_here):
    _base(tmpdir_here).mkdir(mode=0o700)
    os.chown(_base(tmpdir_here), OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafePathError, match=f"belongs to uid {OTHER_UID}"):
        private_files.make_work_dir("p-")


def test_a_base_folder_open_to_others_is_refused(tmpdir_here):
    _base(tmpdir_here).mkdir()
    os.chmod(_base(tmpdir_here), 0o755)
    with pytest.raises(UnsafePathError, match="mode 755, expected 700"):
        private_files.make_work_dir("p-")


def test_a_base_folder_that_is_a_symlink_is_refused(tmpdir_here):
    (tmpdir_here / "elsewhere").mkdir(mode=0o700)
    _base(tmpdir_here).symlink_to(tmpdir_here / "elsewhere")
    with pytest.raises(UnsafePathError, match="not a folder"):
        private_files.make_work_dir("p-")


def test_a_tmpdir_others_may_write_to_is_refused_unless_sticky(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(UnsafePathError, match="not sticky"):
        private_files.make_work_dir("p-")
    os.chmod(shared, 0o1777)  # as /tmp is: nobody can rename what is another's
    assert private_files.make_work_dir("p-").startswith(str(shared))


@needs_root
def test_a_report_of_another_user_is_refused_without_unpickling_it(tmp_path):
    report = tmp_path / "node.0.failure"
    report.write_bytes(pickle.dumps(MkdirOnUnpickle(str(tmp_path / "pwned"))))
    os.chown(report, OTHER_UID, OTHER_UID)
    refused = spec.read_report(str(report))
    assert refused.reason.startswith("its failure report was refused")
    assert f"belongs to uid {OTHER_UID}" in refused.reason
    assert not (tmp_path / "pwned").exists()


def test_a_report_that_is_a_symlink_or_writable_by_others_is_refused(tmp_path):
    target = tmp_path / "target"
    private_files.write_private(str(target), pickle.dumps(FailureReport("x", "", None)))
    (tmp_path / "link.failure").symlink_to(target)
    assert "refused" in spec.read_report(str(tmp_path / "link.failure")).reason
    os.chmod(target, 0o666)
    assert "others may write" in spec.read_report(str(target)).reason


def test_a_report_that_is_not_a_report_is_a_named_failure(tmp_path):
    path = str(tmp_path / "node.0.failure")
    private_files.write_private(path, pickle.dumps({"not": "a report"}))
    assert spec.read_report(path).reason == "its failure report holds a dict, not a report"
    private_files.write_private(path, b"\x80torn by a kill")
    assert spec.read_report(path).reason.startswith("its failure report could not be read")
    os.unlink(path)
    assert spec.read_report(path) is None  # no report at all: the exit code tells


def test_an_exit_report_that_raises_does_not_stop_later_exits_being_reported(tmp_path):
    spawner = fork_server.ForkServer()
    null = os.open(os.devnull, os.O_RDWR)

    def start(on_exit) -> NodeProcess:
        missing = str(tmp_path / "missing.spec")  # the node fails at once: no such spec
        node = NodeProcess("n/0", missing, PythonProcess(), spawner,
                           lambda: ((null, null, null), False), on_exit=on_exit)
        node.start()
        return node

    def broken(_):
        raise RuntimeError("a reporting bug")

    try:
        assert start(broken).wait(TIMEOUT) is not None
        assert start(lambda _: None).wait(TIMEOUT) is not None  # the reader is still there
    finally:
        spawner.close()
        os.close(null)
