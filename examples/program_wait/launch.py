"""Program wait: a program that ends by itself, and a launcher that waits for it.

Every node is a PyNode doing bounded work: worker i counts the primes in its own range of
numbers, prints the count and returns. Nobody calls `lp.stop()`: a program whose nodes have all
finished has stopped, so `controller.wait()` returns True by itself.

While the workers run, the launcher waits with `controller.wait(timeout=...)`, which returns
False each time the timeout passes first; the launcher could do other work between the waits.
How many timeouts there are depends on the machine's speed; the result does not.

    python -m examples.program_wait.launch --lp_launch_type=local_mt --num_workers=3
"""

from __future__ import annotations

from absl import app, flags

import launchpad as lp

_NUM_WORKERS = flags.DEFINE_integer("num_workers", 3, "How many worker nodes.", lower_bound=1)
_RANGE_SIZE = flags.DEFINE_integer(
    "range_size", 100_000, "How many numbers each worker checks for primes.", lower_bound=1)

POLL_SECS = 0.1


def is_prime(n: int) -> bool:
    """Trial division: slow enough that the launcher sees the program running for a while."""
    if n < 2:
        return False
    return all(n % d for d in range(2, int(n ** 0.5) + 1))


def count_primes(start: int, stop: int) -> int:
    """The number of primes in [start, stop)."""
    return sum(1 for n in range(start, stop) if is_prime(n))


def work(worker_id: int, range_size: int) -> None:
    """A worker node's code: bounded work; the node finishes when this returns."""
    start, stop = worker_id * range_size, (worker_id + 1) * range_size
    # One write (end=""), so the lines of workers printing at once do not interleave.
    print(f"worker {worker_id}: {count_primes(start, stop)} primes in [{start}, {stop})\n",
          end="", flush=True)


def make_program(num_workers: int = 3, range_size: int = 100_000) -> lp.Program:
    """Builds the program: a `worker` group of PyNodes and nothing else."""
    program = lp.Program("program_wait")
    with program.group("worker"):
        for i in range(num_workers):
            program.add_node(lp.PyNode(work, i, range_size))
    return program


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    num_workers = _NUM_WORKERS.value
    controller = lp.launch(make_program(num_workers, _RANGE_SIZE.value))
    timeouts = 0
    while not controller.wait(timeout=POLL_SECS):  # False: the program is still running
        timeouts += 1
    print(f"controller.wait() returned True: all {num_workers} workers returned, so the "
          f"program ended by itself, without lp.stop() (wait(timeout={POLL_SECS}) returned "
          f"False {timeouts} times before that).", flush=True)


if __name__ == "__main__":
    app.run(main)
