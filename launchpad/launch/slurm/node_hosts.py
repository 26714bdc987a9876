"""Where each run of a node goes under Slurm: its host, or, once that host is lost, another.

A node's spawner is a `NodeOnHost`: each start or restart asks the agent of the node's host
whether it still answers (a ping, within HOST_ANSWER_SECS; an agent not started yet answers).
One that does not has lost its host (the machine died, its slurmd stopped, the network went):
its step is given up (what it ran is reported killed) and the node takes room on another host
of the job's component (HostRoom.move: holes of the packing, spare slots of
`SlurmSettings(max_nodes=...)`) and starts there, bound to its share of that host. The job
itself outlives the host (`sbatch --no-kill`). Its handles find it where it now runs, as
after any restart: it registers its new address with the controller.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
from collections.abc import Callable

from launchpad.launch.runtime import spec, terminals
from launchpad.launch.runtime.process import Spawner, Stdio
from launchpad.launch.slurm.agents import HostAgent
from launchpad.launch.slurm.host_room import HostKey, HostRoom
from launchpad.nodes.python.local_multi_processing import PythonProcess

# How long a host's agent may take to answer before its host counts as lost.
HOST_ANSWER_SECS = 10.0


class NodeOnHost(Spawner):
    """The spawner of node `name` (see the module doc)."""

    def __init__(self, name: str, room: HostRoom, agents: dict[HostKey, HostAgent]):
        self._name = name
        self._room = room
        self._agents = agents

    def spawn(self, spec_path: str, settings: PythonProcess, stdio: Stdio, own_group: bool,
              on_exit: Callable[[int], None],
              imports: tuple[str, ...] = ()) -> concurrent.futures.Future:
        was = self._room.host_of(self._name)
        if not self._agents[was].answers(HOST_ANSWER_SECS):
            self._agents[was].abandon(f"its host did not answer within {HOST_ANSWER_SECS:g}s")
            lost = {key for key, agent in self._agents.items() if agent.ended}
            now = self._room.move(self._name, lost)
            _rebind(spec_path, self._room.env(self._name))
            terminals.say(f"node {self._name} moves from host {was[1]} to host {now[1]} of "
                          f"component {now[0]}: its host ({self._agents[was].name}) is lost")
        return self._agents[self._room.host_of(self._name)].spawn(
            spec_path, settings, stdio, own_group, on_exit, imports)

    def signal_group(self, pid: int, sig: int) -> None:
        self._agents[self._room.host_of(self._name)].signal_group(pid, sig)


def _rebind(spec_path: str, slots: dict[str, str]) -> None:
    """The node's spec, its share of its new host in place of the old (slot_binding.py)."""
    node_spec = spec.read_spec_file(spec_path)
    spec.write_spec_file(dataclasses.replace(node_spec, env={**node_spec.env, **slots}),
                         os.path.dirname(spec_path))
