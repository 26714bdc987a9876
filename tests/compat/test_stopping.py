"""Launchpad's stop API where no program runs (Acme's environment loops register stop
handlers whether or not they run in a launch), and its program stoppers."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import launchpad as lp
from tests.launch.helpers import TIMEOUT
from tests.processes import ROOT

_OUTSIDE = textwrap.dedent("""
    import launchpad
    calls = []
    launchpad.register_stop_handler(lambda: print("at exit", flush=True))
    handler = lambda: calls.append(1)
    launchpad.register_stop_handler(handler)
    launchpad.unregister_stop_handler(handler)
    print("registered", flush=True)
""")


def test_stop_handlers_outside_any_program_are_kept_and_run_at_the_exit():
    result = subprocess.run([sys.executable, "-c", _OUTSIDE], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, "registered\nat exit\n"), result.stderr


def _stop_with(stopper):
    stopper()


def _block():
    lp.wait_for_stop()


def test_a_program_stopper_made_before_the_launch_stops_it_from_a_node(launch):
    program = lp.Program("p")
    program.add_node(lp.PyNode(_block), label="block")
    program.add_node(lp.PyNode(_stop_with, lp.make_program_stopper(launch.launch_type)),
                     label="stop")
    assert launch(program).wait(timeout=TIMEOUT)
