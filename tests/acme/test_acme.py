"""Acceptance: code written for DeepMind's Launchpad runs unchanged on ours, judged by Acme 0.4.0.

Runs in the venv `make test-acme` builds (Acme and its stack beside our `reverb` extra; skipped
where Acme is not installed):
- Acme's own Launchpad tests, as shipped in its release, each in a pytest of its own;
- Acme's distributed D4PG (TensorFlow) and SAC (JAX) launched as Acme's examples launch them
  (lp_agent.py), under local_mp and local_mt: learner and actors make progress, Ctrl+C stops
  D4PG cleanly, SAC stops itself through Acme's StepsLimiter (Acme's own
  `examples/gym/lp_*.py` are in neither its wheel nor its sdist, so no test can run them).
Every process runs with the shim (shim/sitecustomize.py) for what Reverb and JAX dropped since
Acme 0.4.0, and with HOME in the test's own folder (Acme writes under ~/acme).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

acme = pytest.importorskip("acme", reason="the Acme acceptance suite runs in `make test-acme`")

from tests.processes import Script  # noqa: E402

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("no_leaked_processes")]
HERE = os.path.dirname(os.path.abspath(__file__))
ACME_DIR = os.path.dirname(acme.__file__)
SHIM = os.path.join(HERE, "shim")
# What an orderly run and stop must not print: thread pools refusing work at exit, the fork
# server's reset socket, an interpreter aborted by a thread still inside C++ code. (Acme's own
# stop - an asynchronous SystemExit raised in the working thread - and its variable clients,
# which may call a learner that has just stopped, can print tracebacks of their own when they
# lose that race; they are Acme's, as they were under DeepMind's Launchpad.)
NOISE = ("cannot schedule new futures", "ConnectionResetError", "terminate called",
         "Fatal Python error")
ACME_TESTS = ["utils/lp_utils_test.py", "tf/savers_test.py",
              "agents/tf/d4pg/agent_distributed_test.py",
              "agents/tf/svg0_prior/agent_distributed_test.py",
              "agents/jax/r2d2/agent_distributed_test.py"]


def _environment(home) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([SHIM, os.environ.get("PYTHONPATH", "")]),
            "HOME": str(home), "TF_CPP_MIN_LOG_LEVEL": "1"}


@pytest.mark.parametrize("test_file", ACME_TESTS)
def test_acmes_own_launchpad_tests_pass_unchanged(test_file, tmp_path):
    # Acme's test utilities parse sys.argv with absl: pytest's options go in PYTEST_ADDOPTS.
    env = {**os.environ, **_environment(tmp_path),
           "PYTEST_ADDOPTS": "-q -p no:cacheprovider -p no:timeout"}
    result = subprocess.run([sys.executable, "-m", "pytest", os.path.join(ACME_DIR, test_file)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary


def _steps(script: Script, who: str, at_least: int) -> int:
    """Reads until Acme's logger reports `who`'s steps at `at_least` or more; returns them."""
    while True:
        steps = int(script.wait_for(rf"\b{who} Steps = (\d+)").group(1))
        if steps >= at_least:
            return steps


def _assert_quiet(script: Script) -> None:
    noisy = [line for line in script.lines if any(n in line for n in NOISE)]
    assert not noisy, script.output[-8000:]


def _launch(args: list[str], tmp_path) -> Script:
    return Script(args, timeout=300, env=_environment(tmp_path), cwd=HERE)


def _runs_until_ctrl_c(script: Script) -> None:
    """The learner and the actors make progress; Ctrl+C then stops everything cleanly."""
    try:
        first = _steps(script, "Learner", 1)
        _steps(script, "Learner", first + 1)
        _steps(script, "Actor", 1)
        script.process.send_signal(signal.SIGINT)
        assert script.finish(timeout=120) == 0, script.output[-8000:]
    finally:
        script.kill()
    assert "launchpad: stopping" in script.output
    _assert_quiet(script)


def _stops_by_itself(script: Script, learner_steps: int) -> None:
    """The program stops itself (Acme's StepsLimiter calls lp.stop()), exit status 0."""
    try:
        if learner_steps:
            _steps(script, "Learner", learner_steps)
        _steps(script, "Actor", 1)
        assert script.finish(timeout=600) == 0, script.output[-8000:]
    finally:
        script.kill()
    assert "launchpad: stopping" not in script.output  # nobody pressed Ctrl+C
    _assert_quiet(script)


@pytest.mark.parametrize("launch_type", ["local_mp", "local_mt"])
def test_acmes_d4pg_runs_until_ctrl_c_and_stops_cleanly(launch_type, tmp_path):
    _runs_until_ctrl_c(_launch(["lp_agent.py", "--agent=d4pg",
                                f"--lp_launch_type={launch_type}"], tmp_path))


@pytest.mark.parametrize("launch_type", ["local_mp", "local_mt"])
def test_acmes_sac_learns_and_stops_itself_at_its_step_limit(launch_type, tmp_path):
    _stops_by_itself(_launch(["lp_agent.py", "--agent=sac", "--max_steps=1500",
                              f"--lp_launch_type={launch_type}"], tmp_path), learner_steps=1)
