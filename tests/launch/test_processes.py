"""What only process launchers do: exit codes and signals, killing, orphans, Ctrl+C,
per-group process settings, terminals (output_to_files: test_output_to_files.py). A node's
process that exits, is killed, ignores the stop or outlives its killed launcher is tested
under local_mp, slurm and ray (tests/FAULTS.md)."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import launchpad as lp
from tests.launch.conftest import CLUSTER_LAUNCH_TYPES, NODE_PROCESS_LAUNCH_TYPES
from tests.launch.helpers import TIMEOUT
from tests.launch.launchers import run_launcher, wait_for_line, wait_gone


class Pid:
    def pid(self):
        return os.getpid()


class Parent(Pid):
    """Serves its pid and its child's (a process it started)."""

    def __init__(self):
        self._child = subprocess.Popen(["sleep", "600"])

    def child_pid(self):
        return self._child.pid


def _exit_with(code):
    os._exit(code)


def _wait_for_end(controller, name):
    with pytest.raises(lp.NodeFailedError, match=name) as info:
        controller.wait(timeout=TIMEOUT)
    return info.value


# Each launcher's word for a node's process killed by SIGKILL (an agent's, as a local one's).
_KILLED = {"local_mp": "killed by signal SIGKILL", "slurm": "killed by signal SIGKILL",
           "ray": "its Ray actor died"}


@pytest.mark.parametrize("launch_failing", NODE_PROCESS_LAUNCH_TYPES, indirect=True)
def test_a_node_killed_by_a_signal_fails_the_program_naming_it_and_takes_its_child(
        launch_failing):
    program = lp.Program("killed")
    handle = program.add_node(lp.CourierNode(Parent), label="victim")
    program.add_node(lp.CourierNode(Pid), label="bystander")
    controller = launch_failing(program)
    victim = handle.dereference()
    child = victim.child_pid()
    os.kill(victim.pid(), signal.SIGKILL)  # on its host (a network namespace: same pids)
    failure = _wait_for_end(controller, "victim/0")
    assert _KILLED[launch_failing.launch_type] in failure.reason
    assert controller.exit_codes()["victim/0"] == -signal.SIGKILL
    assert wait_gone([child], TIMEOUT), "what the killed node started outlived it"


def _forever() -> None:
    lp.wait_for_stop()


def test_a_killed_node_is_restarted_by_its_groups_policy_in_a_new_process(launch_processes):
    """Under slurm the new run is a new fork of the same host agent; under ray a new actor."""
    program = lp.Program("restarted")
    with program.group("worker", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.01)):
        program.add_node(lp.PyNode(_forever))
    controller = launch_processes(program)
    assert controller.wait_for_started("worker/0", TIMEOUT)
    first = controller.node_pids()["worker/0"]
    os.kill(first, signal.SIGKILL)  # on its host (a network namespace: same pids)
    assert controller.wait_for_restarts("worker/0", 1, TIMEOUT)
    assert controller.wait_for_started("worker/0", TIMEOUT)
    assert controller.node_pids()["worker/0"] != first
    assert controller.restarts() == {"worker/0": 1}
    (failure,) = next(n for n in controller.status().nodes if n.name == "worker/0").failures
    assert _KILLED[launch_processes.launch_type] in failure.reason and failure.restarted


# Ray does not say how an actor's process ended, only that it died.
_EXITED_3 = {"local_mp": "exited with code 3", "slurm": "exited with code 3",
             "ray": "its Ray actor died"}


@pytest.mark.parametrize("launch_failing", NODE_PROCESS_LAUNCH_TYPES, indirect=True)
def test_a_node_exiting_non_zero_fails_the_program_with_its_code(launch_failing):
    program = lp.Program("exits")
    program.add_node(lp.PyNode(_exit_with, 3), label="quitter")
    program.add_node(lp.CourierNode(Pid), label="bystander")
    controller = launch_failing(program)
    failure = _wait_for_end(controller, "quitter/0")
    assert _EXITED_3[launch_failing.launch_type] in failure.reason


