"""ReplicatedNode running: the same trainer in every mode, sync workers that agree, async
training on parameter servers, bounded start-up, and stopping TensorFlow workers."""

import logging
import threading

import numpy as np
import pytest

import launchpad as lp
from launchpad.nodes import replicated
from tests.launch.helpers import TIMEOUT
from tests.stacks import needs_tensorflow

pytestmark = needs_tensorflow

STEPS = 12
# TensorFlow processes on 2 cores: importing it alone takes seconds in each.
START_TIMEOUT = 120
# The handle waits as long for the chief's trainer to come up (four TensorFlow processes
# starting on a busy machine take more than the client's default 30 s) and for each call.
CLIENT_KWARGS = {"call_timeout": START_TIMEOUT, "connect_timeout": START_TIMEOUT}

MODES = {
    "one_device": ({"devices": 1}, "device:CPU:0"),
    "two_devices": ({"devices": 2}, "device:CPU:0"),  # mirrored: the first copy's device
    "two_sync_workers": ({"num_workers": 2}, "/job:worker"),
    "async_one_ps": ({"num_workers": 2, "mode": "async", "num_ps": 1}, "/job:ps"),
}


def _trainer_class(name):
    from tests.replicator import trainers  # imports TensorFlow: only where nodes need it
    return getattr(trainers, name)


@pytest.mark.parametrize("mode", MODES)
def test_the_same_trainer_learns_in_every_mode(mode, launch_one_mp):
    kwargs, device = MODES[mode]
    program = lp.Program(f"replicated-{mode}")
    handle = program.add_node(lp.ReplicatedNode(
        _trainer_class("LinearTrainer"), global_batch=8, startup_timeout_secs=START_TIMEOUT,
        courier_client_kwargs=CLIENT_KWARGS, **kwargs), label="trainer")
    launch_one_mp(program)
    trainer = handle.dereference()
    losses = [trainer.step() for _ in range(STEPS)]
    assert losses[-1] < losses[0] / 4
    assert trainer.get_variables()["steps"] == STEPS  # one optimizer, updated once a step
    assert all(device in d for d in trainer.variable_devices()), trainer.variable_devices()


def test_sync_workers_end_with_the_same_weights_as_one_process(launch_processes, box):
    reports = box()
    program = lp.Program("sync-equal")
    trainer = _trainer_class("LinearTrainer")
    options = dict(global_batch=8, reporter=reports, startup_timeout_secs=START_TIMEOUT,
                   courier_client_kwargs=CLIENT_KWARGS)
    single = program.add_node(lp.ReplicatedNode(trainer, **options), label="single")
    pair = program.add_node(lp.ReplicatedNode(trainer, num_workers=2, **options), label="pair")
    launch_processes(program)
    single, pair = single.dereference(), pair.dereference()
    for _ in range(STEPS):
        assert single.step() == pytest.approx(pair.step(), rel=1e-5)
    single.report("single")
    pair.report("pair")  # made on both workers of the pair
    variables = {}
    for _ in range(3):
        tag, values = reports.get()
        variables.setdefault(tag, []).append(values)
    (expected,), workers = variables["single"], variables["pair"]
    assert len(workers) == 2
    for name in expected:
        np.testing.assert_array_equal(workers[0][name], workers[1][name])  # identical
        np.testing.assert_allclose(workers[0][name], expected[name], rtol=1e-5, atol=1e-6)


def test_a_mesh_across_two_workers_trains_to_the_weights_of_one_process(launch_processes):
    """Two workers, each with two logical CPU devices, make one 2x2 mesh (DTensor's
    multi-client mode), the trainer's kernel split by columns over it."""
    program = lp.Program("mesh-equal")
    trainer = _trainer_class("WideTrainer")
    options = dict(global_batch=8, startup_timeout_secs=START_TIMEOUT,
                   courier_client_kwargs=CLIENT_KWARGS)
    single = program.add_node(lp.ReplicatedNode(trainer, **options), label="single")
    meshed = program.add_node(lp.ReplicatedNode(
        trainer, num_workers=2, mesh={"batch": 2, "model": 2}, layouts=trainer.LAYOUTS,
        **options), label="meshed")
    launch_processes(program)
    single, meshed = single.dereference(), meshed.dereference()
    losses = [(single.step(), meshed.step()) for _ in range(STEPS)]
    np.testing.assert_allclose([m for _, m in losses], [s for s, _ in losses], rtol=1e-5)
    assert losses[-1][0] < losses[0][0] * 0.8  # it learns (6.3 -> 4.1 measured)
    expected, found = single.get_variables(), meshed.get_variables()
    for name in expected:
        np.testing.assert_allclose(found[name], expected[name], rtol=1e-5, atol=1e-6)


