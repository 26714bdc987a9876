"""/metrics from a status made by hand: the series a status holds that a running program's
test cannot make cheaply (a node's failed broadcasts)."""

from __future__ import annotations

from prometheus_client import parser

from launchpad import telemetry
from launchpad.launch.dashboard import exporter  # (an import that fails is a failure)


def test_failed_broadcasts_are_a_counter_per_member():
    node = telemetry.NodeStatus(name="learner/0", label="learner", index=0, kind="CourierNode",
                                state="running", broadcast_errors={"actor/1": 3, "actor/7": 1})
    status = telemetry.ProgramStatus(program="p", launch_type="local_mp", run_id="r",
                                     started_at=0.0, state="running", stop_reason="",
                                     failure="", nodes=[node])
    families = {f.name: f for f in parser.text_string_to_metric_families(
        exporter.Exporter(lambda: status).text().decode())}
    samples = {s.labels["member"]: s.value for s in families["launchpad_broadcast_errors"].samples
               if s.name == "launchpad_broadcast_errors_total"}
    assert samples == {"actor/1": 3, "actor/7": 1}
    [sample] = [s for s in families["launchpad_broadcast_errors"].samples
                if s.labels["member"] == "actor/1" and s.name.endswith("_total")]
    assert sample.labels["node"] == "learner/0" and sample.labels["program"] == "p"