class IgnoresStop:
    def __init__(self):
        # As TensorFlow workers do; a Ray actor's code runs off the main thread, where no
        # signal can be set (and Ray's end of an actor sends none).
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def pid(self):
        return os.getpid()

    def run(self):
        time.sleep(3600)


@pytest.mark.parametrize("launch_failing", NODE_PROCESS_LAUNCH_TYPES, indirect=True)
def test_a_node_ignoring_stop_and_sigterm_is_killed_after_the_grace_period(launch_failing):
    program = lp.Program("stubborn")
    handle = program.add_node(lp.CourierNode(IgnoresStop), label="stubborn")
    controller = launch_failing(program, termination_notice_secs=0.2)
    pid = handle.dereference().pid()
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)  # not a failure: it was ended by its launcher
    assert controller.exit_codes()["stubborn/0"] == -signal.SIGKILL
    assert wait_gone([pid], TIMEOUT)  # (on a cluster: the node's own process, on its host)


@pytest.mark.parametrize("attempt", range(3))
def test_a_kill_right_after_launch_reaches_nodes_still_starting(attempt, launch_mp_local):
    program = lp.Program("stubborn")
    with program.group("stubborn"):
        for _ in range(4):
            program.add_node(lp.CourierNode(IgnoresStop))
    controller = launch_mp_local(program, termination_notice_secs=60)
    controller.kill()  # while forks may still be making their process groups
    assert controller.wait(timeout=TIMEOUT), \
        "a node outlived the kill (until the 60 s grace period)"
    assert set(controller.exit_codes().values()) == {-signal.SIGKILL}


@pytest.mark.parametrize("launch_type", NODE_PROCESS_LAUNCH_TYPES)
def test_nodes_of_a_killed_launcher_exit_by_themselves(launch_type, request, cluster_first,
                                                       no_leaked_processes, monkeypatch):
    if launch_type in CLUSTER_LAUNCH_TYPES:  # the launcher finds the session's cluster
        for name, value in request.getfixturevalue(f"{launch_type}_cluster").env.items():
            monkeypatch.setenv(name, value)
    launcher, pids = run_launcher("polite", 60, launch_type)
    launcher.kill()
    launcher.wait()
    launcher.stdout.close()
    # The nodes notice their controller is gone, stop, and exit (long before the grace period
    # is over); Ray ends the actors of a driver that died, Slurm the job whose holder ended.
    assert wait_gone(pids, TIMEOUT)
    if launch_type == "slurm":
        deadline = time.monotonic() + TIMEOUT
        while _slurm_jobs_named("polite") and time.monotonic() < deadline:
            time.sleep(0.2)  # polls squeue: Slurm has no event for a job's end
        assert not _slurm_jobs_named("polite"), "the job outlived its killed launcher"


def _slurm_jobs_named(name):
    return subprocess.run(["squeue", "-h", "-n", f"lp-{name}", "-o", "%i"], capture_output=True,
                          text=True, check=True).stdout.split()


@pytest.mark.usefixtures("no_leaked_processes")
def test_what_a_node_started_ends_with_it_when_its_launcher_is_killed():
    launcher, pids = run_launcher("parent", grace=1)
    child = int(launcher.stdout.readline().split()[1])
    launcher.kill()
    launcher.wait()
    launcher.stdout.close()
    assert wait_gone([*pids, child], TIMEOUT), "the node's own process outlived it"


def _start_child_and_return(box):
    box.put(subprocess.Popen(["sleep", "600"]).pid)


def test_what_a_node_started_ends_with_it_when_its_code_returns(launch_mp, box):
    results = box()
    program = lp.Program("parent")
    program.add_node(lp.PyNode(_start_child_and_return, results), label="parent")
    assert launch_mp(program).wait(timeout=TIMEOUT)
    assert wait_gone([results.get()], TIMEOUT)


