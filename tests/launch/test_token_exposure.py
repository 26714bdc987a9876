"""The program's token is in no process's command line, title or environment (which other
users of a host can read through /proc), under every launcher that starts processes."""

from __future__ import annotations

import os

import pytest

import launchpad as lp
from tests.processes import live_descendants

pytestmark = pytest.mark.timeout(120)


class Echo:
    def ping(self, x):
        return x


def _readable_by_others(pid: int) -> bytes:
    """What /proc shows of `pid`: its command line (and so its title) and environment."""
    seen = b""
    for name in ("cmdline", "environ", "comm"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                seen += f.read() + b"\n"
        except OSError:  # it ended meanwhile
            pass
    return seen


@pytest.mark.parametrize("launch", ["local_mp", "test_mp", "slurm", "ray"], indirect=True)
def test_no_process_of_a_running_program_shows_its_token(launch):
    program = lp.Program("secretive")
    echo = program.add_node(lp.CourierNode(Echo), label="echo")
    program.add_node(lp.PyNode(lambda e: (e.ping(1), lp.wait_for_stop()), echo), label="caller")
    controller = launch(program)
    assert echo.dereference().ping(2) == 2  # every node is up
    assert controller.wait_for_started("caller/0", 60)
    token = controller.token.encode()
    pids = live_descendants() | {os.getpid()}
    assert set(controller.node_pids().values()) <= pids  # every node's process is looked at
    exposed = [pid for pid in pids if token in _readable_by_others(pid)]
    assert not exposed, f"the token is readable in /proc of processes {exposed}"
