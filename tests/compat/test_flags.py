"""Launchpad's command-line flags: defined by `import launchpad`, with its names, types and
defaults (--lp_launch_type is local_mt unless given, as Acme's `is_local_run()` expects)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import launchpad as lp
from launchpad.launch import launchers
from launchpad.launch import options as launch_options
from tests.processes import ROOT

_SCRIPT = textwrap.dedent("""
    from absl import app, flags
    import launchpad as lp
    FLAGS = flags.FLAGS
    def main(argv):
        # Acme's lp_utils.is_local_run(), as its main branch writes it
        print(FLAGS.lp_launch_type, lp.LAUNCH_TYPE.value, FLAGS.lp_launch_type.startswith("local"),
              FLAGS.lp_termination_notice_secs, FLAGS.lp_worker_manager_v2,
              FLAGS.tmux_session_name, FLAGS.lp_catch_deferred_exception)
    app.run(main)
""")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _SCRIPT, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_the_flags_have_launchpads_defaults_once_launchpad_is_imported():
    result = _run()
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["local_mt", "local_mt", "True", "10", "False",
                                     "launchpad", "True"]


def test_the_launch_type_given_on_the_command_line_is_read():
    result = _run("--lp_launch_type=local_mp", "--lp_termination_notice_secs=1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:4] == ["local_mp", "local_mp", "True", "1"]


def test_a_launch_type_that_does_not_exist_is_refused_naming_those_that_do():
    result = _run("--lp_launch_type=somewhere")
    assert result.returncode != 0
    assert "lp_launch_type" in result.stderr and "local_mp" in result.stderr


def test_a_launch_without_a_launch_type_is_local_mt(no_leaked_threads):
    program = lp.Program("p")
    program.add_node(lp.PyNode(int), label="noop")
    controller = lp.launch(program)
    assert controller.launch_type == "local_mt"
    assert controller.wait(timeout=30)


@pytest.mark.parametrize("given, grace", [(-1, launch_options.NEVER_END_SECS), (0, 0),
                                          (2.5, 2.5)])
def test_a_negative_termination_notice_never_ends_the_nodes_as_in_launchpad(given, grace):
    options = launch_options.resolve(launchers.get("local_mp"), 1, termination_notice_secs=given)
    assert options.clocks.termination_notice_secs == grace
