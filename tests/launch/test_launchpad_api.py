"""Launchpad's own API where code written for it (Acme above all) relies on it: `lp.launch`'s
parameters, `lp.DockerConfig`, test_mt without a test case, `stop_and_wait`, and node
processes that parse their absl flags and log like Launchpad's."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import pathlib
import sys

import pytest
from absl import flags
from absl import logging as absl_logging

import launchpad as lp
from tests.launch.helpers import TIMEOUT

flags.DEFINE_string("lp_test_greeting", "unset", "A flag a node of these tests reads.")


def test_launch_takes_launchpads_parameters_in_launchpads_order():
    parameters = list(inspect.signature(lp.launch).parameters.values())
    assert [p.name for p in parameters[:6]] == [
        "programs", "launch_type", "xm_resources", "local_resources", "test_case", "terminal"]
    assert parameters[6].name == "serialize_py_nodes"
    assert parameters[6].kind is inspect.Parameter.KEYWORD_ONLY


def test_docker_config_has_launchpads_fields_and_is_built_as_acme_builds_it():
    assert [f.name for f in dataclasses.fields(lp.DockerConfig)] == [
        "code_directory", "docker_requirements", "hw_requirements", "python_path"]
    config = lp.DockerConfig("/code", "/code/requirements.txt", hw_requirements={"cpu": 2},
                             python_path=["lib"])
    assert config.docker_requirements == "/code/requirements.txt"
    assert lp.DockerConfig() == lp.DockerConfig(None, None, None, None)


def test_local_launches_accept_and_ignore_xm_resources_saying_so_once(
        caplog, no_leaked_threads, monkeypatch):
    monkeypatch.setattr(sys.modules["launchpad.launch.options"], "_xm_noted", False)
    caplog.set_level(logging.INFO, logger="absl")
    for _ in range(2):
        program = lp.Program("p")
        program.add_node(lp.PyNode(int), label="noop")
        # positionally, as Launchpad's order has it: programs, launch_type, xm_resources
        controller = lp.launch(program, "local_mt", {"noop": lp.DockerConfig()})
        assert controller.stop_and_wait()
    notes = [r.getMessage() for r in caplog.records if "xm_resources" in r.getMessage()]
    assert notes == ["lp.launch: xm_resources are for XManager launches; launch_type "
                     "'local_mt' ignores them (cluster launch types take "
                     "resources={group: lp.Resources(...)})"]


def test_test_mt_without_a_test_case_launches_like_launchpads(no_leaked_threads):
    program = lp.Program("p")
    handle = program.add_node(lp.CourierNode(dict, greeting="hi"), label="store")
    controller = lp.launch(program, launch_type="test_mt")
    assert handle.dereference().get("greeting") == "hi"
    assert controller.stop_and_wait()


def test_test_mp_still_needs_a_test_case():
    program = lp.Program("p")
    program.add_node(lp.PyNode(int), label="noop")
    with pytest.raises(ValueError, match="test_mp.*needs test_case="):
        lp.launch(program, launch_type="test_mp")


def test_stop_and_wait_raises_the_failure_of_a_failed_program(no_leaked_threads):
    program = lp.Program("p")
    program.add_node(lp.PyNode(_fail), label="breaks")
    controller = lp.launch(program, launch_type="local_mt")
    assert controller.wait_for_node("breaks/0", TIMEOUT)
    with pytest.raises(lp.NodeFailedError, match="breaks/0"):
        controller.stop_and_wait()


def _fail():
    raise RuntimeError("broken")


def _log_and_read_flag():
    absl_logging.info("node says %s", flags.FLAGS.lp_test_greeting)


def _raise_during_stop():
    lp.wait_for_stop()
    raise RuntimeError("raised while stopping")


def _run_with_logs(launch_mp_local, monkeypatch, tmp_path, program, **kwargs) -> str:
    monkeypatch.setenv("LAUNCHPAD_LOGGING_DIR", str(tmp_path))
    controller = launch_mp_local(program, terminal="output_to_files", **kwargs)
    controller.stop()
    try:
        controller.wait(timeout=TIMEOUT)
    except lp.NodeFailedError:
        pass
    (log,) = pathlib.Path(tmp_path).glob("*/0")  # <label>/<index>
    return log.read_text()


def test_a_node_process_parses_its_absl_flags_and_logs_info(launch_mp_local, monkeypatch,
                                                            tmp_path):
    program = lp.Program("flags")
    program.add_node(lp.PyNode(_log_and_read_flag), label="talker")
    settings = {"talker": lp.PythonProcess(args={"lp_test_greeting": "hello"})}
    log = _run_with_logs(launch_mp_local, monkeypatch, tmp_path, program,
                         local_resources=settings)
    assert "node says hello" in log


def test_a_node_raising_while_its_program_stops_says_so_in_one_line(launch_mp_local,
                                                                  monkeypatch, tmp_path):
    program = lp.Program("stopping")
    program.add_node(lp.PyNode(_raise_during_stop), label="late")
    log = _run_with_logs(launch_mp_local, monkeypatch, tmp_path, program)
    assert ("launchpad: node late/0 raised while its program stopped: RuntimeError: raised "
            "while stopping") in log
    assert "Traceback" not in log
