"""A node's traceback shows the user's file, line and source line under every launcher, as
the launching process would (issue 44): code pickled by value keeps its file name, and its
file's lines travel with it (runtime/code_sources.py)."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
import textwrap

import cloudpickle
import pytest

from launchpad.launch.runtime import code_sources
from tests.processes import ROOT

SCRIPT = '''\
import sys

import launchpad as lp


class Server:
    def __init__(self):
        self.ready = False
        raise ValueError("a constructor that raises")

    def ping(self):
        return "pong"


if __name__ == "__main__":
    program = lp.Program("tracebacks")
    program.add_node(lp.CourierNode(Server), label="server")
    try:  # (serialize_py_nodes: local_mt pickles the node too, as test_mt does)
        lp.launch(program, launch_type=sys.argv[1], serialize_py_nodes=True).wait(timeout=60)
    except lp.NodeFailedError as e:
        print("NODE TRACEBACK\\n" + e.node_traceback, flush=True)
'''


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_a_scripts_own_class_raising_shows_its_file_line_and_source(launch_type, tmp_path):
    script = tmp_path / "user_program.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), launch_type], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"})
    node_traceback = done.stdout.partition("NODE TRACEBACK\n")[2]
    assert node_traceback, done.stdout + done.stderr
    assert f'File "{script}", line 9, in __init__' in node_traceback, node_traceback
    assert '    raise ValueError("a constructor that raises")' in node_traceback
    assert "<dynamic-code>" not in node_traceback


def test_the_lines_travel_with_the_code_where_its_file_is_not(tmp_path, monkeypatch):
    """Unpickled in a process that cannot read the file (another host, a file changed since),
    the traceback still has the lines the launching process read."""
    module_file = tmp_path / "user_code.py"
    module_file.write_text(textwrap.dedent("""\
        def fails(x):
            y = x + 1
            raise KeyError(f"no {y}")


        def unrelated():
            return "a line not sent"
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("user_code")
    cloudpickle.register_pickle_by_value(module)
    try:
        pickled = code_sources.dumps(module.fails)
    finally:
        cloudpickle.unregister_pickle_by_value(module)
        sys.modules.pop("user_code")
    module_file.unlink()
    assert b"a line not sent" not in pickled  # only the lines of the code pickled travel
    (tmp_path / "pickled").write_bytes(pickled)
    code = ("import pickle, traceback, sys\n"
            "fails = pickle.loads(open(sys.argv[1], 'rb').read())\n"
            "try:\n    fails(1)\nexcept KeyError:\n    traceback.print_exc(file=sys.stdout)\n")
    shown = subprocess.run([sys.executable, "-c", code, str(tmp_path / "pickled")], cwd=ROOT,
                           capture_output=True, text=True, timeout=60).stdout
    assert f'File "{module_file}", line 3, in fails' in shown, shown
    assert '    raise KeyError(f"no {y}")' in shown, shown


def test_what_is_pickled_is_the_node_itself():
    """Unpickled anywhere (without launchpad's runner), the payload is the node."""
    def node_function(x):
        return x * 2
    assert pickle.loads(code_sources.dumps(node_function))(21) == 42
    assert pickle.loads(code_sources.dumps({"a": [1, 2]})) == {"a": [1, 2]}
