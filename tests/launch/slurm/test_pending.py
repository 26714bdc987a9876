"""A Slurm launch is never silent while its job pends, and its launcher's end ends its job:
on the real test Slurm (tests/cluster), a job held pending by another that fills the cluster
is reported - printed, and `pending` in `launchpad status` - with Slurm's reason; a wait
past `pending_timeout_secs` fails, named; and SIGTERM or SIGHUP of the launching process,
whether its job pends or runs, leaves no job in squeue within 10 s."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
import uuid

import pytest

import launchpad as lp
from tests.cli.helpers import cli
from tests.processes import Script

LEFT_WITHIN_SECS = 10  # the bound on a job outliving its launcher's signal
TIMEOUT = 60

pytestmark = pytest.mark.usefixtures("no_leaked_processes")


def _jobs_named(name: str) -> list[str]:
    done = subprocess.run(["squeue", "-h", "-n", f"lp-{name}", "-o", "%i %T"],
                          capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def _until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.1)  # squeue is polled: Slurm has no event for a job's state


@pytest.fixture
def cluster_env(slurm_cluster, monkeypatch):
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    return slurm_cluster


@pytest.fixture
def full_cluster(cluster_env):
    """A job holding every CPU of the test cluster, running; cancelled after the test."""
    cluster = cluster_env
    job = cluster.run(["sbatch", "--parsable", f"--nodes={len(cluster.node_names)}",
                       "--ntasks-per-node=1", f"--cpus-per-task={cluster.cpus_per_host}",
                       "--job-name=filler", "--output=/dev/null", "--wrap",
                       "exec sleep 600"]).stdout.strip()
    try:
        _until(lambda: "RUNNING" in cluster.run(["squeue", "-h", "-j", job, "-o", "%T"])
               .stdout, TIMEOUT, "the filler job runs")
        yield job
    finally:
        cluster.run(["scancel", job])
        _until(lambda: not cluster.run(["squeue", "-h", "-j", job], check=False)
               .stdout.strip(), TIMEOUT, "the filler job is gone")


def _launch(tmp_path, *extra: str) -> tuple[Script, str, str]:
    name = f"wait-{uuid.uuid4().hex[:6]}"
    script = Script(["-m", "tests.launch.slurm.waiting", name, str(tmp_path), *extra],
                    new_session=True, timeout=TIMEOUT)
    return script, name, script.wait_for(r"^launched (\S+)$")[1]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["term", "hup"])
def test_a_pending_job_is_reported_with_its_reason_and_a_signal_cancels_it(
        full_cluster, tmp_path, signum):
    script, name, run_id = _launch(tmp_path)
    try:
        said = script.wait_for(r"Slurm job pending \((Resources|Priority)\)")[1]
        status = cli("status", run_id)
        assert status.returncode == 0, status.stderr
        assert ": pending" in status.stdout and f"pending: Slurm job pending ({said}" in (
            status.stdout), status.stdout
        assert [line.split()[1] for line in _jobs_named(name)] == ["PENDING"]
        script.process.send_signal(signum)
        _until(lambda: not _jobs_named(name), LEFT_WITHIN_SECS, "the pending job is gone")
        assert script.finish() == 0, script.output
        assert "ended" in script.output
    finally:
        script.kill_session()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["term", "hup"])
def test_a_signal_to_the_launcher_of_a_running_job_stops_its_program_and_ends_the_job(
        cluster_env, tmp_path, signum):
    script, name, run_id = _launch(tmp_path)
    try:
        _until(lambda: cli("status", run_id).stdout.count("running") >= 2, TIMEOUT,
               "the program and its node run")
        script.process.send_signal(signum)
        _until(lambda: not _jobs_named(name), LEFT_WITHIN_SECS, "the job is gone")
        assert script.finish() == 0, script.output
        assert "stopping" in script.output and "ended" in script.output
    finally:
        script.kill_session()


def _fails_named_and_its_job_goes(script: Script, name: str, *said: str) -> None:
    """The launch fails saying each of `said`, its job leaves squeue, the script ends."""
    try:
        failure = script.wait_for(r"^failed: (.*)$")[1]
        assert all(words in failure for words in said), failure
        _until(lambda: not _jobs_named(name), LEFT_WITHIN_SECS, "the job is gone")
        assert script.finish() == 0, script.output
    finally:
        script.kill_session()


def test_a_job_pending_past_its_timeout_fails_the_launch_named_and_is_cancelled(
        full_cluster, tmp_path):
    script, name, _ = _launch(tmp_path, "2")
    _fails_named_and_its_job_goes(script, name, "still pends", "pending_timeout_secs=2")


def test_a_job_on_a_partition_that_is_down_fails_at_once_named(cluster_env, tmp_path):
    cluster = cluster_env
    cluster.run(["scontrol", "update", "PartitionName=main", "State=DOWN"])
    try:
        script, name, _ = _launch(tmp_path)
        _fails_named_and_its_job_goes(script, name, "can never start", "PartitionDown")
    finally:
        with contextlib.suppress(AssertionError):
            cluster.run(["scontrol", "update", "PartitionName=main", "State=UP"])


def test_a_detached_run_whose_job_pends_is_listed_pending_and_stopping_it_cancels_it(
        full_cluster, tmp_path):
    """Its controller would run inside the job, so nothing answers for it yet: the run
    record and squeue do - in `launchpad ls` and `status`, and in `lp.attach(...).status()`
    - and `launchpad stop` cancels the job."""
    name = f"wait-{uuid.uuid4().hex[:6]}"
    program = lp.Program(name)
    program.add_node(lp.PyNode(lp.wait_for_stop), label="waiter")
    controller = lp.launch(program, launch_type="slurm", detach=True,
                           slurm=lp.SlurmSettings(run_dir=str(tmp_path)))
    try:
        run_dir = ["--run-dir", str(tmp_path)]
        _until(lambda: "(Resources)" in cli("ls", *run_dir).stdout
               or "(Priority)" in cli("ls", *run_dir).stdout, TIMEOUT, "listed pending")
        [listed] = cli("ls", *run_dir).stdout.splitlines()[1:]
        assert listed.startswith(f"{controller.run_id}  {name}  slurm (detached)"), listed
        assert "(Slurm job pending (" in listed, listed
        status = cli("status", controller.run_id, *run_dir)
        assert status.returncode == 0, status.stderr
        assert ": pending" in status.stdout and "pending: Slurm job pending (" in (
            status.stdout), status.stdout
        attached = lp.attach(controller.run_id, run_dir=str(tmp_path)).status()
        assert (attached.state, attached.nodes) == ("pending", [])
        assert attached.pending.startswith("Slurm job pending ("), attached.pending
        stopped = cli("stop", controller.run_id, *run_dir)
        assert stopped.returncode == 0, stopped.stderr
        assert "its job was cancelled before it ran" in stopped.stdout, stopped.stdout
        assert not _jobs_named(name)
        assert controller.wait(timeout=TIMEOUT)  # the launch's own controller learns it too
        assert controller.stop_reason == f"killed: Slurm job {controller.job_id} was cancelled"
        assert "no program of this user runs" in cli("ls", *run_dir).stdout
    finally:
        controller.kill()
