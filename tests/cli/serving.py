"""A launch script for the CLI's tests: `launchpad launch tests/cli/serving.py FLAGS`.

    echo/0        a CourierNode; release() lets gate/0 end
    main/0        calls echo, prints `main says 0..2` and `main is done`, then waits for the stop
    worker/0, /1  print `worker N ready` (its greeting), then wait for the stop
    gate/0        prints `gate opened`, waits for echo's release(), prints `gate closed` and ends
    crasher/0     raises; restarted only after a backoff longer than any test (so it stays
                  'restarting', its failure kept)

It prints `launched RUN_ID` once lp.launch has returned; the program runs until it is
stopped (under --lp_launch_type, default local_mt).
"""

from __future__ import annotations

import threading

from absl import app

import launchpad as lp


class Echo:
    def __init__(self):
        self._released = threading.Event()

    def echo(self, x):
        return x

    def release(self) -> None:
        self._released.set()

    def wait_released(self) -> None:
        self._released.wait()


def main_node(echo) -> None:
    for i in range(3):
        print("main says", echo.echo(i), flush=True)
    print("main is done", flush=True)
    lp.wait_for_stop()


def worker(index: int, greeting: str = "ready") -> None:
    print(f"worker {index} {greeting}", flush=True)
    lp.wait_for_stop()


def gate(echo) -> None:
    print("gate opened", flush=True)
    echo.wait_released()
    print("gate closed", flush=True)


def crash() -> None:
    raise RuntimeError("crashed on purpose")


def make_program(workers: int = 2, greeting: str = "ready") -> lp.Program:
    """The program (`launchpad apply RUN tests.cli.serving:make_program --arg ...` changes
    it: its workers greet otherwise, or there are more of them)."""
    program = lp.Program("serving")
    echo = program.add_node(lp.CourierNode(Echo), label="echo")
    program.add_node(lp.PyNode(main_node, echo), label="main")
    with program.group("worker"):
        for index in range(workers):
            program.add_node(lp.PyNode(worker, index, greeting))
    program.add_node(lp.PyNode(gate, echo), label="gate")
    with program.group("crasher", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=600,
                                                         max_backoff_secs=600)):
        program.add_node(lp.PyNode(crash))
    return program


def main(_) -> None:
    controller = lp.launch(make_program(), termination_notice_secs=5)
    print(f"launched {controller.run_id}", flush=True)  # one write: stderr shares the pipe


if __name__ == "__main__":
    app.run(main)
