"""The agent of benchmarks/agent_scaling.py: one Launchpad program, run by this project or by
DeepMind Launchpad 0.5.2 (by path, from a folder of its own: it imports only `launchpad`,
`reverb` and numpy, and keeps to Python 3.10).

    python agent_program.py --actors 8 --seconds 10 --out figures.json [--cacher] ...

The shape of Acme's distributed agents, with everything but the framework's part set:

* `actor` nodes (N) step a simulated environment whose step takes `--step_ms` of wall time
  of which `--cpu_us` is CPU (as a simulator behind a socket, or a robot: the ideal rate is
  known, N / step time), observations of `--obs` shape (uint8); each step is written into
  the replay table with `trajectory_writer`; every `--fetch_every` steps the actor fetches
  the learner's weights (`--weights_mb` of float32), through a `CacherNode` with `--cacher`,
  else from the learner itself;
* `replay`, a `ReverbNode` whose table is rate limited (samples per insert `--spi`);
* `learner`, sampling batches of `--batch` and applying a cheap numpy update to its weights,
  which it serves with its step;
* `driver`, which waits for every actor's first step (the program's start-up), measures a
  window of `--seconds`, writes the figures to `--out` and stops the program.

Each actor counts its steps, its fetches' latency, and the age of the weights it acted with
(how many learner steps behind they were when replaced); every process reports its own CPU
time and PSS; the driver also reads the CPU time of every process of the launch's session
(the replay server and the framework's own processes included), or under Slurm
(`--launch_type slurm --slurm_run_dir DIR`, whose nodes are the Slurm daemons' children) the
whole machine's busy CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

import numpy as np

import launchpad as lp

TABLE = "steps"
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of process `pid`, all its threads; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def pss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (not idle, not waiting for disk)."""
    with open("/proc/stat") as f:
        fields = [int(n) for n in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / _TICKS


def session_cpu_s() -> float:
    """CPU seconds of every process of this process's session (the launch's processes)."""
    session, total = os.getsid(0), 0.0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.getsid(int(name)) == session:
                    total += process_cpu_s(int(name))
            except OSError:
                continue
    return total


class Environment:
    """A step of `step_s` wall time, `cpu_s` of it spent computing; observations of `shape`."""

    def __init__(self, step_s: float, cpu_s: float, shape: tuple, seed: int):
        self._step_s, self._cpu_s = step_s, cpu_s
        rng = np.random.default_rng(seed)
        self._observations = [rng.integers(0, 255, shape, dtype=np.uint8) for _ in range(4)]
        self._count = 0

    def step(self) -> np.ndarray:
        started = time.perf_counter()
        while time.perf_counter() - started < self._cpu_s:
            pass  # the simulator's own computation
        rest = self._step_s - (time.perf_counter() - started)
        if rest > 0:
            time.sleep(rest)  # the simulator's wall time: what a step waits for
        self._count += 1
        return self.last()

    def last(self) -> np.ndarray:
        return self._observations[self._count % 4]


class Learner:
    """Samples batches and applies a cheap update; serves its weights with its step."""

    def __init__(self, replay, weights_mb: float, batch: int):
        self._replay = replay
        self._batch = batch
        self._weights = np.zeros(int(weights_mb * (1 << 20)) // 4, np.float32)
        self._step = 0
        self._update_s = 0.0
        self._lock = threading.Lock()

    def get_weights(self):
        """(step, the weights)."""
        with self._lock:
            return self._step, self._weights

    def stats(self) -> dict:
        return {"step": self._step, "update_s": self._update_s, "pid": os.getpid(),
                "cpu_s": process_cpu_s(os.getpid()), "pss_mb": pss_mb(os.getpid())}

    def stopped(self, within_s: float = 0.0) -> bool:
        """Whether the program stops (waiting up to `within_s` for it)."""
        return lp.stop_event().wait(within_s)

    def run(self) -> None:
        import reverb
        samples = reverb.Client(self._replay.server_address).sample(TABLE, num_samples=1 << 62)
        while not self.stopped():
            try:
                batch = [next(samples) for _ in range(self._batch)]
            except Exception:  # noqa: BLE001 - the replay node has stopped with the program
                return
            started = time.process_time()
            mean = float(np.mean([np.mean(_observation(s)) for s in batch]))
            with self._lock:  # (a reader may serialize the weights as they change)
                self._weights[:1024] += 1e-6 * mean
                self._step += 1
            self._update_s += time.process_time() - started


def _observation(sample) -> np.ndarray:
    """The observation of a sampled item (a ReplaySample, or a list of one per step)."""
    data = sample[0].data if isinstance(sample, list) else sample.data
    return np.asarray(data["observation"] if isinstance(data, dict) else data[0])


class Actor:
    """Steps its environment, writes each step, and refreshes its weights every
    `fetch_every` steps; counts what the driver reads."""

    def __init__(self, replay, source, actor_id: int, config: dict):
        self._replay, self._source, self._id = replay, source, actor_id
        self._config = config
        self._steps = 0
        self._fetch_s: list = []
        self._ages: list = []
        self._first_step = threading.Event()
        self._pausing = threading.Event()
        self._paused = threading.Event()

    def ready(self) -> bool:
        return self._first_step.wait(600)

    def pause(self) -> int:
        """Stops stepping, flushes what it wrote; the steps it wrote in all."""
        self._pausing.set()
        self._paused.wait(60)
        return self._steps

    def stopped(self, within_s: float = 0.0) -> bool:
        """Whether the program stops (waiting up to `within_s` for it)."""
        return lp.stop_event().wait(within_s)

    def stats(self, reset: bool = False) -> dict:
        fetches, ages = self._fetch_s, self._ages
        if reset:
            self._fetch_s, self._ages = [], []
        return {"steps": self._steps, "fetch_s": fetches, "ages": ages, "pid": os.getpid(),
                "cpu_s": process_cpu_s(os.getpid()), "pss_mb": pss_mb(os.getpid())}

    def run(self) -> None:
        config = self._config
        env = Environment(config["step_ms"] / 1e3, config["cpu_us"] / 1e6,
                          tuple(config["obs"]), self._id)
        writer = self._replay.trajectory_writer(num_keep_alive_refs=1)
        weights_step, _ = self._source.get_weights()
        try:
            while not self.stopped() and not self._pausing.is_set():
                writer.append({"observation": env.step()})
                writer.create_item(TABLE, 1.0, {"observation": writer.history["observation"][-1]})
                self._steps += 1
                self._first_step.set()
                if self._steps % config["fetch_every"] == 0:
                    started = time.perf_counter()
                    step, _ = self._source.get_weights()
                    self._fetch_s.append(time.perf_counter() - started)
                    # How many learner steps behind the weights it acted with were.
                    self._ages.append(step - weights_step)
                    weights_step = step
            writer.flush()
            self._paused.set()
            self.stopped(within_s=24 * 3600)  # paused until the program stops
        except Exception:  # noqa: BLE001 - the program is stopping: its other nodes end
            if not self.stopped(within_s=10):  # (the stop may be on its way)
                raise
        finally:
            writer.close()


def reverb_floor_us(config: dict, steps: int = 1000) -> dict:
    """What Reverb alone costs per env step, without any framework: one process stepping the
    same environment and writing each step to a Reverb server of its own (no sampler, so no
    rate limiter waits); CPU microseconds per step, all of the process's threads (client and
    server), with the environment's set cost still in."""
    import reverb
    server = reverb.Server([reverb.Table(TABLE, sampler=reverb.selectors.Uniform(),
                                         remover=reverb.selectors.Fifo(),
                                         max_size=config["max_items"],
                                         rate_limiter=reverb.rate_limiters.MinSize(1))])
    env = Environment(config["step_ms"] / 1e3, config["cpu_us"] / 1e6, tuple(config["obs"]), 0)
    client = reverb.Client(f"localhost:{server.port}")
    try:
        figures = {}
        for name, stepping in (("write_only", False), ("with_environment", True)):
            writer = client.trajectory_writer(num_keep_alive_refs=1)
            started = time.process_time()
            for _ in range(steps):
                writer.append({"observation": env.step() if stepping else env.last()})
                writer.create_item(TABLE, 1.0, {"observation": writer.history["observation"][-1]})
            writer.flush()
            writer.close()
            figures[name] = (time.process_time() - started) / steps * 1e6
        return figures
    finally:
        server.stop()


def make_tables(config: dict):
    import reverb
    import tensorflow as tf
    signature = {"observation": tf.TensorSpec(config["obs"], tf.uint8)}
    limiter = reverb.rate_limiters.SampleToInsertRatio(
        samples_per_insert=config["spi"], min_size_to_sample=config["batch"],
        error_buffer=config["batch"] * 10.0)
    return [reverb.Table(TABLE, sampler=reverb.selectors.Uniform(),
                         remover=reverb.selectors.Fifo(), max_size=config["max_items"],
                         rate_limiter=limiter, signature=signature)]


def inserted_items(replay) -> int:
    """Items ever inserted into the replay table (`replay`: a Reverb client)."""
    return int(replay.server_info()[TABLE].rate_limiter_info.insert_stats.completed)


class Handles:
    """What `measure` asks of a running agent, through Launchpad handles (_agent_ray.py has
    Ray's): each actor at once (futures), the learner, the replay table."""

    def __init__(self, actors, learner, replay):
        self._actors, self._learner, self._replay = actors, learner, replay

    def ready(self) -> list:
        return [actor.futures.ready() for actor in self._actors]

    def stats(self) -> list:
        return [actor.futures.stats(True) for actor in self._actors]

    def pause(self) -> list:
        return [actor.futures.pause() for actor in self._actors]

    def learner_stats(self) -> dict:
        return self._learner.stats()

    def inserted(self) -> int:
        return inserted_items(self._replay)


def drive(actors, learner, replay, config: dict) -> None:
    """Measures the agent, writes the figures, and stops the program."""
    cpu_s = machine_cpu_s if config["launch_type"] == "slurm" else session_cpu_s
    figures = measure(Handles(actors, learner, replay), config, cpu_s)
    with open(config["out"], "w") as f:
        json.dump(figures, f)
    lp.stop()


def measure(agent: Handles, config: dict, cpu_s=session_cpu_s) -> dict:
    """The figures of one run: waits for every actor's first step (the start-up), then for
    `warmup_s`, measures `seconds`; then pauses the actors and counts what the table got.
    `cpu_s()` is the CPU time of every process of the run."""
    for future in agent.ready():
        future.result()
    ready_at = time.time()
    time.sleep(config["warmup_s"])  # a settled rate, not the start's
    first = [future.result() for future in agent.stats()]
    learner_first, cpu_first, started = agent.learner_stats(), cpu_s(), time.perf_counter()
    time.sleep(config["seconds"])  # the window measured
    last = [future.result() for future in agent.stats()]
    learner_last, cpu_last = agent.learner_stats(), cpu_s()
    window = time.perf_counter() - started
    written = sum(future.result() for future in agent.pause())
    steps = sum(b["steps"] - a["steps"] for a, b in zip(first, last, strict=True))
    fetches = sorted(s for b in last for s in b["fetch_s"])
    ages = [age for b in last for age in b["ages"]]
    updates_per_s = (learner_last["step"] - learner_first["step"]) / window
    # The learner's steps in one fetch interval: an age of 1 interval is the least there is.
    per_interval = updates_per_s * config["fetch_every"] * config["step_ms"] / 1e3
    return {
        "actors": len(last), "window_s": window, "startup_s": ready_at - config["launched_at"],
        "env_steps": steps, "env_steps_per_s": steps / window,
        "ideal_steps_per_s": len(last) * 1e3 / config["step_ms"],
        "learner_updates_per_s": updates_per_s,
        "fetch_ms": _percentiles(fetches, 1e3),
        "weight_age_steps": _percentiles(ages, 1),
        "weight_age_intervals": _percentiles(ages, 1 / per_interval if per_interval else 0),
        "cpu_s": {"all": cpu_last - cpu_first,
                  "actors": sum(b["cpu_s"] - a["cpu_s"] for a, b in zip(first, last, strict=True)),
                  "learner": learner_last["cpu_s"] - learner_first["cpu_s"],
                  "learner_update": learner_last["update_s"] - learner_first["update_s"],
                  "environment": steps * config["cpu_us"] / 1e6},
        "pss_mb_per_actor": float(np.mean([b["pss_mb"] for b in last])),
        "pss_mb_learner": learner_last["pss_mb"],
        "steps_written": written, "items_inserted": agent.inserted(),
    }


def _percentiles(values: list, scale: float) -> dict:
    if not values:
        return {"p50": None, "p99": None, "count": 0}
    return {"p50": float(np.percentile(values, 50)) * scale,
            "p99": float(np.percentile(values, 99)) * scale, "count": len(values)}


def make_program(config: dict) -> lp.Program:
    program = lp.Program("agent_scaling")
    replay = program.add_node(lp.ReverbNode(lambda: make_tables(config)), label="replay")
    learner = program.add_node(lp.CourierNode(Learner, replay, config["weights_mb"],
                                              config["batch"]), label="learner")
    source = learner
    if config["cacher"]:
        source = program.add_node(lp.CacherNode(learner, refresh_interval_ms=100,
                                                stale_after_ms=60_000), label="cacher")
    with program.group("actor"):
        actors = [program.add_node(lp.CourierNode(Actor, replay, source, i, config))
                  for i in range(config["actors"])]
    program.add_node(lp.PyNode(drive, actors, learner, replay, config), label="driver")
    return program


def arguments() -> argparse.ArgumentParser:
    """The program's flags (agent_scaling.py passes them on)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup_s", type=float, default=2.0)
    parser.add_argument("--step_ms", type=float, default=5.0)
    parser.add_argument("--cpu_us", type=float, default=50.0)
    parser.add_argument("--obs", default="84,84,4", help="observation shape, e.g. 16 (a vector)")
    parser.add_argument("--fetch_every", type=int, default=100)
    parser.add_argument("--weights_mb", type=float, default=4.0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--spi", type=float, default=0.1, help="samples per insert (the "
                        "learner samples at most this many items per step written)")
    parser.add_argument("--max_items", type=int, default=2000)
    parser.add_argument("--cacher", action="store_true")
    parser.add_argument("--launch_type", default="local_mp")
    parser.add_argument("--slurm_run_dir", help="under Slurm: a folder its hosts share")
    parser.add_argument("--floor", action="store_true", help="measure what Reverb alone "
                        "costs per step (reverb_floor_us) instead of running the program")
    parser.add_argument("--out", required=True)
    return parser


def config_of(args: argparse.Namespace) -> dict:
    return {**vars(args), "obs": [int(d) for d in args.obs.split(",")],
            "launched_at": time.time()}


def main() -> None:
    args = arguments().parse_args()
    config = config_of(args)
    if args.floor:
        with open(args.out, "w") as f:
            json.dump(reverb_floor_us(config), f)
        return
    on_slurm = ({"slurm": lp.SlurmSettings(run_dir=args.slurm_run_dir)}
                if args.slurm_run_dir else {})
    controller = lp.launch(make_program(config), launch_type=args.launch_type,
                           terminal="output_to_files", **on_slurm)
    if controller is not None and hasattr(controller, "wait"):
        controller.wait()


if __name__ == "__main__":
    main()
