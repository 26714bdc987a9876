"""`launchpad graph MODULE:FUNCTION -o FILE`: the examples' programs drawn without launching
them, and every kind of bad input refused in one line with a non-zero exit status."""

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SVG = "{http://www.w3.org/2000/svg}"


def _launchpad(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launchpad.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _edges(dot_source: str) -> set[tuple[str, str]]:
    return set(re.findall(r'^\s*"([^"]+)" -> "([^"]+)"', dot_source, re.MULTILINE))


def test_hello_world_is_drawn_as_svg_with_its_nodes_and_its_edge(tmp_path):
    done = _launchpad("graph", "examples.hello_world.launch:make_program",
                      "-o", str(tmp_path / "hello.svg"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"launchpad: drew program 'hello_world' (2 nodes) into "
                           f"{tmp_path / 'hello.svg'}\n")
    root = ElementTree.parse(tmp_path / "hello.svg").getroot()
    titles = {g.find(SVG + "title").text for g in root.iter(SVG + "g")
              if g.get("class") in ("node", "edge")}
    assert {"greeter/0", "client/0", "client/0->greeter/0"} <= titles


def test_the_agent_with_arguments_collapses_its_actors_unless_told_not_to(tmp_path):
    done = _launchpad("graph", "examples.agent.launch:make_program", "--arg", "num_actors=6",
                      "-o", str(tmp_path / "agent.dot"))
    assert done.returncode == 0, done.stderr
    source = (tmp_path / "agent.dot").read_text()
    assert "actor/0-5 ×6" in source
    assert _edges(source) == {("learner/0", "replay/0"), ("cacher/0", "learner/0"),
                              ("actor/0", "replay/0"), ("actor/0", "cacher/0")}
    done = _launchpad("graph", "examples.agent.launch:make_program", "--arg", "num_actors=6",
                      "--collapse-at", "0", "-o", str(tmp_path / "each.dot"))
    assert done.returncode == 0, done.stderr
    assert {("actor/5", "cacher/0")} <= _edges((tmp_path / "each.dot").read_text())


def test_the_d4pg_program_is_drawn_as_png(tmp_path):
    done = _launchpad("graph", "examples.d4pg.launch:make_program", "--arg", "num_actors=8",
                      "--arg", "num_workers=2", "-o", str(tmp_path / "d4pg.png"))
    assert done.returncode == 0, done.stderr
    assert "program 'd4pg' (15 nodes)" in done.stdout
    assert (tmp_path / "d4pg.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, message", [
    (["examples.d4pg.launch:make_program", "--arg", "num_actors=0"],
     "launchpad: examples.d4pg.launch:make_program() raised ValueError: --num_actors=0 must "
     "be positive"),
    (["examples.hello_world.launch:Greeter"],
     "launchpad: examples.hello_world.launch:Greeter() returned Greeter, not a Program"),
    (["examples.hello_world.launch"], "launchpad: 'examples.hello_world.launch' is not "
     "MODULE:FUNCTION"),
    (["examples.no_such_example:make_program"],
     "launchpad: cannot import examples.no_such_example: No module named "
     "'examples.no_such_example'"),
    (["examples.hello_world.launch:no_such_function"],
     "launchpad: module examples.hello_world.launch has no function 'no_such_function'"),
    (["examples.hello_world.launch:make_program", "--arg", "name"],
     "launchpad: --arg 'name' is not NAME=VALUE"),
    (["examples.hello_world.launch:make_program", "--collapse-at", "1"],
     "launchpad: --collapse-at=1 must be 0 (never) or at least 2"),
], ids=["function-raises", "not-a-program", "not-a-target", "no-module", "no-function",
        "bad-arg", "bad-collapse"])
def test_bad_input_is_one_line_and_a_non_zero_exit(tmp_path, args, message):
    done = _launchpad("graph", *args, "-o", str(tmp_path / "graph.svg"))
    assert done.returncode == 1
    assert done.stderr == message + "\n"
    assert not (tmp_path / "graph.svg").exists()


@pytest.mark.parametrize("output, message", [
    ("graph.jpg", "the file's suffix must be one of .svg, .png, .pdf, .dot, .gv"),
    ("missing/graph.svg", "No such file or directory"),
])
def test_an_output_it_cannot_write_is_one_line_and_a_non_zero_exit(tmp_path, output, message):
    done = _launchpad("graph", "examples.hello_world.launch:make_program",
                      "-o", str(tmp_path / output))
    assert done.returncode == 1
    assert done.stderr.startswith("launchpad: ") and message in done.stderr
    assert done.stderr.count("\n") == 1


def test_without_an_output_argparse_says_what_is_missing():
    done = _launchpad("graph", "examples.hello_world.launch:make_program")
    assert done.returncode == 2
    assert "the following arguments are required: -o/--output" in done.stderr
