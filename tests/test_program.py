"""Program graph rules (labels, groups) as in DeepMind Launchpad, plus make_program."""

import pytest

import launchpad as lp


def _work():
    return None


def test_add_node_returns_a_handle_and_records_the_group():
    program = lp.Program("p")
    handle = program.add_node(lp.PyNode(_work), label="worker")
    assert isinstance(handle, lp.Handle)
    assert list(program.groups) == ["worker"]
    assert len(program.get_all_nodes()) == 1


def test_group_adds_every_node_to_its_label():
    program = lp.Program("p")
    with program.group("actor"):
        for _ in range(3):
            program.add_node(lp.PyNode(_work))
    assert [n.name for n in program.groups["actor"]] == ["actor/0", "actor/1", "actor/2"]


def test_empty_label_is_an_error():
    with pytest.raises(ValueError, match="Label should not be empty"):
        lp.Program("p").add_node(lp.PyNode(_work))


def test_label_contradicting_the_open_group_is_an_error():
    program = lp.Program("p")
    with program.group("actor"), pytest.raises(ValueError, match="does not match"):
        program.add_node(lp.PyNode(_work), label="learner")


def test_label_equal_to_the_open_group_is_accepted():
    program = lp.Program("p")
    with program.group("actor"):
        program.add_node(lp.PyNode(_work), label="actor")
    assert len(program.groups["actor"]) == 1


def test_nested_groups_are_an_error():
    program = lp.Program("p")
    with program.group("a"), pytest.raises(ValueError, match="cannot be nested"):
        with program.group("b"):
            pass


def test_a_node_cannot_be_added_twice():
    program = lp.Program("p")
    node = lp.PyNode(_work)
    program.add_node(node, label="a")
    with pytest.raises(ValueError, match="already in a program"):
        program.add_node(node, label="b")


def test_adding_something_that_is_not_a_node_explains_the_fix():
    with pytest.raises(TypeError, match="lp.PyNode"):
        lp.Program("p").add_node(_work, label="a")


def test_program_needs_a_name():
    with pytest.raises(ValueError, match="non-empty name"):
        lp.Program("")


def test_make_program_labels_nodes_after_what_they_run():
    class Learner:
        pass

    program = lp.make_program(lp.PyNode(_work), lp.CourierNode(Learner), name="made")
    assert program.name == "made"
    assert sorted(program.groups) == ["Learner", "_work"]


def test_node_options_are_checked_when_the_node_is_made():
    with pytest.raises(ValueError, match="courier_client_kwargs.*'retries'"):
        lp.CourierNode(dict, courier_client_kwargs={"retries": 3})
    with pytest.raises(ValueError, match="courier_client_kwargs: transport must be one of"):
        lp.CourierNode(dict, courier_client_kwargs={"transport": "pigeon"})
    with pytest.raises(TypeError, match="PyNode needs a callable"):
        lp.PyNode(42)
