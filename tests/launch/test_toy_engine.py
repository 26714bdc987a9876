"""An engine is one folder and one row: the toy engine of tests/launch/toy_engine/, added
by its row alone, is launched through, gives `lp` its settings and `python -m
launchpad.launch` its entry point, and is refused where it refuses."""

import subprocess
import sys
import textwrap

import pytest

import launchpad as lp
from launchpad.launch import launchers
from tests.launch.helpers import Box
from tests.launch.toy_engine import launcher as toy_launcher
from tests.processes import ROOT

TOY = launchers.Engine(
    "tests.launch.toy_engine", {"toy": "launcher:ToyLauncher"},
    launchers.Settings("toy", "settings:ToySettings", "lp.ToySettings for the toy engine."),
    exports={"ToySettings": "settings:ToySettings"},
    entry_points={"toy-echo": launchers.EntryPoint("entry:echo", "Toy: prints PATH")})


@pytest.fixture
def toy():
    launchers.register(TOY)
    try:
        yield
    finally:
        launchers.unregister(TOY)
        lp.__dict__.pop("ToySettings", None)  # (what lp kept of the row, once read)


def _say_launch_type(box):
    box.put(lp.context.get_context().launch_type)


def test_a_program_launches_through_an_engine_added_by_its_row(toy):
    box = Box()
    program = lp.Program("toyed")
    program.add_node(lp.PyNode(_say_launch_type, box), label="node")
    controller = lp.launch(program, launch_type="toy", toy=lp.ToySettings("hi"))
    assert controller.wait(timeout=30) is True
    assert box.get() == "toy"
    box.close()
    name, greeting, description = toy_launcher.STARTED[-1]
    assert (name, greeting) == ("toy", "hi")
    assert "node/0 (PyNode)" in description and "each a toy thread" in description
    assert "toy" in [launcher.name for launcher in launchers.every()]


def test_an_engines_settings_are_checked_by_its_row(toy):
    program = lp.Program("toyed")
    program.add_node(lp.PyNode(print), label="node")
    with pytest.raises(TypeError, match=r"toy=3: toy must be an lp\.ToySettings"):
        lp.launch(program, launch_type="toy", toy=3)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'toyy'; its engines' "
                                        r"keywords are .*\btoy\b"):
        lp.launch(program, launch_type="toy", toyy=lp.ToySettings())
    with pytest.raises(ValueError, match="the toy engine runs at most 3 nodes"):
        big = lp.Program("big")
        for _ in range(4):
            big.add_node(lp.PyNode(print), label="node")
        lp.launch(big, launch_type="toy")


def test_a_dry_run_prints_the_engines_plan(toy, capsys):
    program = lp.Program("toyed")
    program.add_node(lp.PyNode(print), label="node")
    lp.launch(program, launch_type="toy", dry_run=True).wait()
    assert "Program 'toyed' under toy: 1 node, each a toy thread" in capsys.readouterr().out


def test_without_its_row_the_engine_is_unknown():
    assert "ToySettings" not in dir(lp)
    with pytest.raises(AttributeError):
        lp.ToySettings  # noqa: B018
    program = lp.Program("toyed")
    program.add_node(lp.PyNode(print), label="node")
    with pytest.raises(ValueError, match="Unknown launch_type 'toy'; launch types: local_mt"):
        lp.launch(program, launch_type="toy")


def test_an_engines_entry_point_runs_from_the_command_line(tmp_path):
    said = tmp_path / "said.txt"
    said.write_text("from the toy engine\n")
    script = textwrap.dedent(f"""
        import sys
        from launchpad.launch import __main__ as entry, launchers
        from tests.launch.test_toy_engine import TOY
        launchers.register(TOY)
        sys.exit(entry.main(["--toy-echo", {str(said)!r}]))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "from the toy engine\n"), done.stderr
    usage = subprocess.run([sys.executable, "-m", "launchpad.launch", "--help"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60).stdout
    assert "--toy-echo" not in usage and "--slurm-controller" in usage