def test_a_mesh_is_for_sync_workers_without_devices():
    with pytest.raises(ValueError, match="mesh= is for mode='sync' without devices="):
        lp.ReplicatedNode(_Nothing, num_workers=2, mode="async", mesh={"model": 2})


@pytest.mark.parametrize("workers_ignore_stop", [False, True])
def test_stopping_ends_tensorflow_workers_within_the_grace_period(workers_ignore_stop,
                                                                  launch_one_mp, box, caplog):
    reports = box()
    program = lp.Program("sync-stop")
    program.add_node(lp.ReplicatedNode(
        _trainer_class("RunningLinearTrainer"), num_workers=2, reporter=reports,
        workers_ignore_stop=workers_ignore_stop, startup_timeout_secs=START_TIMEOUT),
        label="trainer")
    controller = launch_one_mp(program, termination_notice_secs=5)
    assert reports.get(START_TIMEOUT) == ("stepping", None)  # the chief trains
    with caplog.at_level(logging.WARNING):
        controller.stop()
        assert controller.wait(timeout=TIMEOUT)
    # Every task ended by itself, before the launcher had to signal it.
    assert controller.exit_codes() == {"trainer/0": 0, "trainer/1": 0}
    assert not [r for r in caplog.records if "SIGTERM" in r.getMessage()]


class _Stubborn:
    """A trainer whose run() never returns, stop or not."""

    def __init__(self, replicator, reporter):
        self._reporter = reporter

    def run(self):
        self._reporter.put("running")
        threading.Event().wait()


def test_a_trainer_that_ignores_the_stop_is_left_at_the_end_of_the_grace_period(
        launch_one_mp, box, caplog):
    reports = box()
    program = lp.Program("stubborn")
    program.add_node(lp.ReplicatedNode(_Stubborn, reports), label="trainer")
    controller = launch_one_mp(program, termination_notice_secs=2)
    assert reports.get(START_TIMEOUT) == "running"
    with caplog.at_level(logging.WARNING):
        controller.stop()
        assert controller.wait(timeout=TIMEOUT)
    assert controller.exit_codes() == {"trainer/0": 0}  # it ended by itself, unsignalled
    assert not [r for r in caplog.records if "SIGTERM" in r.getMessage()]


class _Nothing:
    def __init__(self, replicator):
        del replicator


@pytest.mark.usefixtures("no_leaked_threads")
def test_a_task_that_never_comes_up_is_named():
    program = lp.Program("half-cluster")
    node = lp.ReplicatedNode(_Nothing, num_workers=3, startup_timeout_secs=0.5)
    program.add_node(node, label="trainer")
    controller = lp.Controller(program)  # the real registry, with no node started
    try:
        task = controller.node_context("trainer", 0)
        task.controller.register("trainer", 1, replicated._TF_ADDRESS, "127.0.0.1:1")
        with pytest.raises(TimeoutError, match=r"Task trainer/2 \(worker 2\) of "
                                               r"ReplicatedNode 'trainer' did not come up "
                                               r"within 0.5 s"):
            replicated._cluster_of(node._plan, task, 0, port=0)
    finally:
        controller.kill()


def test_a_cluster_cannot_run_as_threads():
    program = lp.Program("threads")
    program.add_node(lp.ReplicatedNode(_Nothing, num_workers=2), label="trainer")
    with pytest.raises(ValueError, match=r"Node trainer/0 cannot run as a thread: it is a task "
                                         r"of a TensorFlow cluster .* Launch the program with "
                                         r"local_mp"):
        lp.launch(program, launch_type="local_mt")
