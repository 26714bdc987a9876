"""What a user's terminal shows when a node fails (issue 44): each failure said once, in at
most 20 lines, with the user's file, line and source line, under local_mt and local_mp.

Each case is a script run as a user runs it (absl's app.run, an uncaught error); the test
reads everything it printed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import launchpad as lp
from launchpad.launch.runtime import traceback_text
from tests.launch.helpers import TIMEOUT
from tests.processes import ROOT

HEADER = '''\
import threading

from absl import app

import launchpad as lp


'''

MAIN = '''

def main(_):
    lp.launch(make_program(), launch_type=lp.LAUNCH_TYPE.value).wait()


if __name__ == "__main__":
    app.run(main)
'''

TYPO = '''\
class Server:
    def ping(self):
        return "pong"


class Client:
    def __init__(self, server):
        self._server = server

    def run(self):
        self._server.pnig()


def make_program():
    program = lp.Program("typo")
    server = program.add_node(lp.CourierNode(Server), label="server")
    program.add_node(lp.CourierNode(Client, server), label="client")
    return program
'''

CONSTRUCTOR = '''\
class Learner:
    def __init__(self, learning_rate):
        if learning_rate <= 0:
            raise ValueError(f"learning_rate must be positive, got {learning_rate}")

    def run(self):
        pass


def make_program():
    program = lp.Program("constructor")
    program.add_node(lp.CourierNode(Learner, -0.1), label="learner")
    return program
'''

UNPICKLABLE = '''\
class Holder:
    def __init__(self):
        self.lock = threading.Lock()


class Worker:
    def __init__(self, config, holder):
        self.holder = holder

    def run(self):
        pass


def make_program():
    program = lp.Program("unpicklable")
    program.add_node(lp.CourierNode(Worker, {"lr": 1}, Holder()), label="worker")
    return program
'''


def run_script(tmp_path, body: str, *flags: str) -> tuple[str, str, int]:
    """Runs `body` as a user's script; (its path, all it printed, its exit code)."""
    script = tmp_path / "user_program.py"
    script.write_text(HEADER + body + MAIN)
    env = {"PYTHONPATH": ROOT, "PATH": os.environ["PATH"], "HOME": str(tmp_path),
           "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(script), *flags], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120)
    return str(script), done.stdout, done.returncode


def line_of(body: str, text: str) -> int:
    """The line of the script that holds `text`."""
    lines = (HEADER + body + MAIN).split("\n")
    return next(number for number, line in enumerate(lines, 1) if text in line)


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
@pytest.mark.parametrize("body, key, source, function", [
    (TYPO, "has no method 'pnig' (did you mean 'ping'?); its methods are: ping",
     "self._server.pnig()", "run"),
    (CONSTRUCTOR, "ValueError: learning_rate must be positive, got -0.1",
     'raise ValueError(f"learning_rate must be positive, got {learning_rate}")', "__init__"),
], ids=["unknown-method", "constructor-raises"])
def test_a_failed_node_is_said_once_with_the_users_file_and_line(tmp_path, launch_type, body,
                                                                 key, source, function):
    script, printed, code = run_script(tmp_path, body, f"--lp_launch_type={launch_type}")
    lines = printed.rstrip("\n").split("\n")
    assert code == 1, printed
    assert len(lines) <= 20, printed
    assert printed.count(key) == 1, printed
    assert (f'  File "{script}", line {line_of(body, source)}, in {function}\n'
            f"    {source}\n") in printed, printed
    assert "launchpad/nodes" not in printed and "launchpad/courier" not in printed, printed
    assert "; launchpad's frames hidden: --lp_verbose_errors shows them):" in printed


def test_verbose_errors_show_launchpads_frames_too(tmp_path):
    _, printed, _ = run_script(tmp_path, CONSTRUCTOR, "--lp_launch_type=local_mp",
                               "--lp_verbose_errors")
    assert "launchpad/nodes/running.py" in printed, printed
    assert printed.count("ValueError: learning_rate must be positive, got -0.1") == 1


def test_an_unpicklable_argument_is_named_with_its_path_and_the_fix(tmp_path):
    script, printed, code = run_script(tmp_path, UNPICKLABLE, "--lp_launch_type=local_mp")
    lines = printed.rstrip("\n").split("\n")
    assert code == 1 and len(lines) <= 20, printed
    assert ("NodeSerializationError: The nodes associated to the label 'worker' were not "
            "serializable with cloudpickle: node worker/0 cannot be pickled to run "
            "in its own process: its argument 'holder' holds a _thread.lock at "
            "args[1].lock, which cannot be pickled. Make it picklable, or let the node make "
            "it where it runs: pass lp.Deferred(Holder, ...) in its place") in printed, printed
    assert "(pickling said: TypeError: cannot pickle '_thread.lock' object)" in printed
    assert f'File "{script}", line {line_of(UNPICKLABLE, "lp.launch(")}, in main' in printed
    assert "launchpad/launch/runtime" not in printed, printed


def fails_on_its_first_run(marker: str, restarted=None) -> None:
    """Raises on its first run; its restart says so in `restarted` and waits for the stop."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise KeyError("first run")
    restarted.put("up")
    lp.wait_for_stop()


def test_a_failure_shown_by_the_launcher_is_kept_in_the_nodes_log(launch_mp_local, tmp_path,
                                                                 box, capfd):
    restarted = box()
    program = lp.Program("kept")
    with program.group("flaky", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.01)):
        program.add_node(lp.PyNode(fails_on_its_first_run, str(tmp_path / "ran"), restarted))
    controller = launch_mp_local(program)
    assert restarted.get() == "up"  # (the log had the failure before the restart)
    log = controller.read_log("flaky", 0, 0, 1 << 20)[0].decode()
    assert 'in fails_on_its_first_run\n    raise KeyError("first run")' in log
    assert "launchpad/nodes/python/node.py" in log  # the log has it whole
    controller.stop()
    controller.wait(timeout=TIMEOUT)
    shown = capfd.readouterr()
    assert "KeyError" not in shown.out + shown.err  # the node printed none of it on the screen


def test_a_node_whose_output_goes_to_files_writes_its_failure_there(launch_mp_local, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setenv("LAUNCHPAD_LOGGING_DIR", str(tmp_path / "logs"))
    program = lp.Program("to_files")
    program.add_node(lp.PyNode(fails_on_its_first_run, str(tmp_path / "ran")), label="flaky")
    controller = launch_mp_local(program, terminal="output_to_files")
    with pytest.raises(KeyError):
        controller.wait(timeout=TIMEOUT)
    written = (tmp_path / "logs" / "flaky" / "0").read_text()
    assert 'raise KeyError("first run")' in written and traceback_text.HIDDEN_NOTE in written
    assert "launchpad/nodes" not in written, written
