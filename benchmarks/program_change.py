"""Benchmark: changing a running program, against launching the changed program afresh.

Run: `python -m benchmarks.program_change [--sizes 8,32] [--launch-type local_mp|slurm]`.
Prints one JSON object on stdout (its last line); progress goes to stderr. Under slurm (as
root) it starts its own Slurm of 3 hosts (network namespaces, tests/cluster) and stops it at
the end; the grown program's job holds room for N workers (`SlurmSettings(max_nodes=...)`).

The program: a `learner` holding the `worker` group's handle (it follows the group), and
its workers (CourierNodes). For each size N, under the launch type:

* `grow_secs`: `controller.scale("worker", N)` from 1 worker, until every new worker has
  answered a call through the learner's group handle (the handle followed the change);
* `fresh_launch_secs` (the baseline): `lp.launch` of the program with N workers, until every
  worker has answered the same call: what a user of a program fixed at launch pays to get N;
* `shrink_secs`: `scale("worker", 1)` back, until the learner's handle has one member;
* `apply_secs`: `controller.apply(...)` of the program with its learner's code changed
  (one node replaced, N workers unchanged), until the new learner answers.

`grow_vs_fresh` and `apply_vs_fresh` are the ratios to the fresh launch (below 1: the change
is cheaper than relaunching). Each measure is the median of `--repeats` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import launchpad as lp

_TIMEOUT = 120.0


class Worker:
    def ping(self) -> int:
        return lp.context.current().index


class Learner:
    """Holds the workers' group handle."""

    VERSION = 1

    def __init__(self, workers):
        self._workers = workers

    def members(self) -> int:
        return len(self._workers)

    def ping_all(self) -> list[int]:
        return self._workers.call.ping()

    def version(self) -> int:
        return self.VERSION


class LearnerV2(Learner):
    """The learner's next version (other code: `apply` replaces it)."""

    VERSION = 2


def make_program(workers: int, learner: type = Learner,
                 restart: lp.RestartPolicy | None = None) -> lp.Program:
    """The learner and its `workers` (`restart`: the workers' group's restart policy)."""
    program = lp.Program("change-bench")
    with program.group("worker", restart=restart):
        for _ in range(workers):
            program.add_node(lp.CourierNode(Worker))
    program.add_node(lp.CourierNode(learner, program.group_handle("worker")), label="learner")
    return program


def _learner(controller) -> lp.CourierClient:
    return controller.program.groups["learner"][0].create_handle().dereference()


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + _TIMEOUT
    while True:
        try:
            if condition():
                return
        except Exception:  # noqa: BLE001 - a node not up yet: asked again
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {_TIMEOUT:g}s: {what}")
        time.sleep(0.01)  # polls the program's answer: there is no event to wait on here


def _options(launch_type: str, run_dir: str, room: int | None = None) -> dict:
    """The launch's options: under slurm, the run folder (and room for `room` workers)."""
    if launch_type != "slurm":
        return {}
    return {"slurm": lp.SlurmSettings(run_dir=run_dir,
                                      max_nodes={"worker": room} if room else {})}


def _measure(size: int, launch_type: str, run_dir: str) -> dict[str, float]:
    started = time.perf_counter()
    controller = lp.launch(make_program(size), launch_type=launch_type,
                           **_options(launch_type, run_dir))
    try:
        learner = _learner(controller)
        _until(lambda: sorted(learner.ping_all()) == list(range(size)), "fresh workers")
        fresh = time.perf_counter() - started
    finally:
        controller.stop()
        controller.wait()
    controller = lp.launch(make_program(1), launch_type=launch_type,
                           **_options(launch_type, run_dir, size))
    try:
        learner = _learner(controller)
        _until(lambda: learner.ping_all() == [0], "the first worker")
        started = time.perf_counter()
        controller.scale("worker", size)
        _until(lambda: sorted(learner.ping_all()) == list(range(size)), "grown workers")
        grow = time.perf_counter() - started
        started = time.perf_counter()
        controller.scale("worker", 1)
        _until(lambda: learner.members() == 1, "the learner's handle, shrunk")
        shrink = time.perf_counter() - started
        controller.scale("worker", size)
        _until(lambda: sorted(learner.ping_all()) == list(range(size)), "grown again")
        started = time.perf_counter()
        applied = controller.apply(make_program(size, LearnerV2))
        assert applied.replaced == ("learner/0",), applied
        _until(lambda: _learner(controller).version() == 2, "the new learner")
        apply = time.perf_counter() - started
    finally:
        controller.stop()
        controller.wait()
    return {"fresh_launch_secs": fresh, "grow_secs": grow, "shrink_secs": shrink,
            "apply_secs": apply}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,32")
    parser.add_argument("--launch-type", default="local_mp")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with contextlib.ExitStack() as stack:
        run_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="lp-change-"))
        if args.launch_type == "slurm":
            _start_slurm(stack, run_dir, max(sizes) + 1)
        rows = _rows(sizes, args.launch_type, args.repeats, run_dir)
    print(json.dumps({"benchmark": "program_change", "launch_type": args.launch_type,
                      "repeats": args.repeats, "machine": platform.machine(),
                      "cpus": os.cpu_count(), "results": rows}))


def _start_slurm(stack: contextlib.ExitStack, work: str, nodes: int) -> None:
    """A Slurm of 3 hosts that hold `nodes` nodes of 1 CPU, its clients' variables set."""
    from tests.cluster.netns import HostNetwork  # root only: imported when measured
    from tests.cluster.slurm import SlurmCluster
    network = stack.enter_context(HostNetwork(3))
    cluster = stack.enter_context(SlurmCluster(os.path.join(work, "slurm"), network,
                                               cpus_per_host=nodes))
    os.environ.update(cluster.env)


def _rows(sizes: list[int], launch_type: str, repeats: int, run_dir: str) -> list[dict]:
    rows = []
    for size in sizes:
        runs = []
        for repeat in range(repeats):
            print(f"program_change: {size} workers, run {repeat + 1}", file=sys.stderr,
                  flush=True)
            runs.append(_measure(size, launch_type, run_dir))
        row = {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}
        row["grow_vs_fresh"] = round(row["grow_secs"] / row["fresh_launch_secs"], 2)
        row["apply_vs_fresh"] = round(row["apply_secs"] / row["fresh_launch_secs"], 2)
        rows.append({"workers": size, **row})
    return rows


if __name__ == "__main__":
    main()
