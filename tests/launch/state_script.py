"""A launch script for the tests of resume=: `python -m tests.launch.state_script ADDS`.

It launches program "counted" - one stateful Counter (tests/launch/test_state.py) - under
local_mt, calls its `add` ADDS times, prints `run RUN_ID restored R count C`, and stops it
(the graceful stop saves its state). Given --lp_resume=RUN (`launchpad launch --resume RUN`),
the counter starts from RUN's state.
"""

from __future__ import annotations

import sys

import launchpad as lp
from tests.launch.test_state import Counter


def main(adds: str) -> None:
    program = lp.Program("counted")
    with program.group("counter", state=lp.StatePolicy(every_secs=60)):
        handle = program.add_node(lp.CourierNode(Counter))
    controller = lp.launch(program, launch_type="local_mt")
    client = handle.dereference()
    for _ in range(int(adds)):
        client.add()
    count, restored, _ = client.status()
    print("run", controller.run_id, "restored", restored, "count", count, flush=True)
    controller.stop_and_wait()


if __name__ == "__main__":
    main(*[arg for arg in sys.argv[1:] if not arg.startswith("--")])  # --lp_* are absl's
