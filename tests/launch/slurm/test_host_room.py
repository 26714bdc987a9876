"""The room a group grows into on a running Slurm job's hosts (slurm/host_room.py), as
arithmetic on a placement: the spare slots `SlurmSettings(max_nodes=...)` asks for, the holes
of the packing, what a removed node frees, and a refusal that says what would make room. The
same growth runs on the real test Slurm in tests/launch/test_scale.py."""

from __future__ import annotations

import pytest

import launchpad as lp
from launchpad.launch.slurm import inventory as slurm_inventory
from launchpad.launch.slurm.errors import SlurmError
from launchpad.launch.slurm.host_room import HostRoom
from launchpad.launch.slurm.placement import place
from tests.launch.slurm.test_placement import THREE_SMALL_HOSTS, _nodes


def _placement(actors: int, spare: int = 0, cpus: int = 1):
    nodes = _nodes(("learner", 1, lp.Resources(cpus=2)),
                   ("actor", actors + spare, lp.Resources(cpus=cpus)))
    spare_names = frozenset(f"actor/{i}" for i in range(actors, actors + spare))
    return place("elastic", nodes, slurm_inventory.parse(THREE_SMALL_HOSTS), None,
                 spare=spare_names)


def test_spare_slots_make_the_job_ask_for_room_and_the_dry_run_shows_it():
    (component,) = _placement(2, spare=4).components
    assert (component.hosts, component.cpus) == (2, 4)  # 8 CPUs: 2 + 6 actors of 1
    assert "actor/5 (1 CPU, room to grow)" in _placement(2, spare=4).describe()
    (packed,) = _placement(2).components
    assert (packed.hosts, packed.cpus) == (1, 4)


def test_a_group_grows_into_the_spare_slots_least_loaded_host_first():
    room = HostRoom(_placement(2, spare=4), "7")
    # Host 0 holds the learner (2 CPUs), host 1 the two actors: each has 2 of 4 free.
    hosts = room.take("actor", ["actor/2", "actor/3", "actor/4"], lp.Resources())
    assert hosts == [(0, 0), (0, 1), (0, 0)]
    assert room.env("actor/4") == {"LAUNCHPAD_CPU_SLOTS": "3-3"}
    room.take("actor", ["actor/5"], lp.Resources())
    with pytest.raises(SlurmError) as refused:
        room.take("actor", ["actor/6"], lp.Resources())
    message = str(refused.value)
    assert "Group 'actor' of program 'elastic' cannot grow by 1 node of 1 CPUs" in message
    assert "Slurm job 7" in message and "host 0: 0 of 4 CPUs free" in message
    assert "lp.SlurmSettings(max_nodes={'actor': 7})" in message


def test_a_growth_that_does_not_all_fit_takes_nothing():
    room = HostRoom(_placement(2, spare=1), "7")  # 2 hosts of 3 CPUs, 1 free on each
    with pytest.raises(SlurmError, match="cannot grow by 3 nodes"):
        room.take("actor", ["actor/2", "actor/3", "actor/4"], lp.Resources())
    assert room.take("actor", ["actor/2", "actor/3"], lp.Resources()) == [(0, 0), (0, 1)]


def test_what_a_removed_node_held_is_taken_again_by_the_next_that_fits():
    room = HostRoom(_placement(2, cpus=1), "7")  # learner 0-1, actors 2 and 3
    assert room.env("actor/1") == {"LAUNCHPAD_CPU_SLOTS": "3-3"}
    with pytest.raises(SlurmError, match="0 of 4 CPUs free"):
        room.take("actor", ["actor/2"], lp.Resources())
    room.free(["actor/1"])
    assert room.take("actor", ["actor/1"], lp.Resources()) == [(0, 0)]
    assert room.env("actor/1") == {"LAUNCHPAD_CPU_SLOTS": "3-3"}
    room.free(["learner/0"])  # two free CPUs in a run: a node of 2 fits there
    room.take("actor", ["actor/2"], lp.Resources(cpus=2))
    assert room.env("actor/2") == {"LAUNCHPAD_CPU_SLOTS": "0-1"}


def test_a_node_whose_host_is_lost_moves_to_a_host_with_room_or_is_refused_named():
    room = HostRoom(_placement(2, spare=2), "7")  # learner on host 0, actors on host 1
    assert room.host_of("actor/1") == (0, 1)
    assert room.move("actor/1", avoid=set()) == (0, 0)
    assert room.env("actor/1") == {"LAUNCHPAD_CPU_SLOTS": "2-2"}
    room.take("actor", ["actor/2"], lp.Resources())  # the last free CPU but one
    room.take("actor", ["actor/3"], lp.Resources())
    with pytest.raises(SlurmError) as refused:
        room.move("actor/0", avoid={(0, 0)})
    assert "Node actor/0 lost its host (host 1 of component 0 of Slurm job 7)" in str(
        refused.value)
    assert room.host_of("actor/0") == (0, 1)  # where it was
