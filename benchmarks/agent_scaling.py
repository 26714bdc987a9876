"""Benchmark: a distributed agent from 1 to 128 actors, beside DeepMind Launchpad 0.5.2 and Ray.

Run: `python -m benchmarks.agent_scaling [--actors 1,2,4,8,16,32,64,128] [--systems
ours,launchpad,ray,ours_slurm] [--fetch direct,cacher] [--seconds 10]`; once before, `python -m
benchmarks.agent_scaling --setup` makes Launchpad 0.5.2's venv (Python 3.10, dm-launchpad 0.5.2
and dm-reverb 0.7.2 from the registry: `requirements-launchpad-0.5.2.txt`). Prints one JSON
object on stdout; progress goes to stderr. `benchmarks/plot_scaling.py` draws it.

The agent is agent_program.py: N actors stepping environments whose step costs set wall time
(5 ms) and little CPU (50 us), so the ideal rate is known (N / 5 ms) and every gap to it is
the framework's: writing each step to Reverb, fetching 4 MB of weights every 100 steps
(directly from the learner, or through a CacherNode), the learner's sampling, the controller.
Each size runs once per system and way of fetching, interleaved (the machine drifts), as:

* `ours`: this project, local_mp;
* `launchpad`: DeepMind Launchpad 0.5.2, local_mp, the same file run by its interpreter
  (direct fetches only: 0.5.2 has no CacherNode);
* `ray`: bare Ray actors with the same code (`_agent_ray.py`);
* `ours_slurm`: this project under launch_type="slurm", on a Slurm of 3 hosts (network
  namespaces: tests/cluster) the benchmark starts for itself per size and stops after it (as
  root; left out elsewhere). Each host offers a third of the program's CPUs (a node each), so
  Slurm's placement, which packs a program on as few hosts as hold it, spreads it over all
  three and the actors reach the replay and the learner across hosts. Its CPU figures are the
  whole machine's (the Slurm daemons included).

First, what Reverb alone costs per step (one process writing the same steps to a server of its
own: `reverb_floor_cpu_us_per_step`), the floor under every system's CPU per step. Per run:
env steps/s and the ideal, learner updates/s, weight fetches' p50/p99, the age of the
weights acted with (learner steps), CPU seconds per env step (all, and the framework's share:
all but the environments' set cost and the learner's update), PSS per actor, the start-up
(launch until every actor has stepped), and whether every step written reached the table.
`ratios`: ours against each other system at each size, and ours on Slurm's hosts against ours
on this host (`steps_slurm_vs_local_mp`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import pathlib
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "benchmarks" / "requirements-launchpad-0.5.2.txt"
BASELINE_VENV = pathlib.Path(os.environ.get(
    "LAUNCHPAD_BASELINE_VENV", pathlib.Path.home() / ".cache" / "launchpad-bench" / "lp-0.5.2"))
SYSTEMS = ("ours", "launchpad", "ray", "ours_slurm")
PEERS = ("launchpad", "ray")  # the other frameworks ours is compared with
RUN_TIMEOUT_S = 900
SLURM_HOSTS = 3


def say(message: str) -> None:
    print(f"[agent_scaling] {message}", file=sys.stderr, flush=True)


def baseline_python() -> str | None:
    """Launchpad 0.5.2's interpreter: $LAUNCHPAD_BASELINE_PY, else the venv `--setup` made."""
    given = os.environ.get("LAUNCHPAD_BASELINE_PY")
    made = BASELINE_VENV / "bin" / "python"
    return given or (str(made) if made.exists() else None)


def setup() -> None:
    """Makes Launchpad 0.5.2's venv with pyenv's Python 3.10 (a few minutes, once)."""
    pyenv = subprocess.run(["pyenv", "root"], capture_output=True, text=True,
                           check=True).stdout.strip()
    pythons = sorted(pathlib.Path(pyenv, "versions").glob("3.10*/bin/python3.10"))
    if not pythons:
        raise SystemExit("Launchpad 0.5.2 needs Python 3.10: pyenv install 3.10")
    subprocess.run([str(pythons[-1]), "-m", "venv", str(BASELINE_VENV)], check=True)
    subprocess.run([str(BASELINE_VENV / "bin" / "pip"), "install", "-q", "-r",
                    str(REQUIREMENTS)], check=True)
    say(f"Launchpad 0.5.2 is in {BASELINE_VENV}")


@dataclasses.dataclass
class SlurmHosts:
    """How to launch on a Slurm: the variables its commands need, and a folder its hosts
    share."""

    env: dict[str, str]
    run_dir: str


