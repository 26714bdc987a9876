"""A host name that takes long to look up (an unreachable resolver) holds up only the client
that asked for it: finding a server of this process looks the name up without holding the
in-process registry's lock, so servers start - and register there - meanwhile.

The host is a network namespace (tests/cluster/netns.py) whose resolver is a UDP socket of
this test that never answers: a lookup there waits for its timeout.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from tests.cluster.fixtures import namespaces_unavailable
from tests.cluster.netns import HostNetwork

pytestmark = pytest.mark.timeout(120)

# Looks a name up on a thread (through what a client does first), and once told that the
# lookup is under way, starts a server, timed.
_STARTS_A_SERVER_DURING_A_LOOKUP = textwrap.dedent("""
    import sys, threading, time
    from launchpad import courier
    from launchpad.courier._in_process.in_process import InProcessChannel

    threading.Thread(target=InProcessChannel.find, args=("slow.example:4000", None),
                     daemon=True).start()
    sys.stdin.readline()  # the resolver has the question
    started = time.monotonic()
    server = courier.Server(object(), host="127.0.0.1")
    server.start()
    print(f"{time.monotonic() - started:.3f}", flush=True)
    server.stop()
""")


@pytest.fixture
def silent_resolver():
    """A host whose resolver never answers, and that resolver's socket."""
    why = namespaces_unavailable()
    if why:
        pytest.skip(why)
    with HostNetwork(1) as network, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as dns:
        dns.bind((network.gateway, 53))
        host = network.hosts[0]
        with open(f"/etc/netns/{host.name}/resolv.conf", "w") as f:
            f.write(f"nameserver {network.gateway}\noptions timeout:30 attempts:1\n")
        yield network, host, dns


def test_a_server_starts_while_a_name_is_looked_up(silent_resolver):
    network, host, dns = silent_resolver
    argv = network.exec_argv(host, [sys.executable, "-c", _STARTS_A_SERVER_DURING_A_LOOKUP])
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        dns.settimeout(60)
        question, _ = dns.recvfrom(512)  # the lookup is under way
        assert b"slow" in question
        child.stdin.write("go\n")
        child.stdin.flush()
        took = float(child.stdout.readline())
        assert took < 5.0, f"a server took {took}s to start while a name was looked up"
    finally:
        child.kill()
        child.wait()