@pytest.mark.usefixtures("no_leaked_processes")
def test_a_node_missed_by_a_launcher_killed_while_stopping_exits_after_the_grace_period():
    launcher, pids = run_launcher("stubborn", grace=1)
    launcher.send_signal(signal.SIGINT)
    wait_for_line(launcher, "launchpad: stopping")
    launcher.kill()  # before it could kill the node, which ignores the stop and SIGTERM
    launcher.wait()
    launcher.stdout.close()
    assert wait_gone(pids, TIMEOUT)


@pytest.mark.usefixtures("no_leaked_processes")
def test_first_ctrl_c_stops_gracefully():
    launcher, pids = run_launcher("polite")
    launcher.send_signal(signal.SIGINT)
    out, _ = launcher.communicate(timeout=TIMEOUT)
    assert launcher.returncode == 0 and "Program stopped" in out
    assert wait_gone(pids, TIMEOUT)


@pytest.mark.usefixtures("no_leaked_processes")
def test_second_ctrl_c_kills_at_once():
    launcher, pids = run_launcher("stubborn")
    launcher.send_signal(signal.SIGINT)  # stops; the node ignores it (grace: 60 s)
    # Two signals sent at once reach Python's handler as one: a second press comes later.
    wait_for_line(launcher, "launchpad: stopping")
    launcher.send_signal(signal.SIGINT)
    out, _ = launcher.communicate(timeout=TIMEOUT)
    assert launcher.returncode == 0 and "Program stopped" in out
    assert wait_gone(pids, TIMEOUT)


def _report_environment(box):
    box.put((os.environ.get("LP_TEST_VAR"), sys.argv[1:], sys.executable))


@pytest.mark.parametrize("interpreter", [None, sys.executable])
def test_python_process_sets_env_and_args_per_group(interpreter, launch_mp, box):
    results = box()
    program = lp.Program("settings")
    program.add_node(lp.PyNode(_report_environment, results), label="configured")
    settings = lp.PythonProcess(args={"flag": 1}, env={"LP_TEST_VAR": "set"},
                                interpreter=interpreter)
    assert launch_mp(program, local_resources={"configured": settings}).wait(timeout=TIMEOUT)
    assert results.get() == ("set", ["--flag=1"], sys.executable)


def _report_process_group(box):
    box.put((os.getpid(), os.getpgid(0), os.getsid(0)))


@pytest.mark.parametrize("interpreter", [None, sys.executable])
def test_a_node_leads_its_own_process_group_in_the_launchers_session(interpreter, launch_mp,
                                                                     box):
    results = box()
    program = lp.Program("groups")
    program.add_node(lp.PyNode(_report_process_group, results), label="node")
    settings = lp.PythonProcess(interpreter=interpreter)
    assert launch_mp(program, local_resources={"node": settings}).wait(timeout=TIMEOUT)
    pid, group, session = results.get()
    assert group == pid  # so a signal reaches the node and all it started
    assert session == os.getsid(0)  # so the program shares one scheduler autogroup


@pytest.mark.usefixtures("no_leaked_processes")
def test_a_node_that_cannot_start_fails_the_launch_naming_it_and_ends_the_others(caplog):
    program = lp.Program("unstartable")
    program.add_node(lp.CourierNode(Pid), label="fine")
    program.add_node(lp.PyNode(int), label="broken")
    broken = lp.PythonProcess(interpreter="/nonexistent/python")
    with pytest.raises(RuntimeError, match="Cannot start the process of node broken/0"):
        lp.launch(program, launch_type="local_mp", local_resources={"broken": broken})
    # The launcher knew the broken node never ran: it did not signal or wait for it.
    assert not [r for r in caplog.records if "broken/0" in r.getMessage()]


