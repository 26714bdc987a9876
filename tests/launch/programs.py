"""Launching processes driven by the process tests: `python -m tests.launch.programs KIND`.

`python -m tests.launch.programs KIND [GRACE [LAUNCH_TYPE]]` (termination_notice_secs, default
60; local_mp by default). Each launches a program, prints `ready <pid> <pid> ...` (the pids of
the nodes' processes: on this host, and on a cluster's hosts, which share its pids) once
every node answers, and then waits for the program to stop; `Program stopped` is printed after.

    stubborn   one node that ignores the stop and SIGTERM (termination_notice_secs=grace)
    polite     one node that ends when the program stops
    parent     as polite, and its node starts a process of its own, whose pid is printed
               after `ready` as `child <pid>`
    second     as polite, launched after a local_mt program of one node that waits for
               its stop (a launch that finds the signals taken already); both are waited for
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import launchpad as lp


class Polite:
    def ping(self):
        return "pong"


class Parent(Polite):
    def __init__(self):
        self._child = subprocess.Popen(["sleep", "600"])

    def child_pid(self):
        return self._child.pid


class Stubborn:
    def __init__(self):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def ping(self):
        return "pong"

    def run(self):
        threading.Event().wait()  # never returns by itself


def main(kind: str, grace: float, launch_type: str) -> None:
    first = None
    if kind == "second":
        before = lp.Program("first")
        before.add_node(lp.PyNode(lp.wait_for_stop), label="first")
        first = lp.launch(before, launch_type="local_mt")
    program = lp.Program(kind)
    node = lp.CourierNode({"stubborn": Stubborn, "parent": Parent}.get(kind, Polite))
    handle = program.add_node(node, label=kind)
    controller = lp.launch(program, launch_type=launch_type, termination_notice_secs=grace)
    assert handle.dereference().ping() == "pong"
    pids = {*controller.pids().values(), *controller.node_pids().values()}
    print("ready", *sorted(pids), flush=True)
    if kind == "parent":
        print("child", handle.dereference().child_pid(), flush=True)
    controller.wait()
    if first is not None:
        first.wait()
    print("Program stopped", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 60.0,
         sys.argv[3] if len(sys.argv) > 3 else "local_mp")
