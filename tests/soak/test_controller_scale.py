"""The controller benchmark (benchmarks/controller_scale.py), small: 200 simulated nodes for
2.5 s, by themselves and through agents, on the local socket and on gRPC. Every call is
answered, no node is taken for lost, and nothing is left running."""

import pytest

from benchmarks import controller_scale

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("transport", ["auto", "grpc"])
@pytest.mark.parametrize("agent_nodes", [0, 8])
def test_a_small_run_answers_every_call(transport, agent_nodes, no_leaked_processes):
    row = controller_scale.run(200, 2.5, simulators=2, per_connection=25,
                               agent_nodes=agent_nodes, transport=transport)
    assert (row["call_errors"], row["first_error"]) == (0, "")
    assert row["late_calls"] == 0
    assert row["failed_nodes"] == 0
    assert row["resolves"] > 0
    assert row["via_agents"] is bool(agent_nodes)
    assert row["controller_cpu_cores"] > 0 and row["controller_rss_mb"] > 0
