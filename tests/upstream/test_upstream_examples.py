"""Launchpad's own examples, from its released wheels, run unchanged on ours, under local_mt
and local_mp: each as `python -m launchpad.examples.NAME.launch --lp_launch_type=TYPE`
(runner.py), which must end by itself, cleanly, having done its work.

Launchpad's `batching` example fails on Launchpad 0.5.2 itself (its batched handler raises
TypeError); here it runs.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.upstream import staging

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("no_leaked_processes")]

# example -> (text its output must hold, how many times)
EXAMPLES = {
    "hello_world": [("Hello World!!!", 1)],
    "program_wait": [(f"Clean termination of {node} node", 1)
                     for node in ("_sleep", "_wait_for_stop", "_stop_event",
                                  "_register_stop_handler")] + [("Program finished.", 1)],
    "batching": [("Result: [", 20)],
    "consumer_producers": [("Results: [0, 1]", 10)],
}
# What an orderly run must not print.
NOISE = ("Traceback", "failed", "Error")


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_launchpads_examples_run_unchanged(release, example, launch_type, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tests.upstream.runner", "main",
         f"launchpad.examples.{example}.launch", f"--lp_launch_type={launch_type}"],
        cwd=tmp_path, env=staging.environment(release.staged), capture_output=True,
        text=True, timeout=240)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    for text, times in EXAMPLES[example]:
        assert output.count(text) == times, (text, output[-6000:])
    noisy = [line for line in output.splitlines() if any(n in line for n in NOISE)]
    assert not noisy, output[-6000:]
