"""The controller of benchmarks/controller_scale.py, in a process of its own (so that its CPU
and memory are its own): `python -m benchmarks._controller_process NODES`.

It makes a program of NODES nodes and its real Controller (registry, supervisor, node book,
its courier server), prints `ADDRESS TOKEN`, serves until its stdin closes, then prints one
JSON line: how many nodes it saw fail (a heartbeat missed past the liveness timeout).
"""

from __future__ import annotations

import json
import os
import sys

import launchpad as lp
from launchpad.launch.runtime.controller import Controller


def main(nodes: int) -> None:
    program = lp.Program("scale")
    with program.group("node"):
        for _ in range(nodes):
            program.add_node(lp.PyNode(int))
    controller = Controller(program, startup_timeout_secs=1e6, launch_type="slurm")
    print(controller.address, controller.token, flush=True)
    sys.stdin.read()  # the benchmark closes it when it is done
    failed = sum(1 for node in controller.status().nodes if node.failures)
    print(json.dumps({"failed_nodes": failed}), flush=True)
    os._exit(0)  # its nodes are simulated: there is nothing to stop


if __name__ == "__main__":
    main(int(sys.argv[1]))
