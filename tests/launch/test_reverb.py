"""ReverbNode on real Reverb, under each engine (threads, processes, Slurm, Ray): insert and
sample across nodes, a learner reading through TrajectoryDataset, checkpoints surviving a
killed replay node, and Reverb imported only where it is used."""

import os
import signal
import socket
import time

import numpy as np
import portpicker
import pytest

import launchpad as lp
from tests.launch.helpers import TIMEOUT, report_heavy_imports
from tests.stacks import NO_REVERB

reverb = pytest.importorskip("reverb", reason=NO_REVERB)

TABLE = "trajectories"
STEPS = 3


def _tables():
    import tensorflow as tf
    # A queue: each item is sampled once, in the order it was written.
    return [reverb.Table.queue(TABLE, max_size=1000,
                               signature={"obs": tf.TensorSpec([STEPS, 4], tf.float32)})]


def _write(replay, count, box):
    with replay.trajectory_writer(num_keep_alive_refs=STEPS) as writer:
        for item in range(count):
            for step in range(STEPS):
                writer.append({"obs": np.full([4], item * 10 + step, np.float32)})
            writer.create_item(TABLE, 1.0, {"obs": writer.history["obs"][-STEPS:]})
        writer.flush()
    if box is not None:
        box.put(("written", count))


def _learn(replay, count, box):
    dataset = reverb.TrajectoryDataset.from_table_signature(
        server_address=replay.server_address, table=TABLE, max_in_flight_samples_per_worker=4)
    firsts = sorted(float(sample.data["obs"][0][0]) for sample in dataset.take(count))
    box.put(("learned", firsts))


def test_actors_write_and_a_learner_reads_through_trajectory_dataset(launch_each_engine, box):
    results = box()
    program = lp.Program("replay")
    replay = program.add_node(lp.ReverbNode(_tables), label="replay")
    program.add_node(lp.PyNode(_write, replay, 4, results), label="actor")
    program.add_node(lp.PyNode(_learn, replay, 4, results), label="learner")
    launch_each_engine(program)
    got = dict(results.get() for _ in range(2))
    assert got["written"] == 4
    assert got["learned"] == [0.0, 10.0, 20.0, 30.0]  # each item's first step


def test_the_launching_process_inserts_and_samples(launch_each_engine):
    program = lp.Program("replay")
    handle = program.add_node(lp.ReverbNode(_tables), label="replay")
    launch_each_engine(program)
    client = handle.dereference()
    with client.trajectory_writer(num_keep_alive_refs=STEPS) as writer:
        for step in range(STEPS):
            writer.append({"obs": np.full([4], step, np.float32)})
        writer.create_item(TABLE, 1.0, {"obs": writer.history["obs"][-STEPS:]})
    sample = next(client.sample(TABLE, num_samples=1, emit_timesteps=False))
    np.testing.assert_array_equal(sample.data[0][:, 0], np.arange(STEPS))  # data: flattened


def _write_and_report(replay, box):
    _write(replay, 2, None)
    report_heavy_imports(replay, box)


def test_nodes_writing_to_reverb_share_one_import_of_it_and_others_import_none(
        launch_one_mp, box, capfd):
    """Reverb (and TensorFlow) cost a node that imports them itself some 200 MB of private
    memory; a node holding a Reverb handle is forked from a process that imported them, so it
    shares those pages (and that process's import says nothing on the launcher's screen). A
    node with no Reverb handle imports neither."""
    results = box()
    program = lp.Program("light")
    replay = program.add_node(lp.ReverbNode(_tables), label="replay")
    for _ in range(2):
        program.add_node(lp.PyNode(_write_and_report, replay, results), label="actor")
    program.add_node(lp.PyNode(report_heavy_imports, "nothing", results), label="other")
    launch_one_mp(program)
    reports = [results.get() for _ in range(3)]
    others = [report for report in reports if report[3] == repr("nothing")]
    writers = [report for report in reports if report not in others]
    assert [other[:2] for other in others] == [(False, False)]
    for imported_reverb, imported_tf, private, shown in writers:
        assert imported_reverb and imported_tf and "replay/0" in shown
        assert private < 80, f"a writer holds {private:.0f} MB of its own"
    assert "cpu_feature_guard" not in capfd.readouterr().err  # TensorFlow's start-up notes


