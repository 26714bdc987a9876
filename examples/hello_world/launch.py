"""Hello world: the smallest Launchpad program.

Two nodes: `greeter`, a CourierNode serving `Greeter.greet`, and `client`, a PyNode whose
function receives the greeter's handle as a live courier client. The client calls `greet` once,
prints the answer, and calls `lp.stop()`, because the greeter would otherwise serve forever.

    python -m examples.hello_world.launch --lp_launch_type=local_mt
"""

from __future__ import annotations

from absl import app, flags

import launchpad as lp

_NAME = flags.DEFINE_string("name", "world", "Who the client asks the greeter to greet.")


class Greeter:
    """The server: every public method is callable by nodes that hold the node's handle."""

    def greet(self, name: str) -> str:
        return f"Hello, {name}!"


def say_hello(greeter, name: str) -> None:
    """The client node's code; `greeter` arrives dereferenced, as a client of the greeter."""
    print(f"client got: {greeter.greet(name)}", flush=True)
    lp.stop()  # stops every node of the program, the greeter included


def make_program(name: str = "world") -> lp.Program:
    """Builds the program: the handle add_node returns for the greeter is the client's edge."""
    program = lp.Program("hello_world")
    greeter = program.add_node(lp.CourierNode(Greeter), label="greeter")
    program.add_node(lp.PyNode(say_hello, greeter, name), label="client")
    return program


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    controller = lp.launch(make_program(_NAME.value))  # launch type from --lp_launch_type
    controller.wait()
    print("Program stopped cleanly.", flush=True)


if __name__ == "__main__":
    app.run(main)