@contextlib.contextmanager
def slurm_hosts(nodes: int) -> Iterator[SlurmHosts]:
    """A Slurm of 3 hosts (network namespaces) that `nodes` nodes of one CPU fill."""
    from tests.cluster.netns import HostNetwork
    from tests.cluster.slurm import SlurmCluster
    with tempfile.TemporaryDirectory(prefix="lpagent", dir="/tmp") as work, \
            HostNetwork(SLURM_HOSTS) as network, \
            SlurmCluster(work, network, cpus_per_host=math.ceil(nodes / SLURM_HOSTS)) as cluster:
        yield SlurmHosts(cluster.env, work)


def program_nodes(actors: int, fetch: str) -> int:
    """The agent program's nodes: the actors, the replay, the learner, the driver and the
    cacher, if any."""
    return actors + 3 + (fetch == "cacher")


def slurm_missing() -> str:
    """Why this machine cannot start the benchmark's Slurm ('' if it can)."""
    if os.geteuid() != 0:
        return "it needs root (network namespaces)"
    missing = [tool for tool in ("slurmctld", "slurmd", "munged") if not shutil.which(tool)]
    return f"{', '.join(missing)} not installed (make test installs them)" if missing else ""


def run_once(system: str, actors: int, fetch: str, flags: list[str],
             slurm: SlurmHosts | None = None) -> dict[str, Any]:
    """One run of the agent; its figures (or what went wrong). `slurm`: slurm_hosts()'s."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "figures.json")
        args = ["--actors", str(actors), "--out", out, *flags,
                *(["--cacher"] if fetch == "cacher" else [])]
        env = {**os.environ, "LAUNCHPAD_LOGGING_DIR": os.path.join(folder, "logs")}
        if system == "ours_slurm":
            env.update(slurm.env)
            args += ["--launch_type", "slurm", "--slurm_run_dir", slurm.run_dir]
        if system == "launchpad":  # by path, from a folder of its own: not our launchpad
            argv, cwd = [baseline_python(), str(ROOT / "benchmarks" / "agent_program.py"),
                         *args], folder
            env.pop("PYTHONPATH", None)
        else:
            module = "benchmarks._agent_ray" if system == "ray" else "benchmarks.agent_program"
            argv, cwd = [sys.executable, "-m", module, *args,
                         *(["--floor"] if system == "floor" else [])], str(ROOT)
        try:
            done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=RUN_TIMEOUT_S, start_new_session=True)
        except subprocess.TimeoutExpired:
            return {"error": f"no figures within {RUN_TIMEOUT_S}s"}
        if not os.path.exists(out):
            return {"error": f"exit {done.returncode}: {done.stderr[-2000:]}"
                             f"{_failed_logs(os.path.join(folder, 'logs'))}"}
        with open(out) as f:
            return json.load(f)


def memory_short(system: str, actors: int, runs: list[dict]) -> str:
    """Why `system` cannot run `actors` actors on this machine ('' if it can): the memory its
    actors took per actor at the largest size measured, times `actors`, over 90% of what the
    machine has free now (a run past that would swap, or be killed, and measure neither)."""
    measured = [r for r in runs if r["system"] == system and r.get("pss_mb_per_actor")]
    if not measured:
        return ""
    per_actor = max(measured, key=lambda r: r["actors"])["pss_mb_per_actor"]
    with open("/proc/meminfo") as meminfo:
        free_mb = next(int(line.split()[1]) for line in meminfo
                       if line.startswith("MemAvailable")) / 1024
    needed = per_actor * actors
    if needed <= 0.9 * free_mb:
        return ""
    return (f"{actors} actors at {per_actor:.0f} MB each need {needed / 1024:.1f} GB; this "
            f"machine has {free_mb / 1024:.1f} GB free")


def _failed_logs(folder: str) -> str:
    """The ends of the node logs under `folder` that hold a traceback."""
    found = []
    for path in sorted(pathlib.Path(folder).rglob("*")):
        text = path.read_text(errors="replace") if path.is_file() else ""
        if "Traceback" in text:
            found.append(f"\n--- {path.relative_to(folder)}:\n{text[-1500:]}")
    return "".join(found[:3])


def framework_cpu_us(figures: dict) -> float | None:
    """CPU per env step that is the framework's: all but the environments' set cost and the
    learner's update."""
    cpu, steps = figures.get("cpu_s"), figures.get("env_steps")
    if not cpu or not steps:
        return None
    return (cpu["all"] - cpu["environment"] - cpu["learner_update"]) / steps * 1e6


