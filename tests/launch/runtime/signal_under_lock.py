"""A launch whose main thread takes its own signal while it holds the controller's lock, as
when a signal comes during a call into the controller; Python runs the handler right there.
Driven by test_interrupts.py: `python -m tests.launch.runtime.signal_under_lock SIGNAL TIMES KIND`.

    polite    a node that ends when the program stops (local_mt)
    stubborn  a node that ignores the stop and SIGTERM (local_mp, termination_notice_secs=600)

Prints `ended` once the program has ended, within the test's timeout.
"""

from __future__ import annotations

import signal
import sys

import launchpad as lp
from tests.launch.helpers import TIMEOUT
from tests.launch.programs import Stubborn


def main(signum: signal.Signals, times: int, kind: str) -> None:
    program = lp.Program(kind)
    if kind == "stubborn":
        handle = program.add_node(lp.CourierNode(Stubborn), label=kind)
        controller = lp.launch(program, launch_type="local_mp", termination_notice_secs=600)
        assert handle.dereference().ping() == "pong"
    else:
        program.add_node(lp.PyNode(lp.wait_for_stop), label=kind)
        controller = lp.launch(program, launch_type="local_mt")
    with controller._stop._lock:  # the lock a stop takes (runtime/controller/program_stop.py)
        for _ in range(times):
            signal.raise_signal(signum)  # its handler runs now, in this thread, under the lock
    if controller.wait(timeout=TIMEOUT, raise_error=False):
        print("ended", controller.stop_reason or "by a stop", flush=True)


if __name__ == "__main__":
    main(signal.Signals[sys.argv[1]], int(sys.argv[2]), sys.argv[3])
