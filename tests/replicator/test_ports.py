"""A cluster task's port, held from its registration until TensorFlow's server binds it: no
other process can take it meanwhile, and TensorFlow's server binds it while it is held."""

import socket
import subprocess
import sys
import textwrap

import portpicker

from launchpad.replicator.ports import REUSE_PORT_VARIABLE, ReservedPort

_TRY_TO_TAKE = textwrap.dedent("""
    import socket, sys
    port = int(sys.argv[1])
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET, "127.0.0.1"),
                         (socket.AF_INET6, "::")):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                continue
            print("took", host)
    print("done")
""")

_TF_SERVER_ON_A_RESERVED_PORT = textwrap.dedent("""
    import tensorflow as tf
    from launchpad.replicator.ports import ReservedPort
    with ReservedPort() as reserved:
        spec = tf.train.ClusterSpec({"worker": [f"localhost:{reserved.port}"]})
        tf.distribute.Server(spec, job_name="worker", task_index=0, protocol="grpc",
                             start=True)
        print("serving", reserved.port)
""")


def test_no_other_process_can_take_a_reserved_port(monkeypatch):
    monkeypatch.delenv(REUSE_PORT_VARIABLE, raising=False)
    with ReservedPort() as reserved:
        assert not portpicker.is_port_free(reserved.port)
        taken = subprocess.run([sys.executable, "-c", _TRY_TO_TAKE, str(reserved.port)],
                               capture_output=True, text=True, timeout=60, check=True)
        assert taken.stdout.split("\n") == ["done", ""], taken.stdout
    assert portpicker.is_port_free(reserved.port)  # let go at the end


def test_a_reserved_port_takes_no_connection(monkeypatch):
    monkeypatch.delenv(REUSE_PORT_VARIABLE, raising=False)
    with ReservedPort() as reserved, socket.socket() as client:
        client.settimeout(10)
        assert client.connect_ex(("127.0.0.1", reserved.port)) != 0  # refused, not held open


def test_tensorflows_server_binds_a_port_while_it_is_reserved():
    served = subprocess.run([sys.executable, "-c", _TF_SERVER_ON_A_RESERVED_PORT],
                            capture_output=True, text=True, timeout=120)
    assert served.returncode == 0, served.stderr[-3000:]
    assert served.stdout.startswith("serving "), served.stdout
