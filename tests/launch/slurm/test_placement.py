"""Placement of a program's nodes in its Slurm job (slurm/placement.py), as arithmetic on
the hosts `sinfo` describes: no cluster is needed to show where each node goes, which
request is made, and that a layout which cannot fit is refused with its numbers. The same
layouts run on the real test Slurm in test_slurm.py."""

from __future__ import annotations

import pytest

import launchpad as lp
from launchpad.launch.slurm import inventory as slurm_inventory
from launchpad.launch.slurm.placement import BY_RESOURCES, place

# sinfo -h -N -o "%N|%c|%m|%G|%P|%t|%f" of 3 hosts of 4 CPUs in partition 'main'.
THREE_SMALL_HOSTS = "\n".join(f"node{k}|4|8000|(null)|main*|idle|(null)" for k in (1, 2, 3))


def _nodes(*groups: tuple[str, int, lp.Resources]) -> list[tuple[str, str, lp.Resources]]:
    return [(f"{label}/{i}", label, needs) for label, count, needs in groups
            for i in range(count)]


def test_the_inventory_keeps_usable_hosts_with_their_partitions_gpus_and_features():
    inventory = slurm_inventory.parse("\n".join([
        "g1|32|64000|gpu:a100:4(S:0-1),shard:8|gpu|mix|a100,ib",
        "g1|32|64000|gpu:a100:4(S:0-1),shard:8|all*|mix|a100,ib",
        "c1|16|32000|(null)|all*|idle~|(null)",
        "c2|16|32000|(null)|all*|down*|(null)",
        "c3|16|32000|(null)|all*|drng|(null)",
        "garbage line"]))
    assert inventory.default_partition == "all"
    assert inventory.partitions == {"all", "gpu"}
    assert [h.name for h in inventory.in_partition(None)] == ["g1", "c1"]  # down, draining: out
    gpu_host = inventory.in_partition("gpu")[0]
    assert (gpu_host.gpus, gpu_host.cpus, gpu_host.features) == (4, 32, {"a100", "ib"})
    assert slurm_inventory.summary(inventory.in_partition(None)) == (
        "1 host of 32 CPUs and 4 GPUs and 1 of 16 CPUs")


def test_groups_of_one_kind_share_one_component_packed_on_the_hosts_that_hold_them():
    """The issue's layout: 3 workers of 3 CPUs and a collector of 1 (10 CPUs on 12). As a
    component per lp.Resources it needs 4 hosts of 3 and pends for ever; packed, it fits."""
    inventory = slurm_inventory.parse(THREE_SMALL_HOSTS)
    placement = place("fits", _nodes(("worker", 3, lp.Resources(cpus=3)),
                                     ("collector", 1, lp.Resources())), inventory, None)
    (component,) = placement.components
    assert (component.hosts, component.cpus, component.groups) == (3, 4, ("worker",
                                                                          "collector"))
    assert component.sbatch_options() == ["--nodes=3", "--ntasks-per-node=1",
                                          "--cpus-per-task=4"]
    hosts = {slot.node: slot.host for slot in placement.slots}
    assert sorted(hosts[f"worker/{i}"] for i in range(3)) == [0, 1, 2]
    assert hosts["collector/0"] in {0, 1, 2}
    assert [s.node for s in placement.slots] == ["worker/0", "worker/1", "worker/2",
                                                 "collector/0"]  # the program's order
    text = placement.describe()
    assert "component 0: 3 hosts of 4 CPUs (groups worker, collector)" in text
    assert "(4/4 CPUs)" in text and "collector/0 (1 CPU)" in text


def test_small_nodes_pack_onto_one_host_and_the_request_is_what_they_need():
    inventory = slurm_inventory.parse(THREE_SMALL_HOSTS)
    placement = place("small", _nodes(("actor", 3, lp.Resources()),
                                      ("learner", 1, lp.Resources(memory_mb=1000))),
                      inventory, None)
    (component,) = placement.components
    assert (component.hosts, component.cpus, component.memory_mb) == (1, 4, 1000)
    argv = placement.sbatch_argv(["--job-name=lp-small"], ["--time=30"], ["sleep", "1"])
    assert argv == ["sbatch", "--parsable", "--job-name=lp-small", "--time=30", "--nodes=1",
                    "--ntasks-per-node=1", "--cpus-per-task=4", "--mem=1000M", "--wrap",
                    "exec sleep 1"]


