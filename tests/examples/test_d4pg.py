"""examples/d4pg: its pieces against hand-computed values, its flags, and a short real run.

Whether it learns is measured by `python -m benchmarks.d4pg_pendulum`, not here.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from examples.d4pg.config import D4PGConfig
from examples.d4pg.n_step import NStepTransitions
from tests.examples.test_examples import REPO_ROOT, run_example
from tests.stacks import needs_reverb, needs_tensorflow


def _transitions(steps, n=2, discount=0.5, start=0.0):
    """Runs `steps` (action, reward, next_observation, terminated, truncated) through a
    NStepTransitions; every transition, as (obs, action, reward, discount, next_obs)."""
    made = NStepTransitions(n, discount)
    made.start(np.array([start]))
    out = []
    for action, reward, after, terminated, truncated in steps:
        out += made.step(np.array([action]), reward, np.array([after]), terminated, truncated)
    return [(t.observation[0], t.action[0], t.reward, t.discount, t.next_observation[0])
            for t in out]


def test_n_step_transitions_sum_discounted_rewards_and_bootstrap_n_steps_later():
    # o0 -a0,r=1-> o1 -a1,r=2-> o2 -a2,r=4-> o3 (truncated), n=2, discount 0.5.
    assert _transitions([(10, 1.0, 1, False, False), (11, 2.0, 2, False, False),
                         (12, 4.0, 3, False, True)]) == [
        (0, 10, 1 + 0.5 * 2, 0.25, 2),   # complete: two rewards, bootstrap from o2
        (1, 11, 2 + 0.5 * 4, 0.25, 3),   # cut by the time limit: still bootstraps
        (2, 12, 4.0, 0.5, 3),            # one step left before the limit: discount^1
    ]


def test_n_step_transitions_end_with_discount_zero_at_a_terminal_state():
    assert _transitions([(10, 1.0, 1, False, False), (11, 3.0, 2, False, False),
                         (12, 5.0, 3, True, False)], n=3, discount=0.5) == [
        (0, 10, 1 + 0.5 * 3 + 0.25 * 5, 0.0, 3),
        (1, 11, 3 + 0.5 * 5, 0.0, 3),
        (2, 12, 5.0, 0.0, 3),
    ]


def test_n_step_transitions_need_start_each_episode():
    made = NStepTransitions(1, 0.9)
    with pytest.raises(RuntimeError, match="start"):
        made.step(np.zeros(1), 0.0, np.zeros(1))
    made.start(np.zeros(1))
    assert len(made.step(np.zeros(1), 1.0, np.ones(1), terminated=True)) == 1
    with pytest.raises(RuntimeError, match="start"):  # the episode ended
        made.step(np.zeros(1), 0.0, np.zeros(1))


@needs_tensorflow
@pytest.mark.parametrize("support, values, probabilities, expected", [
    # Spacing 1: 0.5 splits evenly between atoms 0 and 1; 3.0 lies beyond the end.
    ([0, 1, 2], [0.5, 1.0, 3.0], [0.2, 0.3, 0.5], [0.1, 0.4, 0.5]),
    # Below the start; a quarter and three quarters of the way from atom 1 to atom 2.
    ([0, 1, 2], [-1.0, 1.25, 1.75], [0.5, 0.25, 0.25], [0.5, 0.25, 0.25]),
    # Spacing 10, a shifted and shrunk distribution (r + d * z with r = 0, d = 0.5).
    ([-10, 0, 10], [-5.0, 5.0, 0.0], [0.5, 0.25, 0.25], [0.25, 0.625, 0.125]),
])
def test_categorical_projection_splits_each_atom_between_its_neighbours(
        support, values, probabilities, expected):
    import tensorflow as tf

    from examples.d4pg.distributional import categorical_projection
    projected = categorical_projection(tf.constant([values], tf.float32),
                                       tf.constant([probabilities], tf.float32),
                                       tf.constant(support, tf.float32))
    np.testing.assert_allclose(projected.numpy(), [expected], atol=1e-6)


@needs_tensorflow
def test_numpy_policy_is_the_keras_policy():
    """Actors run the learner's policy with numpy: the same function of the same weights."""
    import tensorflow as tf

    from examples.d4pg import networks, policy
    keras_policy = networks.make_policy(3, 2, (16, 8))
    weights = [np.random.default_rng(i).normal(size=w.shape).astype(np.float32)
               for i, w in enumerate(keras_policy.get_weights())]
    keras_policy.set_weights(weights)
    observations = np.random.default_rng(9).normal(size=(5, 3)).astype(np.float32)
    expected = keras_policy(tf.constant(observations)).numpy()
    np.testing.assert_allclose(policy.act(keras_policy.get_weights(), observations), expected,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("changes, flag", [
    ({"num_actors": 0}, "--num_actors=0"),
    ({"discount": 1.5}, "--discount=1.5"),
    ({"v_min": 5.0, "v_max": 1.0}, "--v_min=5.0 must be below --v_max=1.0"),
    ({"batch_size": 100, "devices": 3}, "--batch_size=100 must divide evenly"),
    ({"min_replay_size": 10, "replay_size": 5}, "--min_replay_size=10 exceeds"),
    ({"sigma": -0.1}, "--sigma=-0.1"),
])
def test_config_check_names_the_flag_at_fault(changes, flag):
    with pytest.raises(ValueError, match=flag):
        D4PGConfig(**changes).check()


def test_bad_flag_is_refused_before_anything_launches():
    result = subprocess.run(
        [sys.executable, "-m", "examples.d4pg.launch", "--lp_launch_type=local_mp",
         "--n_step=0"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
        check=False)
    assert result.returncode != 0
    assert "--n_step=0 must be positive" in result.stderr, result.stderr
    assert "launchpad:" not in result.stderr + result.stdout  # no program was launched


@needs_reverb
@pytest.mark.usefixtures("no_leaked_processes")
@pytest.mark.timeout(300)  # past the run's own 240 s: the suite's 120 s would cut it first
@pytest.mark.parametrize("args", [
    # The actor group scaled 2 -> 3 -> 1 while it learns (examples/d4pg/scaling.py).
    ["--scale_actors=3@200,1@600"],
    # The learner replicated over two worker processes: the same trainer's modes are
    # tested in every run by tests/launch/test_replicated.py, and sngan's two workers run.
    pytest.param(["--num_workers=2"], marks=pytest.mark.long_example),
], ids=["one_device_scaled", "two_workers"])
def test_d4pg_runs_a_short_program_and_stops_cleanly(tmp_path, args):
    """Every node runs (replay, counter, learner, cacher, two actors, evaluator, limiter);
    the limiter stops the program after its steps; the curve is written and drawn. Scaled,
    the actor group changes at its marks, and the learner is never restarted."""
    scaled = any(arg.startswith("--scale_actors") for arg in args)
    steps = 1400 if scaled else 800  # room for both marks before the limiter stops it
    result = run_example("d4pg", [
        f"--max_actor_steps={steps}", "--min_replay_size=200", "--batch_size=32",
        "--hidden_sizes=32,32", "--eval_every_secs=2", "--eval_episodes=1",
        "--progress=plain", f"--output_dir={tmp_path}", *args], "local_mp", timeout=240,
        env={"LAUNCHPAD_LOGGING_DIR": str(tmp_path / "logs")})
    report = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, report
    assert "d4pg: the evaluator's return went from" in result.stdout, report
    assert "Program stopped cleanly." in result.stdout, report
    curve = json.loads((tmp_path / "curve.json").read_text())
    assert len(curve) >= 2 and curve[-1]["actor_steps"] >= steps, curve
    assert curve[-1]["learner_steps"] > 0, curve
    assert (tmp_path / "curve.png").stat().st_size > 0
    if scaled:
        assert re.search(r"d4pg: actors 2 -> 3 at \d", result.stdout), report
        assert re.search(r"d4pg: actors 3 -> 1 at \d", result.stdout), report
        events = json.loads((tmp_path / "events.json").read_text())
        assert [e["event"] for e in events] == ["actors 2 -> 3", "actors 3 -> 1"], events
        assert [e["learner_restarts"] for e in events] == [0, 0], events
        assert events[0]["actor_steps"] >= 200 and events[1]["actor_steps"] >= 600, events
    # The nodes' output went to files (the terminal showed progress): <label>/<index> in the
    # logging folder, as Launchpad's.
    log_dir = pathlib.Path(re.search(r"d4pg: node logs in (\S+)/", result.stdout)[1])
    assert log_dir == tmp_path / "logs", report
    logs = {f"{path.parent.name}/{path.name}": path.read_text() for path in log_dir.glob("*/*")}
    assert f"limiter: actor_steps reached {steps:,}" in logs["limiter/0"], logs
    assert not any("cpu_feature_guard" in log for log in logs.values()), logs  # quiet TF


def test_progress_rate_is_averaged_over_whole_episodes():
    """Actors count whole episodes: the rate shown spans RATE_WINDOW_SECS, not one refresh."""
    from examples.d4pg.progress import RATE_WINDOW_SECS, _Rate
    rate = _Rate()
    assert rate(0.0, 0) == 0.0
    assert rate(1.0, 0) == 0.0
    assert rate(2.0, 200) == 100.0  # one episode of 200 steps in the last 2 s
    assert rate(3.0, 200) == 200 / 3
    later = 3.0 + RATE_WINDOW_SECS + 1
    rate(later, 400)
    assert rate(later + 1, 400) == (400 - 200) / (later + 1 - 3.0)  # older samples dropped
