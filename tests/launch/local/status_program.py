"""A launch script for the live-status tests: `python -m tests.launch.local.status_program FLAGS`.

An echo server and a caller that calls it, prints `caller is done`, and stops the program
once its calls show in the live table's source (the program's status) - or after 30 s.
"""

from __future__ import annotations

import time

from absl import app

import launchpad as lp

CALLS = 40


class Echo:
    def ping(self, x):
        return x


def caller(echo) -> None:
    for i in range(CALLS):
        echo.ping(i)
    print("caller is done", flush=True)
    lp.stop_event().wait(4)  # two reports: the calls reach the table before the stop
    lp.stop()


def main(_) -> None:
    program = lp.Program("live")
    echo = program.add_node(lp.CourierNode(Echo), label="echo")
    program.add_node(lp.PyNode(caller, echo), label="caller")
    started = time.monotonic()
    lp.launch(program).wait(30)
    print(f"program ended after {time.monotonic() - started:.0f}s", flush=True)


if __name__ == "__main__":
    app.run(main)
