"""What the CLI's tests share: the command run as a process, and programs to run it against."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator

import launchpad as lp
from launchpad import control
from launchpad.launch import run_registry
from launchpad.launch.runtime import run_records
from tests.processes import ROOT, Script

SERVING = "tests/cli/serving.py"  # the launch script (see its doc)
TIMEOUT = 60


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`launchpad ARGS...` (as `python -m launchpad.cli`), run to its end."""
    return subprocess.run([sys.executable, "-m", "launchpad.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, **(env or {})})


def failed(result: subprocess.CompletedProcess) -> str:
    """The one line a command that failed printed (it must have failed, printing only
    that, on stderr)."""
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("launchpad: "), result.stderr
    return result.stderr.strip()


def launch_serving(launch_type: str = "local_mp", **env: str) -> tuple[Script, str]:
    """`launchpad launch tests/cli/serving.py` in a session of its own; it and its run id,
    once launched."""
    script = Script(["-m", "launchpad.cli", "launch", SERVING,
                     f"--lp_launch_type={launch_type}"], new_session=True, env=env,
                    timeout=TIMEOUT)
    try:
        return script, script.wait_for(r"^launched (\S+)$")[1]
    except BaseException:
        script.kill_session()
        raise


def end_serving(script: Script, run_id: str, **env: str) -> None:
    """Stops the program (if it still runs) and waits for its launcher: it ends with 0."""
    try:
        if script.process.poll() is None:
            cli("stop", run_id, env=env)
        assert script.finish() == 0, script.output
    except BaseException:
        script.kill_session()
        raise


@contextlib.contextmanager
def serving(launch_type: str = "local_mp", **env: str) -> Iterator[tuple[Script, str]]:
    """A serving program for the block: its launcher's Script and its run id."""
    script, run_id = launch_serving(launch_type, **env)
    try:
        yield script, run_id
    finally:
        end_serving(script, run_id, **env)


def wait_for_all(script: Script, patterns: list[str]) -> None:
    """Reads the script's output until each of `patterns` has matched a line, in any order."""
    left = [p for p in patterns if not any(re.search(p, line) for line in script.lines)]
    while left:
        line = script.wait_for("|".join(f"(?:{p})" for p in left)).string
        left = [p for p in left if not re.search(p, line)]


def record_of(run_id: str, env: dict[str, str] | None = None) -> run_records.Run:
    """What the registry (of LAUNCHPAD_RUN_DIR in `env`, else this process's) holds of run
    `run_id`."""
    return run_registry.read(run_records.find(run_id, (env or {}).get("LAUNCHPAD_RUN_DIR")))


def release_gate(run: run_records.Run) -> None:
    """Lets serving.py's gate/0 end: calls echo/0's release() over courier."""
    resolver = control.NodeResolver(run.controller_address, run.token, "echo", 0)
    client = lp.courier.Client(resolver, token=run.token)
    try:
        client.release()
    finally:
        lp.courier.close(client)


def wait_until(predicate, timeout: float = TIMEOUT, what: str = "the condition") -> None:
    """Polls `predicate()` until it is true (a deadline bounds it)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} never held within {timeout}s"
        time.sleep(0.05)  # a poll's period: the state polled has no event


def waits() -> None:
    """A node that waits for its program to stop."""
    lp.wait_for_stop()
