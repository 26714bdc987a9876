"""Evolution strategies: a master and a group of workers, the master's state surviving kills.

    master --scatter.evaluate(per worker: its perturbations)--> worker x N
           <------------- each perturbation's returns -----------

The example from the Launchpad paper: a master searches the parameters of a linear CartPole
policy by evolution strategies (es.py), and a group of workers evaluates each generation's
perturbations, a slice each, through one group call (`program.group_handle("worker")`,
`workers.scatter.evaluate(...)`). The master's group keeps its state (`lp.StatePolicy`): its
parameters, Adam's moments, its generation and its random generator are saved every
`--save_every_secs`. Killed, it restarts from the last saved generation (`--max_restarts`),
and a whole program killed resumes with `lp.launch(..., resume=RUN_ID)` (`--resume` of
`launchpad launch`, or `--lp_resume`). It stops the program once a generation's mean return
reaches `--target`, printing each generation as it goes.

    python -m examples.evolution_strategies.launch --lp_launch_type=local_mp --workers=8
"""

from __future__ import annotations

import numpy as np
from absl import app, flags

import launchpad as lp
from examples.evolution_strategies.es import Search, Worker

_WORKERS = flags.DEFINE_integer("workers", 8, "Worker nodes.", lower_bound=1)
_PAIRS = flags.DEFINE_integer("pairs_per_worker", 2, "Antithetic pairs each worker "
                              "evaluates per generation.", lower_bound=1)
_TARGET = flags.DEFINE_float("target", 475.0, "The mean return that ends the search.")
_MAX_GENERATIONS = flags.DEFINE_integer("max_generations", 200, "Generations at most.")
_SAVE_EVERY = flags.DEFINE_float("save_every_secs", 5.0, "How often the master is saved.")
_MAX_RESTARTS = flags.DEFINE_integer("max_restarts", 3, "Restarts of a killed master.")


class Master:
    """Runs the search; serves `generation()` and `mean_return()` for whoever watches."""

    def __init__(self, workers, pairs_per_worker: int, target: float, max_generations: int):
        self._workers = workers
        self._pairs = pairs_per_worker
        self._target = target
        self._max_generations = max_generations
        self._search = Search(seed=0)
        self._last_mean = 0.0

    def run(self) -> None:
        search = self._search
        while not lp.stop_event().is_set():
            with search.lock:
                if search.generation >= self._max_generations:
                    break
                seeds = search.noise_seeds(self._pairs * len(self._workers))
                params, episode_seed = search.params.copy(), search.generation
            # Worker i evaluates seeds[i * pairs:(i + 1) * pairs]: the answers, flattened,
            # come in the seeds' order.
            slices = [(params, seeds[i * self._pairs:(i + 1) * self._pairs], search.sigma,
                       episode_seed) for i in range(len(self._workers))]
            answers = self._workers.scatter.evaluate(slices)
            returns = np.array([pair for answer in answers for pair in answer])
            with search.lock:
                search.step(seeds, returns)
                self._last_mean = float(returns.mean())
                generation = search.generation
            print(f"generation {generation}: mean return {self._last_mean:.1f}", flush=True)
            if self._last_mean >= self._target:
                print(f"solved at generation {generation}", flush=True)
                break
        lp.stop()

    def generation(self) -> int:
        return self._search.generation

    def mean_return(self) -> float:
        return self._last_mean

    def save_state(self) -> dict:
        with self._search.lock:
            return self._search.state()

    def restore_state(self, state: dict) -> None:
        self._search.restore(state)
        print(f"master: restored at generation {self._search.generation}", flush=True)


def make_program(num_workers: int = 8, pairs_per_worker: int = 2, target: float = 475.0,
                 max_generations: int = 200, save_every_secs: float = 5.0,
                 max_restarts: int = 3) -> lp.Program:
    program = lp.Program("evolution_strategies")
    with program.group("worker"):
        for _ in range(num_workers):
            program.add_node(lp.CourierNode(Worker))
    with program.group("master", restart=lp.RestartPolicy(max_restarts),
                       state=lp.StatePolicy(every_secs=save_every_secs)):
        program.add_node(lp.CourierNode(Master, program.group_handle("worker"),
                                        pairs_per_worker, target, max_generations))
    return program


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    program = make_program(_WORKERS.value, _PAIRS.value, _TARGET.value,
                           _MAX_GENERATIONS.value, _SAVE_EVERY.value, _MAX_RESTARTS.value)
    controller = lp.launch(program)
    print(f"run {controller.run_id}", flush=True)
    controller.wait()


if __name__ == "__main__":
    app.run(main)