def test_a_killed_replay_node_restarts_from_its_checkpoint(launch_processes, tmp_path):
    path = str(tmp_path / "checkpoints")
    program = lp.Program("durable")
    with program.group("replay", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.01)):
        handle = program.add_node(lp.ReverbNode(
            _tables, checkpoint_ctor=lambda: reverb.checkpointers.DefaultCheckpointer(path)))
    controller = launch_processes(program)
    client = handle.dereference()
    _write(client, 5, None)
    client.checkpoint()
    os.kill(controller.node_pids()["replay/0"], signal.SIGKILL)
    assert controller.wait_for_restarts("replay/0", 1, TIMEOUT)
    restored = handle.dereference()  # resolves the restarted node's new address
    assert restored.server_info(timeout=TIMEOUT)[TABLE].current_size == 5
    firsts = [float(next(restored.sample(TABLE, emit_timesteps=False)).data[0][0][0])
              for _ in range(5)]
    assert firsts == [0.0, 10.0, 20.0, 30.0, 40.0]  # the data, in its order, survived


@pytest.mark.parametrize("colocation", [lp.MultiThreadingColocation,
                                        lp.MultiProcessingColocation])
def test_a_replay_node_inside_a_colocation(colocation, launch_each_engine):
    program = lp.Program("colocated_replay")
    replay = lp.ReverbNode(_tables)
    handle = replay.create_handle()
    program.add_node(colocation([replay]), label="co")
    launch_each_engine(program)
    client = handle.dereference()
    _write(client, 2, None)
    assert client.server_info(timeout=TIMEOUT)[TABLE].current_size == 2
    assert "co/0/0" in repr(client)


def _durable_program(path, every_minutes=None):
    program = lp.Program("durable")
    with program.group("replay", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.01)):
        handle = program.add_node(lp.ReverbNode(
            _tables, checkpoint_ctor=lambda: reverb.checkpointers.DefaultCheckpointer(path),
            checkpoint_time_delta_minutes=every_minutes))
    return program, handle


def test_a_graceful_stop_checkpoints_and_the_next_launch_restores(launch_each_engine, tmp_path):
    path = str(tmp_path / "checkpoints")
    program, handle = _durable_program(path)
    controller = launch_each_engine(program)
    _write(handle.dereference(), 3, None)
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    program, handle = _durable_program(path)  # a new launch, from the same checkpoints
    launch_each_engine(program)
    assert handle.dereference().server_info(timeout=TIMEOUT)[TABLE].current_size == 3


def test_periodic_checkpoints_survive_a_killed_replay_node(launch_processes, tmp_path):
    path = tmp_path / "checkpoints"
    program, handle = _durable_program(str(path), every_minutes=0.2 / 60)  # every 0.2 s
    controller = launch_processes(program)
    _write(handle.dereference(), 4, None)
    written = time.monotonic()
    deadline = written + TIMEOUT
    # A checkpoint started after the write holds it: wait for a checkpoint folder that is
    # newer than the write, and complete (Reverb writes a DONE file last).
    while not any(d.stat().st_mtime > time.time() - (time.monotonic() - written)
                  and (d / "DONE").exists() for d in path.glob("*") if d.is_dir()):
        assert time.monotonic() < deadline, "no periodic checkpoint was written"
        time.sleep(0.05)  # polls the folder: Reverb signals no finished checkpoint
    os.kill(controller.node_pids()["replay/0"], signal.SIGKILL)
    assert controller.wait_for_restarts("replay/0", 1, TIMEOUT)
    assert handle.dereference().server_info(timeout=TIMEOUT)[TABLE].current_size == 4


def test_a_replay_server_whose_picked_port_was_taken_starts_on_another(monkeypatch):
    """Reverb's pick is free when picked, and another process may bind it first (an
    ephemeral port, as outgoing connections take): the node starts its server again."""
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("", 0))
    taken.listen()
    picks = iter([taken.getsockname()[1]])
    pick = portpicker.pick_unused_port
    monkeypatch.setattr(portpicker, "pick_unused_port", lambda: next(picks, None) or pick())
    try:
        server = lp.ReverbNode(_tables)._start(reverb, None, None)
        try:
            assert server.port != taken.getsockname()[1]
            assert reverb.Client(f"localhost:{server.port}").server_info()[TABLE]
        finally:
            server.stop()
    finally:
        taken.close()
    with pytest.raises(ValueError, match="BuildAndStart"):  # a port the user chose is theirs
        with socket.socket() as held:
            held.bind(("", 0))
            held.listen()
            lp.ReverbNode(_tables)._start(reverb, held.getsockname()[1], None)
