"""terminal='output_to_files': each node's output in `<dir>/<label>/<index>`, where Launchpad
wrote it ($LAUNCHPAD_LOGGING_DIR, else /tmp/launchpad_out), read back by `launchpad logs`; and
never through a folder or file another user could have planted (the launch is refused)."""

from __future__ import annotations

import os
import pathlib
import re
import stat
import sys
import tempfile

import pytest

import launchpad as lp
from launchpad.launch.runtime import output_files, terminals
from launchpad.launch.runtime.errors import UnsafePathError
from tests.cli.helpers import cli
from tests.launch.helpers import TIMEOUT

OTHER_UID = 65534  # nobody
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's files needs root")


@pytest.fixture
def logs(tmp_path, monkeypatch) -> pathlib.Path:
    """$LAUNCHPAD_LOGGING_DIR, a folder of the test's own (not made yet); the run folders in
    the test's own $TMPDIR too, so a refused launch can be seen to leave none."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    monkeypatch.setenv("LAUNCHPAD_LOGGING_DIR", str(tmp_path / "logs"))
    return tmp_path / "logs"


class Speaker:
    """Says its words as it starts, then serves: once it answers, its words are in its file
    (its stdout is that file, and the print is flushed)."""

    def __init__(self, words: str):
        print(words, flush=True)
        print(f"{words} on stderr", file=sys.stderr, flush=True)

    def ping(self) -> str:
        return "pong"


def _speakers(name: str = "speaking") -> tuple[lp.Program, list]:
    program = lp.Program(name)
    with program.group("speaker"):
        handles = [program.add_node(lp.CourierNode(Speaker, words))
                   for words in ("first", "second")]
    return program, handles


def _modes(path: pathlib.Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_each_node_writes_to_label_slash_index_in_the_logging_dir(launch_mp, logs, capsys):
    logs.mkdir(mode=0o700)
    (logs / "speaker").mkdir(mode=0o700)
    (logs / "speaker" / "0").write_text("a line of an earlier launch\n")
    program, handles = _speakers()
    controller = launch_mp(program, terminal="output_to_files")
    assert [h.dereference().ping() for h in handles] == ["pong", "pong"]
    # A launch starts its files afresh, as Launchpad's did; stdout and stderr go to the one file.
    assert (logs / "speaker" / "0").read_text() == "first\nfirst on stderr\n"
    assert (logs / "speaker" / "1").read_text() == "second\nsecond on stderr\n"
    assert sorted(p.name for p in logs.iterdir()) == ["speaker"]
    assert sorted(p.name for p in (logs / "speaker").iterdir()) == ["0", "1"]
    assert _modes(logs / "speaker" / "1") == 0o600
    assert controller.log_dir == str(logs)
    assert (f"Logs are being output to: {logs}. The logging directory can be customized by "
            "setting the LAUNCHPAD_LOGGING_DIR environment variable.") in capsys.readouterr().err
    # The controller reads the node's output from there (`launchpad logs`, the dashboard).
    assert controller.read_log("speaker", 1, 0, 1 << 20) == (b"second\nsecond on stderr\n",
                                                             True)


def test_launchpad_logs_reads_a_nodes_output_from_its_file(logs, no_leaked_processes):
    program, handles = _speakers("logged")
    controller = lp.launch(program, launch_type="local_mp", terminal="output_to_files")
    try:
        handles[0].dereference().ping()
        result = cli("logs", controller.run_id, "speaker/0")
        assert (result.returncode, result.stdout) == (0, "first\nfirst on stderr\n"), \
            result.stderr
    finally:
        controller.stop()
        assert controller.wait(timeout=TIMEOUT)
    assert (logs / "speaker" / "0").read_text() == "first\nfirst on stderr\n"  # it stays


def _fails_its_first_run(marker: str) -> None:
    first = not os.path.exists(marker)
    print("first run" if first else "second run", flush=True)
    if first:
        pathlib.Path(marker).touch()
        raise RuntimeError("the first run fails")


def test_a_restarted_node_appends_to_its_file(launch_mp, logs, tmp_path):
    program = lp.Program("restarted")
    with program.group("flaky", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.01)):
        program.add_node(lp.PyNode(_fails_its_first_run, str(tmp_path / "ran")))
    controller = launch_mp(program, terminal="output_to_files")
    assert controller.wait(timeout=TIMEOUT)
    assert controller.restarts() == {"flaky/0": 1}
    text = (logs / "flaky" / "0").read_text()
    assert text.startswith("first run\n") and text.endswith("second run\n"), text
    assert "RuntimeError: the first run fails" in text  # why it was restarted
    assert _modes(logs) == _modes(logs / "flaky") == 0o700  # made by the launch
    assert _modes(logs / "flaky" / "0") == 0o600


def test_without_the_variable_the_files_go_to_tmp_launchpad_out(launch_mp, monkeypatch,
                                                                tmp_path, capsys):
    monkeypatch.delenv("LAUNCHPAD_LOGGING_DIR")
    assert output_files.logging_dir() == "/tmp/launchpad_out"  # Launchpad's place
    # ... which this test does not write to: the same default, in a folder of its own.
    default = tmp_path / "launchpad_out"
    monkeypatch.setattr(output_files, "DEFAULT_LOGGING_DIR", str(default))
    program, handles = _speakers()
    launch_mp(program, terminal="output_to_files")
    handles[1].dereference().ping()
    assert (default / "speaker" / "1").read_text() == "second\nsecond on stderr\n"
    assert f"Logs are being output to: {default}." in capsys.readouterr().err


def _refused(program: lp.Program, logs: pathlib.Path, match: str) -> None:
    """Launching `program` is refused with an error naming `match`; no node started, and
    the launch left no run folder."""
    with pytest.raises(UnsafePathError, match=match) as refusal:
        controller = lp.launch(program, launch_type="local_mp", terminal="output_to_files")
        controller.stop()  # (not refused: the test fails, once the program has ended)
        controller.wait(timeout=TIMEOUT)
    assert "Remove it if it is yours to remove, or set LAUNCHPAD_LOGGING_DIR" in \
        str(refusal.value)
    runs = logs.parent / f"launchpad-work-{os.geteuid()}"
    assert not runs.exists() or not list(runs.iterdir())


@pytest.mark.usefixtures("no_leaked_processes")
@pytest.mark.parametrize("where", ["logs", "logs/speaker"])
def test_a_symlinked_folder_is_refused(logs, tmp_path, where):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder = tmp_path / where
    folder.parent.mkdir(exist_ok=True, mode=0o700)
    folder.symlink_to(elsewhere)
    _refused(_speakers()[0], logs, f"under {re.escape(str(folder))}: it is not a folder")
    assert not list(elsewhere.iterdir())


@pytest.mark.usefixtures("no_leaked_processes")
@pytest.mark.parametrize("where", ["logs", "logs/speaker"])
def test_a_folder_others_may_write_to_is_refused(logs, tmp_path, where):
    folder = tmp_path / where
    folder.mkdir(parents=True, mode=0o700)
    folder.chmod(0o777)
    _refused(_speakers()[0], logs, f"under {re.escape(str(folder))}: other users may write "
                                   r"to it \(mode 777")
    assert not (logs / "speaker" / "0").exists()


@pytest.mark.usefixtures("no_leaked_processes")
def test_a_symlink_at_a_files_path_is_refused_and_its_target_untouched(logs, tmp_path):
    (logs / "speaker").mkdir(parents=True, mode=0o700)
    target = tmp_path / "precious"
    target.write_text("not to be emptied\n")
    (logs / "speaker" / "1").symlink_to(target)
    _refused(_speakers()[0], logs,
             f"under {re.escape(str(logs / 'speaker' / '1'))}: it is a symbolic link")
    assert target.read_text() == "not to be emptied\n"


@needs_root
@pytest.mark.usefixtures("no_leaked_processes")
def test_a_file_or_folder_of_another_user_is_refused(logs):
    (logs / "speaker").mkdir(parents=True, mode=0o700)
    theirs = logs / "speaker" / "0"
    theirs.write_text("theirs\n")
    os.chown(theirs, OTHER_UID, OTHER_UID)
    _refused(_speakers()[0], logs, f"under {re.escape(str(theirs))}: it belongs to uid "
                                   f"{OTHER_UID}")
    assert theirs.read_text() == "theirs\n"
    theirs.unlink()
    os.chown(logs / "speaker", OTHER_UID, OTHER_UID)
    _refused(_speakers()[0], logs, f"under {re.escape(str(logs / 'speaker'))}: it belongs "
                                   f"to uid {OTHER_UID}")


@pytest.mark.parametrize("label", ["..", "a/../b"])
def test_a_label_that_cannot_be_a_folder_is_refused(logs, label, no_leaked_processes):
    program = lp.Program("climbing")
    program.add_node(lp.PyNode(print, "hello"), label=label)
    refused = f"Group {re.escape(repr(label))} cannot have a folder of its own"
    with pytest.raises(ValueError, match=refused):
        lp.launch(program, launch_type="local_mp", terminal="output_to_files").wait(timeout=TIMEOUT)
    assert not (logs.parent / "0").exists() and not (logs / "b").exists()  # ../0, b/0


def test_a_cluster_launch_keeps_the_files_in_its_run_folder(logs, tmp_path):
    """Slurm's terminal (made without the nodes' names): `<run_dir>/<label>.<index>.log` on
    the filesystem its hosts share, as before; a restart appends there too."""
    terminal = terminals.make("output_to_files", "p", str(tmp_path))
    for words in (b"first run\n", b"second run\n"):
        stdio, close_after = terminal.open("speaker/0")
        os.write(stdio[1], words)
        assert close_after
        for fd in set(stdio):
            os.close(fd)
    terminal.close()
    assert terminal.log_of("speaker/0") == str(tmp_path / "speaker.0.log")
    assert (tmp_path / "speaker.0.log").read_text() == "first run\nsecond run\n"
    assert not logs.exists()
