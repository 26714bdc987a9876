"""Launchpad's own tests, from its released wheels, pass unchanged on ours.

Each `*_test.py` of dm-launchpad 0.5.2 and of its last nightly runs as Launchpad ran it
(absltest, its flags parsed; runner.py) in a process of its own, its tests and examples laid
under our packages (staging.py); every test case must pass, but those exclusions.py lists
with their reasons, and those Launchpad skips itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

from tests.upstream import exclusions, staging

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("no_leaked_processes")]

# Launchpad's test files that run: its public API's (the graph, launching, nodes, stopping),
# and the worker manager's, which code built on it reaches into.
TEST_MODULES = [
    "launchpad.program_test",
    "launchpad.launch.serialization_test",
    "launchpad.launch.signal_handling_test",
    "launchpad.launch.worker_manager_test",
    "launchpad.launch.test_multi_threading.launch_test",
    "launchpad.launch.test_multi_processing.launch_test",
    "launchpad.nodes.courier.node_test",
    "launchpad.nodes.multi_threading_colocation.node_test",
    "launchpad.nodes.multi_processing_colocation.node_test",
    "launchpad.nodes.reverb.node_test",
    "launchpad.examples.consumer_producers.launch_test",
]
_NEEDS = {"launchpad.nodes.reverb.node_test": "reverb"}


def _path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def test_every_test_file_of_the_release_runs_or_is_excluded_with_its_reason(release):
    found = {os.path.relpath(os.path.join(folder, name), release.sources)
             for folder, _, names in os.walk(release.sources)
             for name in names if name.endswith("_test.py")}
    assert found == {_path(m) for m in TEST_MODULES} | set(exclusions.FILES)


def _outcomes(xml: str) -> dict[str, str]:
    """'Class.method' -> passed, failed or skipped, from absltest's JUnit XML."""
    outcomes = {}
    for case in ElementTree.parse(xml).iter("testcase"):
        test = f"{case.get('classname').rsplit('.', 1)[1]}.{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[test] = "failed"
        else:
            outcomes[test] = "skipped" if case.get("status") == "notrun" else "passed"
    return outcomes


@pytest.mark.parametrize("module", TEST_MODULES)
def test_launchpads_own_tests_pass_unchanged(release, module, tmp_path):
    if module in _NEEDS:
        pytest.importorskip(_NEEDS[module], reason=f"{module} needs {_NEEDS[module]}")
    xml = str(tmp_path / "results.xml")
    skips = exclusions.TESTS.get(release.name, {}).get(module, {})
    result = subprocess.run(
        [sys.executable, "-m", "tests.upstream.runner", "tests", module, xml,
         *(f"{test}={why}" for test, why in skips.items())],
        cwd=tmp_path, env=staging.environment(release.staged), capture_output=True,
        text=True, timeout=540)
    output = result.stdout[-6000:] + result.stderr[-6000:]
    assert result.returncode == 0, output
    outcomes = _outcomes(xml)
    assert "failed" not in outcomes.values(), output
    skipped = {test for test, outcome in outcomes.items() if outcome == "skipped"}
    assert skipped == set(skips) | exclusions.SKIPPED_BY_LAUNCHPAD.get(module, set()), output
    assert "passed" in outcomes.values(), output
