"""`--lp_status`: the live node table in a terminal, and nothing of it elsewhere."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import threading

import pytest

from launchpad import telemetry
from launchpad.courier.metrics import MethodCounts
from launchpad.launch.runtime import status_text
from tests.processes import ROOT

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_leaked_processes")]
ARGS = [sys.executable, "-m", "tests.launch.local.status_program", "--lp_status"]
ENV = {**os.environ, "COLUMNS": "100", "TERM": "xterm", "PYTHONUNBUFFERED": "1"}


def _run_in_a_terminal(launch_type: str, logs: str) -> str:
    """Runs the program with its output on a pseudo-terminal (node output files in `logs`);
    all it wrote there."""
    main, follower = pty.openpty()
    process = subprocess.Popen([*ARGS, f"--lp_launch_type={launch_type}"], cwd=ROOT,
                               env={**ENV, "LAUNCHPAD_LOGGING_DIR": logs},
                               stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the terminal's last writer has gone
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert process.wait(90) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reader.join(10)
    os.close(main)
    return b"".join(chunks).decode(errors="replace")


def _echo_call_rates(output: str) -> list[float]:
    """The calls/s the table showed for echo/0 in each of its frames."""
    rates, column = [], None
    frames = re.sub(r"\x1b\[[0-9]*[AK]", "\n", output)  # a redraw: cursor up, line cleared
    for line in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", frames).splitlines():  # colours
        words = line.split()
        if words and words[0] == "node" and "calls/s" in words:
            column = words.index("calls/s")
        elif words and words[0] == "echo/0" and column is not None and len(words) > column:
            rates.append(0.0 if words[column] == "-" else float(words[column]))
    return rates


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_a_terminal_shows_the_nodes_live_with_their_calls(launch_type, tmp_path):
    output = _run_in_a_terminal(launch_type, str(tmp_path))
    assert "live (" in output
    rates = _echo_call_rates(output)
    assert rates and max(rates) > 0, output  # the echo's calls, counted, in the table
    assert "echo/0" in output and "caller/0" in output
    assert "running" in output and "stopped" in output  # redrawn as the program went on
    assert "program ended after" in output
    if launch_type == "local_mt":
        assert "caller is done" in output  # a node's print shows above the table
    else:
        assert "logs: " in output  # under local_mp node output goes to files, named
        assert (tmp_path / "caller" / "0").read_text() == "caller is done\n"


def test_output_that_is_not_a_terminal_gets_no_table():
    result = subprocess.run([*ARGS, "--lp_launch_type=local_mt"], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    assert "caller is done" in result.stdout
    assert "calls/s" not in result.stdout + result.stderr
    assert "not a terminal" in result.stderr


def test_the_text_table_has_every_node_aligned_with_its_failures():
    echo = telemetry.NodeStatus(
        name="echo/0", label="echo", index=0, kind="CourierNode", state="running",
        host="127.0.0.1", pid=42, uptime_secs=125, cpu_percent=12.4, memory_bytes=35 << 20,
        methods={"ping": telemetry.method_status(MethodCounts(30, 2), MethodCounts(10), 2.0)})
    crasher = telemetry.NodeStatus(
        name="crasher/0", label="crasher", index=0, kind="PyNode", state="restarting",
        restarts=1, failures=[telemetry.Failure("RuntimeError: boom", "tb", 0.0, True)])
    status = telemetry.ProgramStatus("p", "local_mp", "p-1", 0.0, "running", "", "",
                                     [echo, crasher], log_dir="/logs")
    lines = status_text.render(status).splitlines()
    assert lines[0] == "p (local_mp, run p-1): running"
    header, first, second = lines[1:4]
    assert header.split() == list(status_text.COLUMNS)
    assert first.split()[:9] == ["echo/0", "CourierNode", "running", "127.0.0.1", "42", "0",
                                 "2m05s", "12%", "35M"]
    assert first.split()[9:11] == ["10.0", "2"]  # 20 calls in 2 s; errors so far
    assert second.split()[:3] == ["crasher/0", "PyNode", "restarting"]
    assert len(header) >= len(first.rstrip())  # the header is as wide as its columns
    assert "crasher/0: RuntimeError: boom (restarted)" in lines
    assert lines[-1] == "logs: /logs"


@pytest.mark.parametrize(("secs", "text"), [(None, "-"), (5.9, "5s"), (184, "3m04s"),
                                            (7500, "2h05m")])
def test_durations(secs, text):
    assert status_text.duration(secs) == text


@pytest.mark.parametrize(("count", "text"), [(None, "-"), (512, "512B"), (5 << 10, "5.0K"),
                                             (35 << 20, "35M"), (3 << 30, "3.0G")])
def test_sizes(count, text):
    assert status_text.size(count) == text


@pytest.mark.parametrize(("secs", "text"), [(None, "-"), (25e-6, "25us"), (2.5e-3, "2.5ms"),
                                            (2.5, "2.5s")])
def test_latencies(secs, text):
    assert status_text.latency(secs) == text
