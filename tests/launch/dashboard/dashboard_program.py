"""The programs the dashboard's tests launch (their nodes' code: node processes import it)."""

from __future__ import annotations

import threading

import launchpad as lp

# HTML in a traceback: the page must show it as text.
CRASH_MESSAGE = "the crasher crashed on purpose: <b>not bold</b> & <script>no()</script>"
CALLER_SAYS = "caller: ticking the adder"


class Adder:
    """What the adder node serves."""

    def add(self, a: int, b: int) -> int:
        return a + b

    def refuse(self) -> None:
        raise ValueError("refused on purpose")

    def tick(self) -> None:
        """What the callers call, so that the adder's rates are not zero."""


def call_ticks(adder) -> None:
    print(CALLER_SAYS, flush=True)
    while not lp.wait_for_stop(0.05):  # a caller's pace, twenty calls a second
        adder.tick()


def crash() -> None:
    print("crasher: about to crash", flush=True)
    raise RuntimeError(CRASH_MESSAGE)


def ignore_the_stop() -> None:
    """Runs until it is killed: it keeps a stopping program's stop sequence waiting."""
    threading.Event().wait()


def restarting_program(name: str) -> tuple[lp.Program, lp.Handle]:
    """An adder, two callers ticking it, and a crasher that its group's policy restarts
    only after ten minutes: the crasher shows 'restarting' with its traceback while the
    rest runs. Returns the program and the adder's handle."""
    program = lp.Program(name)
    with program.group("adder"):
        adder = program.add_node(lp.CourierNode(Adder))
    with program.group("caller"):
        for _ in range(2):
            program.add_node(lp.PyNode(call_ticks, adder))
    with program.group("crasher", restart=lp.RestartPolicy(
            max_restarts=3, backoff_secs=600, max_backoff_secs=600)):
        program.add_node(lp.PyNode(crash))
    return program, adder


def failed_program(name: str) -> lp.Program:
    """A crasher without a restart policy and a node that ignores the stop: the crasher's
    failure stops the program, which stays 'stopping' (for the grace period its launch
    gives) with the crasher 'failed'."""
    program = lp.Program(name)
    program.add_node(lp.PyNode(crash), "crasher")
    program.add_node(lp.PyNode(ignore_the_stop), "holdout")
    return program
