"""The Replicator in this process: one device, two logical CPU devices, the in-step
collectives, inside the user's own tf.function, and its errors."""

import numpy as np
import pytest

from tests.stacks import NO_TENSORFLOW

tf = pytest.importorskip("tensorflow", reason=NO_TENSORFLOW)

from launchpad import replicator  # noqa: E402 - after the skip
from tests.replicator.trainers import LinearTrainer  # noqa: E402

STEPS = 12


def _train(devices, steps=STEPS):
    repl = replicator.Replicator(devices=devices)
    with repl.scope():
        trainer = LinearTrainer(repl, global_batch=8)
    losses = [trainer.step() for _ in range(steps)]
    return repl, losses, trainer.get_variables()


def test_two_logical_devices_train_the_same_weights_as_one_device():
    one, one_losses, one_variables = _train(devices=1)
    two, two_losses, two_variables = _train(devices=2)
    assert (one.kind, one.num_replicas) == (replicator.ONE_DEVICE, 1)
    assert (two.kind, two.num_replicas) == (replicator.LOCAL_DEVICES, 2)
    np.testing.assert_allclose(two_losses, one_losses, rtol=1e-5)
    for name in one_variables:
        np.testing.assert_allclose(two_variables[name], one_variables[name], rtol=1e-5,
                                   atol=1e-6)
    assert one_variables["steps"] == two_variables["steps"] == STEPS
    assert one_losses[-1] < one_losses[0] / 4  # it learns


def test_collectives_inside_a_step():
    repl = replicator.Replicator(devices=2)

    def step_fn(value):
        me = replicator.replica_id()
        mine = tf.cast(me, tf.float32) + value
        return {"id": me, "count": tf.constant(replicator.num_replicas()),
                "sum": replicator.all_reduce(mine), "mean": replicator.all_reduce(mine, "mean"),
                "gathered": replicator.all_gather(tf.reshape(mine, [1])),
                "from_1": replicator.broadcast(mine, source_replica=1)}

    results = repl.run(step_fn, tf.constant(10.0))
    local = {name: [v.numpy() for v in repl.strategy.experimental_local_results(values)]
             for name, values in results.items()}
    assert local["id"] == [0, 1] and local["count"] == [2, 2]
    assert local["sum"] == [21.0, 21.0] and local["mean"] == [10.5, 10.5]
    for gathered in local["gathered"]:
        np.testing.assert_array_equal(gathered, [10.0, 11.0])
    assert local["from_1"] == [11.0, 11.0]
    assert float(repl.reduce(results["sum"], "mean")) == 21.0


def test_run_inside_the_users_own_tf_function():
    repl = replicator.Replicator(devices=2)
    with repl.scope():
        total = tf.Variable(0.0)

    def step_fn():
        total.assign_add(1.0)  # each replica adds one; the mirrored variable sums them
        return replicator.all_reduce(tf.constant(1.0))

    @tf.function
    def three_steps():
        result = None
        for _ in range(3):
            result = repl.run(step_fn)
        return repl.reduce(result, "sum")

    assert float(three_steps()) == 4.0  # 2 replicas, each seeing the all-reduce of 2
    assert float(total.numpy()) in (3.0, 6.0)  # MEAN or SUM aggregation of the replicas' adds


def test_collectives_outside_a_step_are_refused_with_a_clear_error():
    repl = replicator.Replicator(devices=2)
    with repl.scope(), pytest.raises(RuntimeError, match=r"all_reduce\(\) works inside a step"):
        replicator.all_reduce(tf.constant(1.0))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="Unknown reduction 'max'"):
        replicator.Replicator(devices=1).reduce(tf.constant(1.0), "max")
    with pytest.raises(ValueError, match="devices must be at least 1"):
        replicator.Replicator(devices=0)
    with pytest.raises(TypeError, match="devices must be None, an int or a list"):
        replicator.Replicator(devices="cpu")
    with pytest.raises(RuntimeError, match="5 CPU replicas need 5 logical CPU devices"):
        replicator.Replicator(devices=5)  # (the test process has 4: conftest.py)


def test_a_cluster_is_checked_and_becomes_tf_config():
    cluster = replicator.Cluster({"worker": ["h:1", "h:2"]}, "worker", 1)
    assert (cluster.mode, cluster.is_chief) == ("sync", False)
    assert cluster.tf_config() == {"cluster": {"worker": ["h:1", "h:2"]},
                                   "task": {"type": "worker", "index": 1}}
    async_cluster = replicator.Cluster({"chief": ["h:0"], "worker": ["h:1"], "ps": ["h:2"]},
                                       "chief", 0)
    assert (async_cluster.mode, async_cluster.is_chief) == ("async", True)
    with pytest.raises(ValueError, match=r"Task worker:2 is not in the cluster"):
        replicator.Cluster({"worker": ["h:1", "h:2"]}, "worker", 2)
    with pytest.raises(ValueError, match=r"Unknown job\(s\) \['evaluator'\]"):
        replicator.Cluster({"worker": ["h:1"], "evaluator": ["h:3"]}, "worker", 0)
    with pytest.raises(ValueError, match="runs no replicator"):
        replicator.Replicator(cluster=replicator.Cluster(
            {"chief": ["h:0"], "worker": ["h:1"], "ps": ["h:2"]}, "ps", 0))
