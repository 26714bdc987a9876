"""Launching processes driven by the process tests: `python -m tests.launch.programs KIND`.

`python -m tests.launch.programs KIND [GRACE]` (termination_notice_secs, default 60).
Each launches a local_mp program, prints `ready <pid> <pid> ...` (the node pids) once every
node answers, and then waits for the program to stop; `Program stopped` is printed after.

    stubborn   one node that ignores the stop and SIGTERM (termination_notice_secs=grace)
    polite     one node that ends when the program stops
"""

from __future__ import annotations

import signal
import sys
import threading

import launchpad as lp


class Polite:
    def ping(self):
        return "pong"


class Stubborn:
    def __init__(self):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def ping(self):
        return "pong"

    def run(self):
        threading.Event().wait()  # never returns by itself


def main(kind: str, grace: float) -> None:
    program = lp.Program(kind)
    node = lp.CourierNode(Stubborn if kind == "stubborn" else Polite)
    handle = program.add_node(node, label=kind)
    controller = lp.launch(program, launch_type="local_mp", termination_notice_secs=grace)
    assert handle.dereference().ping() == "pong"
    print("ready", *controller.pids().values(), flush=True)
    controller.wait()
    print("Program stopped", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 60.0)
