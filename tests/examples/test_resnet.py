"""The ResNet example (examples/resnet) as its users run it, in a subprocess: it learns in each of
its four modes, beats chance on the held-out digits, resumes from its checkpoint after the whole
launch is killed, and refuses bad flags before launching anything."""

from __future__ import annotations

import contextlib
import os
import pathlib
import queue
import re
import select
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.examples.test_examples import REPO_ROOT, run_example
from tests.stacks import needs_tensorflow

TEST_IMAGES = 359  # the held-out fifth of scikit-learn's 1,797 digits
# A run's last line: its accuracy on the test images.
FINAL_ACCURACY = re.compile(rf"driver: test accuracy (\d\.\d+) on {TEST_IMAGES} held-out digits "
                            r"after (\d+) steps")


@needs_tensorflow
@pytest.mark.parametrize("launch_type, args, steps, replicator", [
    ("local_mt", [], 40, "one_device, 1 replica(s)"),
    ("local_mp", ["--devices=2"], 40, "local_devices, 2 replica(s)"),
    ("local_mp", ["--num_workers=2"], 40, "sync_workers, 2 replica(s)"),
    # Async SGD applies stale gradients: momentum 0.9 at the default rate can make the loss
    # climb for tens of steps; a third of it falls steadily, though under Keras 3 it can
    # stay near its start for 60 steps before it does.
    ("local_mp", ["--num_workers=2", "--mode=async", "--learning_rate=0.01"], 100,
     "async_parameter_servers"),
], ids=["one_device", "two_devices", "two_sync_workers", "async"])
def test_resnet_learns_in_every_mode(launch_type: str, args: list[str], steps: int,
                                     replicator: str):
    """The same trainer, one flag apart: each run's loss falls and its test accuracy is
    reported. TensorFlow processes on 2 cores need more than the other examples' time."""
    result = run_example("resnet", [f"--steps={steps}", *args], launch_type, timeout=240)
    report = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, report
    assert f"driver: training resnet50_w8, 382,402 parameters, <Replicator {replicator}" in (
        result.stdout), report
    assert "driver: the loss fell from" in result.stdout, report
    final = FINAL_ACCURACY.search(result.stdout)
    assert final and int(final[2]) == steps, report
    assert "Program stopped cleanly." in result.stdout, report


@needs_tensorflow
def test_resnet_beats_chance_on_the_held_out_digits():
    """After 120 steps (under 3 passes over the training digits) the test accuracy is at least
    five times chance (0.1 for ten balanced classes); such runs measured 0.72-0.88."""
    result = run_example("resnet", ["--steps=120", "--steps_per_call=60"], timeout=240)
    report = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, report
    final = FINAL_ACCURACY.search(result.stdout)
    assert final and final[2] == "120", report
    assert float(final[1]) >= 0.5, report


