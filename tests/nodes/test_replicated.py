"""ReplicatedNode in the graph: the tasks it adds, its handle, and bad arguments (no
TensorFlow is needed or imported for any of this)."""


import pytest

import launchpad as lp


class _Trainer:
    def __init__(self, replicator):
        self.replicator = replicator


def test_sync_workers_join_the_program_as_one_group_and_the_handle_is_the_chiefs():
    program = lp.Program("p")
    handle = program.add_node(lp.ReplicatedNode(_Trainer, num_workers=3), label="trainer")
    assert [node.name for node in program.groups["trainer"]] == [
        "trainer/0", "trainer/1", "trainer/2"]
    assert handle.node_name == "trainer/0"


def test_async_adds_a_chief_workers_and_parameter_servers_after_earlier_nodes():
    program = lp.Program("p")
    with program.group("trainer"):
        program.add_node(lp.ReplicatedNode(_Trainer))
        handle = program.add_node(lp.ReplicatedNode(_Trainer, num_workers=2, mode="async",
                                                    num_ps=2))
    assert len(program.groups["trainer"]) == 1 + 5
    assert handle.node_name == "trainer/1"
    assert program.groups["trainer"][1]._plan.roles == [
        ("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0), ("ps", 1)]


def test_make_program_labels_it_trainer():
    program = lp.make_program(lp.ReplicatedNode(_Trainer, num_workers=2))
    assert [node.name for node in program.get_all_nodes()] == ["trainer/0", "trainer/1"]


def test_a_cluster_cannot_be_colocated():
    with pytest.raises(ValueError, match="is several nodes .* cannot be colocated"):
        lp.MultiProcessingColocation([lp.ReplicatedNode(_Trainer, num_workers=2)])


@pytest.mark.parametrize("kwargs, error, message", [
    ({"num_workers": 0}, ValueError, "num_workers must be an int >= 1, got 0"),
    ({"mode": "eventual"}, ValueError, "mode must be 'sync' or 'async', got 'eventual'"),
    ({"num_ps": 1}, ValueError, "num_ps is for mode='async'"),
    ({"mode": "async", "num_ps": 0}, ValueError, "num_ps must be an int >= 1, got 0"),
    ({"startup_timeout_secs": 0}, ValueError, "startup_timeout_secs must be positive"),
    ({"courier_kwargs": {"threads": 2}}, ValueError, r"Unknown courier_kwargs option\(s\)"),
])
def test_bad_arguments_are_named(kwargs, error, message):
    with pytest.raises(error, match=message):
        lp.ReplicatedNode(_Trainer, **kwargs)


def test_the_trainer_must_be_callable():
    with pytest.raises(TypeError, match="needs a trainer class"):
        lp.ReplicatedNode("trainer")
