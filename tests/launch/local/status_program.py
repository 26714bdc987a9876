"""A launch script for the live-status tests: `python -m tests.launch.local.status_program FLAGS`.

An echo server and a caller that calls it, prints `caller is done`, and stops the program
once its calls show in the live table's source (the program's status: the echo's calls counted
and a rate reported for them, calls going on until then) - or after 30 s.
"""

from __future__ import annotations

import time

from absl import app

import launchpad as lp
from launchpad import context

CALLS = 40


class Echo:
    def ping(self, x):
        return x


def caller(echo) -> None:
    for i in range(CALLS):
        echo.ping(i)
    print("caller is done", flush=True)
    # Calls go on, a few a second, until the status shows them counted with a rate (a rate is
    # over the last report interval: calls all made before a report would show none).
    controller = context.current().controller
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _counted(controller.status(10)):
        echo.ping(-1)
        lp.stop_event().wait(0.1)
    lp.stop()


def _counted(status) -> bool:
    """Whether the status holds the echo's calls, with a rate, as the table shows them."""
    echo = next(node for node in status.nodes if node.name == "echo/0")
    ping = echo.methods.get("ping")
    return ping is not None and ping.calls > CALLS and ping.calls_per_sec > 0


def main(_) -> None:
    program = lp.Program("live")
    echo = program.add_node(lp.CourierNode(Echo), label="echo")
    program.add_node(lp.PyNode(caller, echo), label="caller")
    started = time.monotonic()
    lp.launch(program).wait(timeout=30)
    print(f"program ended after {time.monotonic() - started:.0f}s", flush=True)


if __name__ == "__main__":
    app.run(main)