class Launch:
    """`python -m examples.resnet.launch ARGS` in a session of its own, its output (stdout and
    stderr together) read line by line as it comes; `kill()` SIGKILLs the whole launch."""

    def __init__(self, args: list[str]):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "examples.resnet.launch", *args], cwd=REPO_ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        """The first match of `pattern` in the lines to come, within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {pattern!r} within {timeout} s:\n{self.output}") from None
            if line is None:
                raise AssertionError(f"the launch ended before {pattern!r}:\n{self.output}")
            self.lines.append(line)
            if match := re.search(pattern, line):
                return match

    def kill(self, timeout: float = 30) -> None:
        """SIGKILLs every process of the launch and waits until none is left. Each node runs
        in a process group of its own (in the launcher's session), so killing the launcher's
        group alone would leave the nodes to end by themselves: the session is killed."""
        deadline = time.monotonic() + timeout
        killed = set()
        while members := session_members(self.process.pid):  # until nothing forks any more
            assert time.monotonic() < deadline, f"still alive after SIGKILL: {members}"
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    kill_and_wait(pid, max(0.0, deadline - time.monotonic()))
                    killed.add(pid)
        self.process.wait(timeout)
        for pid in killed - {self.process.pid}:  # orphans re-parented to this subreaper
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        self.process.stdout.close()

    @property
    def output(self) -> str:
        return "".join(self.lines)


def session_members(session: int) -> list[int]:
    """Pids of the live (not zombie) processes of `session`, from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if entry.isdigit():
                with open(f"/proc/{entry}/stat") as f:
                    state, _, _, sid = f.read().rsplit(")", 1)[1].split()[:4]
                if int(sid) == session and state != "Z":
                    members.append(int(entry))
    return members


def kill_and_wait(pid: int, timeout: float) -> None:
    """SIGKILLs process `pid` through a pidfd (no pid reuse race) and waits for it to end."""
    pidfd = os.pidfd_open(pid)
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        ended, _, _ = select.select([pidfd], [], [], timeout)
        assert ended, f"process {pid} did not end within {timeout:.3g} s of SIGKILL"
    finally:
        os.close(pidfd)


def latest_checkpoint_step(directory: pathlib.Path) -> int:
    """The step of the checkpoint that `directory`'s `checkpoint` file names as the latest."""
    state = (directory / "checkpoint").read_text()
    return int(re.search(r'model_checkpoint_path: ".*ckpt-(\d+)"', state)[1])


@needs_tensorflow
@pytest.mark.usefixtures("no_leaked_processes")
def test_resnet_resumes_from_its_checkpoint_after_a_kill(tmp_path: pathlib.Path):
    """Two sync workers, killed (SIGKILL, every process of the launch) once the chief has
    written its first checkpoint, then launched again: the step counter continues from the
    latest checkpoint and the run ends with a test accuracy."""
    checkpoints = tmp_path / "checkpoints"
    flags = ["--lp_launch_type=local_mp", "--num_workers=2", f"--checkpoint_dir={checkpoints}",
             "--checkpoint_every=10", "--steps_per_call=10"]
    killed = Launch([*flags, "--steps=1000"])
    try:
        written = killed.wait_for(r"trainer: wrote checkpoint (\S+)", timeout=240)[1]
        assert pathlib.Path(f"{written}.index").is_file(), killed.output
    finally:
        killed.kill()
    assert session_members(killed.process.pid) == []
    step = latest_checkpoint_step(checkpoints)
    assert step >= 10 and step % 10 == 0, killed.output

    result = run_example("resnet", [*flags[1:], f"--steps={step + 10}"], "local_mp",
                         timeout=240)
    report = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, report
    assert f"driver: resumed from step {step}\n" in result.stdout, report
    assert f"driver: steps {step + 1}-{step + 10}: loss " in result.stdout, report
    final = FINAL_ACCURACY.search(result.stdout)
    assert final and int(final[2]) == step + 10, report
    assert latest_checkpoint_step(checkpoints) == step + 10, report


@pytest.mark.parametrize("args, error", [
    (["--devices=0"], "flag --devices=0: 0 is not a positive integer"),
    (["--num_ps=2"], "--num_ps is for --mode=async"),
    (["--num_workers=2", "--global_batch=33"],
     "--global_batch=33 does not split evenly over 2 replicas"),
    (["--checkpoint_every=10"], "--checkpoint_every needs --checkpoint_dir"),
    (["--checkpoint_dir=README.md"], "flag --checkpoint_dir=README.md: must be a directory"),
], ids=["devices", "num_ps", "global_batch", "checkpoint_every", "checkpoint_dir"])
def test_resnet_refuses_bad_flags_before_launching(tmp_path: pathlib.Path, args: list[str],
                                                    error: str):
    """The error names the flag, and no launch began (a process launch makes its run folder
    in the temporary folder first)."""
    result = run_example("resnet", args, "local_mp", env={"TMPDIR": str(tmp_path)})
    assert result.returncode != 0, result.stdout
    assert error in result.stderr, result.stderr
    assert not list(tmp_path.iterdir()), result.stderr
