"""Consumer and producers: the program of DESIGN.md section 1.

N `producer` nodes each serve `work(x) -> x * x`. The `consumer` node gets their handles as a
list of clients; its `run()` sends `work(i)` to producer i through `client.futures`, so all N
calls are in flight at once, prints the squares and their sum, and calls `lp.stop()` to end
the program (producers serve until stopped). The launcher prints once `controller.wait()` has
returned, which shows the launching process survives the stop.

    python -m examples.consumer_producers.launch --lp_launch_type=local_mp --num_producers=4
"""

from __future__ import annotations

from absl import app, flags

import launchpad as lp

_NUM_PRODUCERS = flags.DEFINE_integer(
    "num_producers", 4, "How many producer nodes the consumer fans out to.", lower_bound=1)


class Producer:
    """A worker: every public method is remotely callable."""

    def work(self, x: int) -> int:
        return x * x


class Consumer:
    """Fans `work(i)` out to every producer concurrently, then sums the answers."""

    def __init__(self, producers: list):
        self._producers = producers  # handles arrive here as live clients

    def run(self) -> None:
        """The node's main loop: once it returns, the consumer node is done."""
        futures = [p.futures.work(i) for i, p in enumerate(self._producers)]
        squares = [f.result() for f in futures]
        n = len(squares)
        shown = ", ".join(map(str, squares)) if n <= 8 else f"{squares[0]}, ..., {squares[-1]}"
        print(f"Consumer: {n} producers squared 0..{n - 1} -> [{shown}]; "
              f"sum = {sum(squares)}", flush=True)
        lp.stop()  # the producers serve until the program stops


def make_program(num_producers: int = 4) -> lp.Program:
    """Builds the program: a `producer` group of N nodes and one `consumer` node."""
    program = lp.Program("consumer_producers")
    with program.group("producer"):
        producers = [program.add_node(lp.CourierNode(Producer)) for _ in range(num_producers)]
    program.add_node(lp.CourierNode(Consumer, producers), label="consumer")
    return program


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    num_producers = _NUM_PRODUCERS.value
    program = make_program(num_producers)
    print(f"Launching {program.name!r}: {num_producers} producer nodes and 1 consumer node.",
          flush=True)
    controller = lp.launch(program)  # launch type from --lp_launch_type (default local_mt)
    controller.wait()  # returns once lp.stop() has ended every node; raises if one failed
    print("Program stopped cleanly.", flush=True)


if __name__ == "__main__":
    app.run(main)
