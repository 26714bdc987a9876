"""The run registry: a private record per run, read only where no other user can write, gone
with its run; stale records of killed launchers cleaned by `launchpad ls`."""

from __future__ import annotations

import json
import os
import signal
import stat

import pytest

import launchpad as lp
from launchpad.launch import run_registry
from launchpad.launch.runtime import private_files, run_records
from tests.cli import helpers
from tests.cli.helpers import cli

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.usefixtures("run_dir", "no_leaked_processes", "no_leaked_threads")]
OTHER_UID = 65534  # nobody
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's files needs root")


@pytest.fixture
def running(launch_here):
    """A local_mt program launched here (recorded, as every local launch is); its controller."""
    return launch_here("recorded")


def _mode(path: str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_record_is_private_names_the_run_and_goes_with_it(running, run_dir):
    folder = run_records.find(running.run_id)
    record = os.path.join(folder, run_registry.RECORD)
    assert os.path.dirname(folder) == run_records.root(run_dir)
    assert (_mode(run_records.root(run_dir)), _mode(folder), _mode(record)) == (
        0o700, 0o700, 0o600)
    assert os.listdir(folder) == [run_registry.RECORD]
    written = json.loads(open(record).read())
    assert (written["run_id"], written["program"], written["launch_type"]) == (
        running.run_id, "recorded", "local_mt")
    assert written["launcher"]["pid"] == os.getpid()
    assert written["controller"] == {"address": running.address, "token": running.token}
    assert running.status().run_id == running.run_id
    (listed,), refused = run_registry.runs()
    assert listed.run_id == running.run_id and not refused
    running.stop()
    assert running.wait(timeout=helpers.TIMEOUT)
    assert not os.path.exists(folder)


def test_programs_of_tests_are_not_recorded(request, run_dir):
    program = lp.Program("tested")
    program.add_node(lp.PyNode(helpers.waits), label="waiter")
    controller = lp.launch(program, launch_type="test_mt", test_case=request)
    assert controller.run_id == ""
    assert not os.path.exists(run_records.root(run_dir))
    controller.stop()


def test_a_run_folder_others_may_write_to_is_refused(running):
    folder = run_records.find(running.run_id)
    os.chmod(folder, 0o770)
    try:
        assert run_registry.runs() == ([], [
            f"Cannot keep or read the launch's private files under {folder}: other users may "
            "write to it (mode 770, expected 700). Remove it if it is yours to remove, or set "
            "TMPDIR (for run records: LAUNCHPAD_RUN_DIR) to a folder only you can write to"])
        result = cli("ls")
        assert result.stderr.startswith(f"launchpad: skipped: Cannot keep or read the "
                                        f"launch's private files under {folder}: other users")
        assert result.stdout.startswith("launchpad: no program of this user runs")
        assert os.path.exists(os.path.join(folder, run_registry.RECORD))  # refused, not cleaned
    finally:
        os.chmod(folder, 0o700)
    assert [run.run_id for run in run_registry.runs()[0]] == [running.run_id]


def test_a_record_others_may_write_to_or_a_symlink_is_refused(running, tmp_path):
    record = os.path.join(run_records.find(running.run_id), run_registry.RECORD)
    os.chmod(record, 0o620)
    assert "others may write to it (mode 620)" in run_registry.runs()[1][0]
    os.chmod(record, 0o600)
    os.rename(record, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", record)
    assert "Refused to read" in run_registry.runs()[1][0]
    os.unlink(record)
    os.rename(tmp_path / "elsewhere", record)
    assert len(run_registry.runs()[0]) == 1


def test_a_torn_record_is_named_and_the_others_still_listed(running):
    record = os.path.join(run_records.find(running.run_id), run_registry.RECORD)
    whole = open(record, "rb").read()
    private_files.write_private(record, whole[:len(whole) // 2])
    try:
        listed, (why,) = run_registry.runs()
        assert not listed and why.startswith(f"The record of run {running.run_id!r} could "
                                             "not be read")
    finally:
        private_files.write_private(record, whole)
    assert len(run_registry.runs()[0]) == 1


@needs_root
def test_a_run_folder_of_another_user_is_refused(running):
    folder = run_records.find(running.run_id)
    os.chown(folder, OTHER_UID, OTHER_UID)
    try:
        assert f"belongs to uid {OTHER_UID}" in run_registry.runs()[1][0]
    finally:
        os.chown(folder, os.geteuid(), os.getegid())


def test_the_record_of_a_killed_launcher_is_cleaned_by_ls(run_dir):
    script, run_id = helpers.launch_serving()
    folder = helpers.record_of(run_id).folder
    script.kill_session()  # the launcher and its nodes, SIGKILLed: nothing removes the record
    assert os.path.exists(os.path.join(folder, run_registry.RECORD))
    assert helpers.failed(cli("status", run_id)) == (
        f"launchpad: no running program {run_id!r} of this user (it has ended, or never ran); "
        "running: none")
    assert not os.path.exists(folder)  # cleaned by the search for the run already
    script, run_id = helpers.launch_serving()
    folder = helpers.record_of(run_id).folder
    script.kill_session()
    result = cli("ls")
    assert result.stdout.startswith("launchpad: no program of this user runs"), result.stdout
    assert not os.path.exists(folder)


def test_a_frozen_launcher_is_not_listed_and_its_record_kept(run_dir):
    with helpers.serving() as (script, run_id):
        folder = helpers.record_of(run_id).folder
        os.kill(script.process.pid, signal.SIGSTOP)  # its controller cannot answer
        try:
            assert cli("ls").stdout.startswith("launchpad: no program of this user runs")
            assert os.path.exists(os.path.join(folder, run_registry.RECORD))  # it may wake
        finally:
            os.kill(script.process.pid, signal.SIGCONT)
        assert cli("ls").stdout.splitlines()[1].startswith(run_id)


def test_a_launcher_is_told_apart_from_a_later_process_given_its_pid():
    run = run_records.Run("r", "p", "local_mp", 0.0, "127.0.0.1:1", "", None, "",
                          launcher_pid=os.getpid(),
                          launcher_id=run_registry.process_id(os.getpid()))
    assert not run_registry.launcher_gone(run)
    host, boot, namespace, ticks = run.launcher_id.split(" ")
    later = f"{host} {boot} {namespace} {int(ticks) - 1}"  # the pid, given anew since
    assert run_registry.launcher_gone(run_records.Run(**{**vars(run), "launcher_id": later}))
    rebooted = f"{host} another-boot {namespace} {ticks}"
    assert run_registry.launcher_gone(run_records.Run(**{**vars(run), "launcher_id": rebooted}))
    elsewhere = f"another-host {boot} {namespace} {ticks}"  # not this host's to judge
    assert not run_registry.launcher_gone(
        run_records.Run(**{**vars(run), "launcher_id": elsewhere}))