def test_bad_local_resources_are_named():
    program = lp.Program("p")
    program.add_node(lp.PyNode(int), label="noop")
    with pytest.raises(TypeError, match=r"local_resources\['noop'\] must be an lp.PythonProcess"):
        lp.launch(program, launch_type="local_mp", local_resources={"noop": {"env": {}}})
    with pytest.raises(ValueError, match="Unknown terminal 'nope'"):
        lp.launch(program, launch_type="local_mp", terminal="nope")


def _say(words):
    print(words, flush=True)


def test_current_terminal_prefixes_each_line_with_the_node(launch_mp, capsys):
    program = lp.Program("speaker")
    program.add_node(lp.PyNode(_say, "hello\nworld"), label="speaker")
    assert launch_mp(program, terminal="current_terminal").wait(timeout=TIMEOUT)
    out = capsys.readouterr().out
    assert "[speaker/0] hello\n[speaker/0] world\n" in out


def _tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30,
                          check=True).stdout


def test_tmux_session_shows_each_node_in_its_own_window(launch_mp, capsys, monkeypatch,
                                                        tmp_path):
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))  # a tmux server of this test's own
    monkeypatch.delenv("TMUX", raising=False)
    program = lp.Program("windows")
    with program.group("speaker"):
        program.add_node(lp.PyNode(_say, "hello from the first"))
        program.add_node(lp.PyNode(_say, "hello from the second"))
    try:
        controller = launch_mp(program, terminal="tmux_session")
        assert controller.wait(timeout=TIMEOUT)
        assert controller.exit_codes() == {"speaker/0": 0, "speaker/1": 0}
        session = capsys.readouterr().err.split("tmux attach -t ")[1].split()[0]
        windows = dict(line.split() for line in _tmux(
            "list-windows", "-t", session, "-F", "#{window_name} #{window_index}").splitlines())
        assert sorted(windows) == ["speaker/0", "speaker/1"]
        for name, words in (("speaker/0", "first"), ("speaker/1", "second")):
            deadline = time.monotonic() + TIMEOUT
            shown = ""
            while f"hello from the {words}" not in shown and time.monotonic() < deadline:
                time.sleep(0.05)  # tmux draws the pane's output when it gets to it
                shown = _tmux("capture-pane", "-p", "-t", f"{session}:{windows[name]}")
            assert f"hello from the {words}" in shown
    finally:
        subprocess.run(["tmux", "kill-server"], capture_output=True, timeout=30)


class Pong:
    def ping(self):
        return "pong"


def test_a_hundred_nodes_start_register_and_answer(launch_mp):
    program = lp.Program("hundred")
    with program.group("pong"):
        handles = [program.add_node(lp.CourierNode(Pong)) for _ in range(100)]
    controller = launch_mp(program)
    futures = [h.dereference().futures.ping() for h in handles]
    assert [f.result(timeout=60) for f in futures] == ["pong"] * 100
    assert len(set(controller.pids().values())) == 100


def _report_heavy_modules(box):
    box.put(sorted(m for m in ("tensorflow", "reverb", "jax", "torch") if m in sys.modules))


def test_a_node_process_imports_only_what_its_node_needs(launch_mp, box):
    results = box()
    program = lp.Program("light")
    program.add_node(lp.PyNode(_report_heavy_modules, results), label="light")
    assert launch_mp(program).wait(timeout=TIMEOUT)
    assert results.get() == []


def test_current_terminal_keeps_logs_and_a_last_line_without_an_end(tmp_path):
    import io

    from launchpad.launch.runtime import terminals
    out = io.StringIO()
    terminal = terminals.CurrentTerminal(out, log_dir=str(tmp_path))
    (_, write_end, _), _ = terminal.open("node/0")
    os.write(write_end, b"first\nlast words without an end")
    os.close(write_end)
    terminal.close()
    assert out.getvalue() == "[node/0] first\n[node/0] last words without an end\n"
    assert (tmp_path / "node.0.log").read_text() == "first\nlast words without an end\n"
