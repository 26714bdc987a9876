"""Launch scripts written as Launchpad's users write them: `main()` returns right after
`lp.launch(...)`. Driven by test_at_exit.py:
`python -m tests.launch.runtime.exit_scripts KIND TYPE`.

    returns   a node that works (submitting to a thread pool) until the program stops
    stubborn  a node that ignores the stop and SIGTERM (termination_notice_secs=60)
    waits     main waits for the program itself (its node returns at once)
    fails     a node that raises; an atexit handler of the script prints `atexit ran`
    handle    test_mt without a test case: main calls a node through its handle and returns
"""

from __future__ import annotations

import atexit
import concurrent.futures
import signal
import sys
import threading

import launchpad as lp


def _work_until_stopped() -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        while not lp.wait_for_stop(0.01):
            pool.submit(sum, [1, 2]).result()
    print("node stopped cleanly", flush=True)


def _ignore_the_stop() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Event().wait()


def _fail() -> None:
    raise RuntimeError("the node broke")


class Greeter:
    def __init__(self):
        lp.register_stop_handler(lambda: print("greeter stopped", flush=True))

    def greet(self, name: str) -> str:
        return f"hello {name}"


def main(kind: str, launch_type: str) -> None:
    program = lp.Program(kind)
    if kind == "handle":
        handle = program.add_node(lp.CourierNode(Greeter), label="greeter")
        lp.launch(program, launch_type=launch_type)
        print(handle.dereference().greet("test"), flush=True)
        return
    body = {"returns": _work_until_stopped, "stubborn": _ignore_the_stop, "waits": int,
            "fails": _fail}[kind]
    program.add_node(lp.PyNode(body), label=kind)
    controller = lp.launch(program, launch_type=launch_type, termination_notice_secs=60)
    if kind == "waits":
        controller.wait()
    if kind == "fails":
        atexit.register(print, "atexit ran", flush=True)
    print("main returned", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
