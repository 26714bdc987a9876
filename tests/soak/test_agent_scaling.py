"""The agent scaling benchmark (benchmarks/agent_scaling.py), small: two actors for a few
seconds, under this project (on this host and on the test Slurm's hosts) and on bare Ray; its
figures are whole, and every step the actors wrote reached the replay table."""

from __future__ import annotations

import pytest

from benchmarks import agent_scaling

FLAGS = ["--seconds", "2", "--warmup_s", "0.5", "--obs", "16,16,4"]


@pytest.fixture
def hosts(request, system):
    """The test Slurm, for ours_slurm (started before the leak check takes its note: its
    daemons outlive the test, as they should)."""
    if system != "ours_slurm":
        return None
    cluster = request.getfixturevalue("slurm_cluster")
    return agent_scaling.SlurmHosts(cluster.env, str(request.getfixturevalue("tmp_path")))


@pytest.mark.parametrize("system, fetch", [("ours", "cacher"), ("ray", "direct"),
                                           ("ours_slurm", "direct")])
def test_a_short_run_counts_every_step_written(system, fetch, hosts, no_leaked_processes):
    figures = agent_scaling.run_once(system, 2, fetch, FLAGS, hosts)
    assert "error" not in figures, figures.get("error")
    assert figures["actors"] == 2 and figures["ideal_steps_per_s"] == 400
    assert 0 < figures["env_steps"] and 0 < figures["env_steps_per_s"] <= 400 * 1.05
    assert figures["steps_written"] == figures["items_inserted"] >= figures["env_steps"]
    assert figures["fetch_ms"]["count"] > 0 and figures["fetch_ms"]["p50"] > 0
    assert figures["learner_updates_per_s"] > 0 and figures["startup_s"] > 0
    assert figures["cpu_s"]["all"] >= figures["cpu_s"]["actors"] > 0
    assert figures["pss_mb_per_actor"] > 0
    assert agent_scaling.framework_cpu_us(figures) > 0


def test_reverb_alone_is_measured_as_the_floor_under_every_system(no_leaked_processes):
    floor = agent_scaling.run_once("floor", 0, "direct", FLAGS)
    assert "error" not in floor, floor.get("error")
    # Stepping the environment between writes costs Reverb's threads their wake-ups.
    assert 0 < floor["write_only"] < floor["with_environment"]
