"""Benchmark: evolution strategies killed whole mid-run, resumed, and still solving CartPole.

    python -m benchmarks.es_resume [--workers 4] [--kill_after 6] [--target 475]

Runs `examples.evolution_strategies.launch` under local_mp as a launch script of its own
(its state saved every 0.5 s), kills every process of it (SIGKILL: the launcher and each
node) once it has printed generation `--kill_after` and saved a state, then launches it again with
`--lp_resume=RUN_ID` and follows it to the end. It checks that the master resumed from a
saved generation at most the one it was killed at, went on from there, and reached the
target. The last line is one JSON object: the generations (killed at, restored at, solved
at), and the seconds each part took.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time


def _descendants(pid: int) -> list[int]:
    """Every live process below `pid` (node processes lead process groups of their own, so
    killing the launcher's group would not reach them)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _saved(run_dir: str, run_id: str) -> bool:
    """Whether the master of run `run_id` has saved a state yet (killed before, it would
    have nothing to resume from)."""
    folder = os.path.join(run_dir, f"launchpad-runs-{os.geteuid()}", run_id, "state",
                          "master.0")
    return os.path.isdir(folder) and any(n.endswith(".state") for n in os.listdir(folder))


def _launch(args: argparse.Namespace, run_dir: str, resume: str | None) -> subprocess.Popen:
    command = [sys.executable, "-m", "examples.evolution_strategies.launch",
               "--lp_launch_type=local_mp", f"--workers={args.workers}",
               "--save_every_secs=0.5", f"--target={args.target}",
               *([f"--lp_resume={resume}"] if resume else [])]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, start_new_session=True,
                            env={**os.environ, "LAUNCHPAD_RUN_DIR": run_dir})


def _lines(process: subprocess.Popen, deadline: float):
    for line in process.stdout:
        if time.monotonic() > deadline:
            raise TimeoutError("the run took too long")
        yield line.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--kill_after", type=int, default=6)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    run_dir = tempfile.mkdtemp(prefix="es-resume-")
    started = time.monotonic()
    first = _launch(args, run_dir, None)
    run_id, killed_at = None, None
    for line in _lines(first, started + args.timeout):
        if line.startswith("run "):
            run_id = line.split()[1]
        found = re.search(r"generation (\d+): mean return", line)
        if (found and int(found.group(1)) >= args.kill_after and run_id
                and _saved(run_dir, run_id)):
            killed_at = int(found.group(1))
            for pid in [first.pid, *_descendants(first.pid)]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            break
    first.wait(timeout=30)
    first_secs = time.monotonic() - started
    if killed_at is None:
        raise SystemExit("the first run ended before it could be killed: raise --target")
    resumed = time.monotonic()
    second = _launch(args, run_dir, run_id)
    restored_at = solved_at = None
    for line in _lines(second, resumed + args.timeout):
        found = re.search(r"restored at generation (\d+)", line)
        restored_at = int(found.group(1)) if found else restored_at
        found = re.search(r"solved at generation (\d+)", line)
        if found:
            solved_at = int(found.group(1))
    second.wait(timeout=60)
    result = {"benchmark": "es_resume", "workers": args.workers, "target": args.target,
              "killed_at_generation": killed_at, "restored_at_generation": restored_at,
              "solved_at_generation": solved_at, "first_run_secs": round(first_secs, 1),
              "resumed_run_secs": round(time.monotonic() - resumed, 1),
              "resumed_from_a_save": restored_at is not None and 0 < restored_at <= killed_at,
              "went_on_and_solved": solved_at is not None and solved_at > (restored_at or 0)}
    print(json.dumps(result))
    if not (result["resumed_from_a_save"] and result["went_on_and_solved"]):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