def test_an_impossible_layout_is_refused_with_the_arithmetic():
    inventory = slurm_inventory.parse(THREE_SMALL_HOSTS)
    with pytest.raises(lp.SlurmError) as info:
        place("big", _nodes(("worker", 3, lp.Resources(cpus=4)),
                            ("collector", 1, lp.Resources())), inventory, None)
    message = str(info.value)
    assert "partition 'main', which has 3 hosts of 4 CPUs" in message
    assert "group 'worker' needs 3 nodes of 4 CPUs (12 CPUs)" in message
    assert "group 'collector' needs 1 node of 1 CPU (1 CPU)" in message
    assert "13 CPUs, on 12" in message


def test_a_node_larger_than_any_host_names_its_group_and_the_largest_host():
    inventory = slurm_inventory.parse(THREE_SMALL_HOSTS)
    with pytest.raises(lp.SlurmError, match=r"Group 'learner' of program 'p' asks for 8 CPUs "
                                            r"per node, and the largest host of partition "
                                            r"'main' has 4"):
        place("p", _nodes(("learner", 1, lp.Resources(cpus=8))), inventory, None)
    with pytest.raises(lp.SlurmError, match=r"Group 'learner' of program 'p' cannot run on "
                                            r"partition 'main': it has no usable host with "
                                            r"GPUs"):
        place("p", _nodes(("learner", 1, lp.Resources(gpus=1))), inventory, None)


def test_a_partition_slurm_lacks_is_named_with_those_it_has():
    inventory = slurm_inventory.parse(THREE_SMALL_HOSTS)
    with pytest.raises(lp.SlurmError, match=r"partition 'gpu', which Slurm does not have; "
                                            r"its partitions: main"):
        place("p", _nodes(("w", 1, lp.Resources())), inventory, "gpu")


def test_groups_of_other_kinds_get_components_of_their_own_on_hosts_of_their_own():
    inventory = slurm_inventory.parse("\n".join([
        "g1|8|64000|gpu:2|main*|idle|(null)", "c1|4|8000|(null)|main*|idle|(null)",
        "c2|4|8000|(null)|main*|idle|(null)"]))
    placement = place("mixed", _nodes(("learner", 2, lp.Resources(cpus=2, gpus=1)),
                                      ("actor", 6, lp.Resources())), inventory, None)
    learner, actors = placement.components
    assert placement.heterogeneous
    assert (learner.hosts, learner.cpus, learner.gpus) == (1, 4, 2)
    assert learner.sbatch_options()[3] == "--gpus-per-node=2"
    # The GPU host is the learner component's: the actors pack onto the other two.
    assert (actors.hosts, actors.cpus) == (2, 3)
    argv = placement.sbatch_argv(["--job-name=lp-mixed"], ["--account=a"], ["true"])
    assert argv.count(":") == 1 and argv.count("--account=a") == 2  # each component's


def test_components_by_resources_keep_a_component_per_distinct_resources():
    inventory = slurm_inventory.parse(THREE_SMALL_HOSTS)
    nodes = _nodes(("worker", 2, lp.Resources(cpus=2)), ("collector", 1, lp.Resources()))
    assert len(place("p", nodes, inventory, None).components) == 1
    apart = place("p", nodes, inventory, None, BY_RESOURCES)
    assert [c.groups for c in apart.components] == [("worker",), ("collector",)]
    with pytest.raises(ValueError, match="components must be one of"):
        lp.SlurmSettings(components="by_mood")
    with pytest.raises(ValueError, match="pending_timeout_secs must be a number > 0"):
        lp.SlurmSettings(pending_timeout_secs=0)
