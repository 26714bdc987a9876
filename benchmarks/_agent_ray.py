"""The agent of agent_program.py on bare Ray: the same environment, actor and learner code,
as Ray actors, with a Reverb server in an actor of its own; this process drives it.

    python -m benchmarks._agent_ray --actors 8 --seconds 10 --out figures.json [...]

What differs is only what Launchpad gives a program and Ray does not: handles become Ray actor
handles (a call is `ray.get(handle.method.remote())`), the replay node is a Reverb server an
actor starts, the cacher (with `--cacher`) is an actor that refreshes the learner's weights
every 100 ms, and the stop is a method call. Ray is started here, on this machine, and
stopped at the end (`ray.shutdown()` of this driver's own Ray).
"""

from __future__ import annotations

import json
import os
import threading

from benchmarks import agent_program

_THREADS = {"max_concurrency": 4}  # run() on one thread, the driver's calls on the others


class _Stoppable:
    """A Ray actor's way to learn that the run is over (a Launchpad node's stop event)."""

    def _stop_event(self) -> threading.Event:
        if not hasattr(self, "_stop"):
            self._stop = threading.Event()
        return self._stop

    def stop(self) -> None:
        self._stop_event().set()

    def stopped(self, within_s: float = 0.0) -> bool:
        return self._stop_event().wait(within_s)

    def pid(self) -> int:
        return os.getpid()


class _Source:
    """A Ray actor handle that answers `get_weights()` as a courier client does."""

    def __init__(self, handle):
        self._handle = handle

    def get_weights(self):
        import ray
        return ray.get(self._handle.get_weights.remote())


class ReplayActor(_Stoppable):
    def __init__(self, config: dict):
        import reverb
        self._server = reverb.Server(agent_program.make_tables(config))

    def address(self) -> str:
        return f"localhost:{self._server.port}"


class LearnerActor(_Stoppable, agent_program.Learner):
    def __init__(self, address: str, config: dict):
        class _Replay:
            server_address = address

        agent_program.Learner.__init__(self, _Replay(), config["weights_mb"], config["batch"])


class CacherActor(_Stoppable):
    """Keeps the learner's latest weights, refreshed every 100 ms, for the actors."""

    def __init__(self, learner):
        self._source = _Source(learner)
        self._latest = self._source.get_weights()

    def get_weights(self):
        return self._latest

    def run(self) -> None:
        while not self.stopped(within_s=0.1):
            self._latest = self._source.get_weights()


class ActorActor(_Stoppable, agent_program.Actor):
    def __init__(self, address: str, source, actor_id: int, config: dict):
        import reverb
        agent_program.Actor.__init__(self, reverb.Client(address), _Source(source), actor_id,
                                     config)


def run(config: dict) -> None:
    """Runs the agent on a Ray started here; writes its figures to `config["out"]`."""
    import ray
    ray.init(address="local", num_cpus=max(8, config["actors"] + 4), include_dashboard=False,
             log_to_driver=False)
    try:
        remote = {cls: ray.remote(**_THREADS)(cls)
                  for cls in (ReplayActor, LearnerActor, CacherActor, ActorActor)}
        replay = remote[ReplayActor].options(num_cpus=0).remote(config)
        address = ray.get(replay.address.remote())
        learner = remote[LearnerActor].options(num_cpus=0).remote(address, config)
        source = learner
        learner.run.remote()
        if config["cacher"]:
            source = remote[CacherActor].options(num_cpus=0).remote(learner)
            source.run.remote()
        actors = [remote[ActorActor].options(num_cpus=0).remote(address, source, i, config)
                  for i in range(config["actors"])]
        for actor in actors:
            actor.run.remote()
        pids = ray.get([a.pid.remote() for a in [replay, learner, source, *actors]])

        def cpu_s() -> float:
            return sum(agent_program.process_cpu_s(pid) for pid in set(pids)) + \
                agent_program.process_cpu_s(os.getpid())

        figures = agent_program.measure(_RayHandles(actors, learner, address), config, cpu_s)
        with open(config["out"], "w") as f:
            json.dump(figures, f)
        # (A learner waiting on a sample waits on: ray.shutdown ends every actor.)
        ray.get([actor.stop.remote() for actor in [*actors, source, learner]])
    finally:
        ray.shutdown()


class _RayHandles(agent_program.Handles):
    """What `measure` asks of the agent, of its Ray actors."""

    def __init__(self, actors, learner, address: str):
        import reverb
        super().__init__(actors, learner, reverb.Client(address))

    def ready(self) -> list:
        return [_Future(actor.ready.remote()) for actor in self._actors]

    def stats(self) -> list:
        return [_Future(actor.stats.remote(True)) for actor in self._actors]

    def pause(self) -> list:
        return [_Future(actor.pause.remote()) for actor in self._actors]

    def learner_stats(self) -> dict:
        import ray
        return ray.get(self._learner.stats.remote())


class _Future:
    def __init__(self, ref):
        self._ref = ref

    def result(self):
        import ray
        return ray.get(self._ref)


def main() -> None:
    parser = agent_program.arguments()
    args = parser.parse_args()
    run(agent_program.config_of(args))


if __name__ == "__main__":
    main()