def cpu_us_per_step(figures: dict) -> float | None:
    """CPU per env step of every process of the run."""
    cpu, steps = figures.get("cpu_s"), figures.get("env_steps")
    return cpu["all"] / steps * 1e6 if cpu and steps else None


def ratios(runs: list[dict], floor_us: float) -> list[dict]:
    """Ours against each other system, and against Reverb alone (`floor_us` per step: the
    least any framework's agent can cost), per size and way of fetching."""
    found = {(r["system"], r["actors"], r["fetch"]): r for r in runs
             if "error" not in r and "left_out" not in r}
    table = []
    for (system, actors, fetch), ours in sorted(found.items()):
        if system != "ours":
            continue
        row: dict[str, Any] = {"actors": actors, "fetch": fetch,
                               "ours_vs_ideal": ours["env_steps_per_s"]
                               / ours["ideal_steps_per_s"],
                               "cpu_vs_reverb_floor": cpu_us_per_step(ours) / floor_us}
        on_slurm = found.get(("ours_slurm", actors, fetch))
        if on_slurm:
            row["steps_slurm_vs_local_mp"] = (on_slurm["env_steps_per_s"]
                                              / ours["env_steps_per_s"])
        for other in PEERS:
            theirs = found.get((other, actors, fetch))
            if theirs:
                row[f"steps_vs_{other}"] = ours["env_steps_per_s"] / theirs["env_steps_per_s"]
                row[f"startup_vs_{other}"] = ours["startup_s"] / theirs["startup_s"]
                if framework_cpu_us(theirs):
                    row[f"framework_cpu_vs_{other}"] = (framework_cpu_us(ours)
                                                        / framework_cpu_us(theirs))
        table.append(row)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", action="store_true", help="make Launchpad 0.5.2's venv")
    parser.add_argument("--actors", default="1,2,4,8,16,32,64,128")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--fetch", default="direct,cacher", help="direct, cacher or both")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup_s", type=float, default=2.0)
    parser.add_argument("--obs", default="84,84,4")
    parser.add_argument("--step_ms", type=float, default=5.0)
    parser.add_argument("--cpu_us", type=float, default=50.0)
    args = parser.parse_args()
    if args.setup:
        setup()
        return
    systems = args.systems.split(",")
    if "launchpad" in systems and baseline_python() is None:
        say("no Launchpad 0.5.2 (python -m benchmarks.agent_scaling --setup): left out")
        systems.remove("launchpad")
    if "ours_slurm" in systems and slurm_missing():
        say(f"no Slurm for ours_slurm ({slurm_missing()}): left out")
        systems.remove("ours_slurm")
    flags = ["--seconds", str(args.seconds), "--warmup_s", str(args.warmup_s), "--obs",
             args.obs, "--step_ms", str(args.step_ms), "--cpu_us", str(args.cpu_us)]
    # A kill ends the run as an interrupt does: the Slurm it started stops, its hosts go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    floor = run_once("floor", 0, "direct", flags)
    say(f"Reverb alone: {floor}")
    runs = sweep(systems, [int(n) for n in args.actors.split(",")], args.fetch.split(","),
                 flags)
    print(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                      "flags": flags, "reverb_floor_cpu_us_per_step": floor, "runs": runs,
                      "ratios": ratios(runs, floor["with_environment"])}, indent=1))


def sweep(systems: list[str], sizes: list[int], fetches: list[str],
          flags: list[str]) -> list[dict]:
    """Every run: per size, per way of fetching, each system in turn."""
    runs: list[dict] = []
    for actors in sizes:
        for fetch in fetches:
            for system in systems:
                if system == "launchpad" and fetch == "cacher":
                    continue  # Launchpad 0.5.2 has no CacherNode (its 0.3 had)
                say(f"{system}, {actors} actors, {fetch} fetch")
                short = memory_short(system, actors, runs)
                if short:
                    say(f"  left out: {short}")
                    runs.append({"system": system, "actors": actors, "fetch": fetch,
                                 "left_out": short})
                    continue
                if system == "ours_slurm":
                    with slurm_hosts(program_nodes(actors, fetch)) as slurm:
                        figures = run_once(system, actors, fetch, flags, slurm)
                else:
                    figures = run_once(system, actors, fetch, flags)
                runs.append({"system": system, "actors": actors, "fetch": fetch, **figures,
                             "cpu_us_per_step": cpu_us_per_step(figures),
                             "framework_cpu_us_per_step": framework_cpu_us(figures)})
                if "error" in figures:
                    say(f"  failed: {figures['error'][-300:]}")
    return runs


if __name__ == "__main__":
    main()
