"""launch_type="slurm" on a real Slurm whose nodes are 3 simulated hosts (tests/cluster): what
only a cluster shows - nodes on several hosts talking across them, heterogeneous jobs, a node
lost on its host, the time-limit warning, TLS between hosts, the job never outliving its
program - and bad input refused before anything is submitted. The programs every launch type
runs (tests/launch/test_*.py) run under slurm too, through the `launch` fixtures."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys

import pytest

import launchpad as lp
from launchpad import control
from launchpad.launch.slurm.time_limit import END_WARNING
from tests.cli.helpers import cli, wait_until
from tests.launch import helpers
from tests.launch.helpers import TIMEOUT
from tests.processes import ROOT

WHOLE_HOST = lp.Resources(cpus=16)  # the test cluster's hosts have 16 CPUs each


class Where:
    """Serves where it runs."""

    def host(self) -> str:
        return os.popen("hostname -I").read().split()[0]


def _report_hosts(servers, box) -> None:
    """Calls every server; puts (the address each was reached at, where each runs, where this
    client runs) into the box."""
    seen = [(server.host(), server.address) for server in servers]
    box.put((seen, os.popen("hostname -I").read().split()[0]))


def _servers_and_client(name: str, count: int, box):
    program = lp.Program(name)
    with program.group("server"):
        servers = [program.add_node(lp.CourierNode(Where)) for _ in range(count)]
    with program.group("client"):
        program.add_node(lp.PyNode(_report_hosts, servers, box))
    return program


def _jobs_named(name: str) -> list[str]:
    done = subprocess.run(["squeue", "-h", "-n", f"lp-{name}", "-o", "%i"],
                          capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_nodes_run_on_several_hosts_and_call_each_other_across_them(slurm, box, slurm_cluster):
    results = box()
    controller = slurm(_servers_and_client("spread", 2, results),
                       resources={"server": WHOLE_HOST, "client": WHOLE_HOST})
    seen, client_host = results.get()
    subnet = ipaddress.ip_network(slurm_cluster.network.subnet)
    hosts = {where for where, _ in seen} | {client_host}
    assert len(hosts) == 3, (seen, client_host)  # a whole host each
    for where, reached_at in seen:
        assert reached_at.rsplit(":", 1)[0] == where  # each advertises its own host's address
        assert ipaddress.ip_address(where) in subnet
    assert client_host in slurm_cluster.host_addresses
    assert set(controller.hosts().values()) <= set(slurm_cluster.host_addresses)
    # Each registered with its host's identity: none is this one, no two are the same.
    identities = {controller.launcher_context.controller.host_of("server", i)
                  for i in range(2)}
    assert len(identities) == 2 and control.host_identity() not in identities
    assert _jobs_named("spread"), "the program's job should run while the program does"
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    assert not _jobs_named("spread"), "the job must not outlive its program"


def test_groups_asked_apart_by_resources_make_a_heterogeneous_job(slurm, box, tmp_path):
    results = box()
    controller = slurm(_servers_and_client("het", 2, results),
                       resources={"server": WHOLE_HOST, "client": lp.Resources(cpus=2)},
                       slurm=lp.SlurmSettings(components="by_resources", run_dir=str(tmp_path)))
    seen, client_host = results.get()
    assert client_host not in {where for where, _ in seen}  # components get their own nodes
    components = _jobs_named("het")
    assert len(components) == 2 and all("+" in c for c in components), components
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)


def test_a_layout_that_fits_packs_the_small_group_beside_the_large_ones(slurm, box):
    """The issue's layout, on hosts of 16 CPUs: 3 workers of 15 and a collector of 1 (46 of
    48 CPUs). As a component per lp.Resources it needed 4 hosts of 3 and pended for ever."""
    results = box()
    program = lp.Program("fits")
    with program.group("worker"):
        workers = [program.add_node(lp.CourierNode(Where)) for _ in range(3)]
    with program.group("collector"):
        program.add_node(lp.PyNode(_report_hosts, workers, results))
    controller = slurm(program, resources={"worker": lp.Resources(cpus=15)})
    seen, collector_host = results.get()
    assert len({where for where, _ in seen}) == 3  # a worker per host
    assert collector_host in {where for where, _ in seen}  # beside one of them
    assert len(_jobs_named("fits")) == 1  # one component: no heterogeneous job
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)


def _run_forever() -> None:
    lp.wait_for_stop()


def _say_where() -> None:
    print("hello from", os.popen("hostname -I").read().split()[0], flush=True)


def test_node_output_comes_back_prefixed_and_stays_in_a_log_per_node(slurm, capsys, tmp_path,
                                                                    slurm_cluster):
    program = lp.Program("talkative")
    with program.group("speaker"):
        for _ in range(2):
            program.add_node(lp.PyNode(_say_where))
    runs = tmp_path / "my runs"  # a path a shell would split
    assert slurm(program, slurm=lp.SlurmSettings(run_dir=str(runs))).wait(timeout=TIMEOUT)
    shown = [line for line in capsys.readouterr().out.splitlines() if "hello from" in line]
    assert sorted(line.split()[0] for line in shown) == ["[speaker/0]", "[speaker/1]"]
    logs = sorted(runs.glob("launchpad-runs-*/talkative-*/speaker.*.log"))
    assert [log.name for log in logs] == ["speaker.0.log", "speaker.1.log"]
    for log in logs:
        said = log.read_text().split()
        assert said[:2] == ["hello", "from"] and said[2] in slurm_cluster.host_addresses


def test_a_node_that_vanishes_on_its_host_fails_named_within_the_liveness_timeout(
        slurm, slurm_cluster):
    program = lp.Program("lost")
    program.add_node(lp.PyNode(_run_forever), label="worker")
    controller = slurm(program, liveness_timeout_secs=3)
    assert controller.wait_for_started("worker/0", TIMEOUT)
    pid = controller.node_pids()["worker/0"]
    os.kill(pid, signal.SIGSTOP)  # frozen: it neither reports nor ends, as on a lost host
    with pytest.raises(lp.NodeFailedError, match="no heartbeat for 3s") as failed:
        controller.wait(timeout=TIMEOUT)
    assert failed.value.node == "worker/0"


def test_a_step_cancelled_from_outside_fails_its_node_named(slurm):
    """The host's step - its agent - cancelled (scancel JOB.STEP): its node fails, named."""
    program = lp.Program("cancelled")
    program.add_node(lp.PyNode(_run_forever), label="worker")
    controller = slurm(program)
    assert controller.wait_for_started("worker/0", TIMEOUT)
    job = _jobs_named("cancelled")[0]
    steps = subprocess.run(["squeue", "-h", "-s", "-j", job, "-o", "%i %j"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    step = next(line.split()[0] for line in steps if line.endswith("lp-agent-0.0"))
    subprocess.run(["scancel", step], check=True)
    with pytest.raises(lp.NodeFailedError, match="worker/0") as failed:
        controller.wait(timeout=TIMEOUT)
    assert "killed by signal SIG" in failed.value.reason  # (scancel: TERM, then KILL)


def test_the_time_limit_warning_stops_the_program_gracefully_named(slurm, box, tmp_path):
    stopped = box()
    program = lp.Program("timed")

    def serve_until_stopped(out):
        lp.register_stop_handler(lambda: out.put("stop handler ran"))
        lp.wait_for_stop()

    program.add_node(lp.PyNode(serve_until_stopped, stopped), label="worker")
    # A two-minute job warned 90 s before its end, by Slurm's SIGUSR1 (its check runs every
    # 30 s) or the launch's own clock, whichever comes first (time_limit.py): the node has
    # half a minute to start, and the graceful stop a minute and more to end the program
    # before the limit, on a loaded machine too (with one minute, warned at 55 s, the limit
    # once came first).
    controller = slurm(program, slurm=lp.SlurmSettings(
        run_dir=str(tmp_path), time_limit=2, stop_before_end_secs=90))
    assert stopped.get(timeout=130) == "stop handler ran"
    assert controller.wait(timeout=TIMEOUT)  # not a failure
    assert controller.stop_reason.startswith(END_WARNING)
    assert "time limit is" in controller.stop_reason


def test_tls_between_hosts(slurm, box):
    results = box()
    controller = slurm(_servers_and_client("tls", 2, results),
                       resources={"server": WHOLE_HOST}, tls=True)
    seen, _ = results.get()
    assert len({where for where, _ in seen}) == 2
    assert controller.tls is not None
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)


def test_unknown_groups_and_bad_settings_are_refused_before_anything_is_submitted(
        slurm_cluster, monkeypatch):
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    program = lp.Program("refused")
    program.add_node(lp.PyNode(int), label="worker")
    with pytest.raises(ValueError, match=r"resources names groups \['learner'\].*'worker'"):
        lp.launch(program, launch_type="slurm", resources={"learner": lp.Resources()})
    with pytest.raises(TypeError, match="lp.Resources"):
        lp.launch(program, launch_type="slurm", resources={"worker": 4})
    with pytest.raises(TypeError, match="lp.SlurmSettings"):
        lp.launch(program, launch_type="slurm", slurm={"partition": "gpu"})
    with pytest.raises(ValueError, match="cpus must be an int >= 1"):
        lp.Resources(cpus=0)
    assert not _jobs_named("refused")


def test_a_layout_that_cannot_fit_is_refused_before_submission_with_the_numbers(
        slurm_cluster, monkeypatch, tmp_path):
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    program = lp.Program("too-big")
    with program.group("worker"):
        for _ in range(3):
            program.add_node(lp.PyNode(int))
    program.add_node(lp.PyNode(int), label="collector")
    settings = lp.SlurmSettings(run_dir=str(tmp_path))
    with pytest.raises(lp.SlurmError) as info:
        lp.launch(program, launch_type="slurm", slurm=settings,
                  resources={"worker": WHOLE_HOST})
    assert ("does not fit partition 'main', which has 3 hosts of 16 CPUs: group 'worker' "
            "needs 3 nodes of 16 CPUs (48 CPUs) and group 'collector' needs 1 node of 1 CPU "
            "(1 CPU): 49 CPUs, on 48") in str(info.value)
    with pytest.raises(lp.SlurmError, match=r"Group 'worker' of program 'too-big' asks for "
                                            r"64 CPUs per node, and the largest host"):
        lp.launch(program, launch_type="slurm", slurm=settings,
                  resources={"worker": lp.Resources(cpus=64)})
    assert not _jobs_named("too-big")


def test_a_job_slurm_refuses_is_a_clear_error(slurm_cluster, monkeypatch, tmp_path):
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    program = lp.Program("refused")
    program.add_node(lp.PyNode(int), label="worker")
    with pytest.raises(lp.SlurmError, match="sbatch"):
        lp.launch(program, launch_type="slurm", slurm=lp.SlurmSettings(
            run_dir=str(tmp_path), sbatch_args=["--constraint=nosuchfeature"]))


def test_without_slurm_installed_the_launch_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, srun, ... here
    program = lp.Program("nowhere")
    program.add_node(lp.PyNode(int), label="worker")
    with pytest.raises(lp.LaunchError, match="needs Slurm's client commands.*sbatch"):
        lp.launch(program, launch_type="slurm")


def test_flags_give_the_common_settings_and_settings_make_the_sbatch_options(monkeypatch):
    from launchpad.launch import launchers
    from launchpad.launch import options as launch_options
    monkeypatch.setattr(sys, "argv", ["launch.py", "--lp_slurm_partition=gpu",
                                      "--lp_slurm_time_limit=30"])
    slurm = launchers.get("slurm")
    settings = launch_options.resolve(slurm, 1).settings
    assert settings.sbatch_options() == ["--partition=gpu", "--time=30", "--signal=USR1@60"]
    given = lp.SlurmSettings(account="proj", stop_before_end_secs=0, sbatch_args=["--exclusive"])
    assert launch_options.resolve(slurm, 1, engine_settings={"slurm": given}).settings is given
    assert given.sbatch_options() == ["--account=proj", "--exclusive"]
    with pytest.raises(TypeError, match="a list of arguments"):
        lp.SlurmSettings(sbatch_args="--exclusive")


def test_a_detached_program_runs_with_its_controller_inside_the_job(slurm, box, tmp_path):
    results = box()
    controller = slurm(_servers_and_client("injob", 2, results),
                       resources={"server": WHOLE_HOST}, detach=True)
    assert isinstance(controller, lp.RemoteController)  # the controller is in the cluster
    seen, client_host = results.get()
    assert len({where for where, _ in seen}) == 2
    assert controller.run_id.startswith("injob-")
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    assert controller.exit_codes() == {"server/0": 0, "server/1": 0, "client/0": 0}
    assert not _jobs_named("injob"), "the job ends with its controller"


def _fail() -> None:
    raise ValueError("failed in the cluster")


def test_a_node_failing_in_a_detached_program_is_named_with_its_traceback(slurm):
    program = lp.Program("injob-failing")
    program.add_node(lp.PyNode(_fail), label="worker")
    controller = slurm(program, detach=True)
    with pytest.raises(lp.NodeFailedError, match="worker/0") as failed:
        controller.wait(timeout=TIMEOUT)
    assert str(failed.value).endswith("\nValueError: failed in the cluster")
    assert 'raise ValueError("failed in the cluster")' in failed.value.node_traceback


def test_killing_a_detached_program_ends_its_job(slurm):
    program = lp.Program("injob-killed")
    program.add_node(lp.PyNode(_run_forever), label="worker")
    controller = slurm(program, detach=True)
    controller.kill()
    assert controller.wait(timeout=TIMEOUT)
    assert "cancelled" in controller.stop_reason
    assert not _jobs_named("injob-killed")


def _say_running_then_wait_for_stop(box) -> None:
    print("worker running", flush=True)
    box.put("running")
    lp.wait_for_stop()


_LAUNCH_AND_LEAVE = """
import sys
import launchpad as lp
from tests.launch.helpers import BoxClient
from tests.launch.slurm.test_slurm import _say_running_then_wait_for_stop
program = lp.Program("left-running")
program.add_node(lp.PyNode(_say_running_then_wait_for_stop, BoxClient(sys.argv[2])),
                 label="worker")
controller = lp.launch(program, launch_type="slurm", detach=True,
                       slurm=lp.SlurmSettings(run_dir=sys.argv[1]))
print(controller.run_id, flush=True)
"""


def test_a_detached_program_outlives_its_launcher_and_another_process_attaches_and_stops_it(
        slurm_cluster, tmp_path, monkeypatch, no_leaked_processes, box):
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(helpers, "BOX_HOST", slurm_cluster.network.gateway)
    running = box()
    launched = subprocess.run(
        [sys.executable, "-c", _LAUNCH_AND_LEAVE, str(tmp_path), running.address],
        capture_output=True, text=True, timeout=TIMEOUT, check=True,
        cwd=ROOT)
    run_id = launched.stdout.split()[-1]
    assert running.get() == "running"  # the launcher has gone; its program runs on
    with pytest.raises(lp.LaunchError, match="No run 'no-such-run'"):
        lp.attach("no-such-run", run_dir=str(tmp_path))
    controller = lp.attach(run_id, run_dir=str(tmp_path))
    assert controller.program_name == "left-running"
    assert controller.exit_codes() == {"worker/0": None}  # asked of the running controller
    # The command finds it too, and reads its node's log through its controller in the job.
    listed = cli("ls", "--run-dir", str(tmp_path)).stdout.splitlines()[1].split()
    assert listed[:4] == [run_id, "left-running", "slurm", "(detached)"]
    status = cli("status", run_id, "--run-dir", str(tmp_path)).stdout
    assert status.startswith(f"left-running (slurm, run {run_id}): running"), status
    wait_until(lambda: cli("logs", "--run-dir", str(tmp_path), "worker").stdout
               == "worker running\n", what="the worker's log")
    status = controller.status()
    assert (status.program, status.launch_type, status.state) == ("left-running", "slurm",
                                                                  "running")
    [worker] = status.nodes
    assert worker.state == "running" and worker.host in slurm_cluster.host_addresses
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    assert controller.exit_codes() == {"worker/0": 0}
    assert controller.status() is None  # its controller has gone with it
    assert not _jobs_named("left-running")


def test_detach_needs_a_cluster_launch_type():
    program = lp.Program("local")
    program.add_node(lp.PyNode(int), label="worker")
    with pytest.raises(ValueError, match="detach=True needs a cluster launch type"):
        lp.launch(program, launch_type="local_mp", detach=True)
