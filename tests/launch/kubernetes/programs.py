"""Programs the Kubernetes tests build manifests of and run in pods (importable by the pods,
whose image is this checkout)."""

from __future__ import annotations

import os
import subprocess

import launchpad as lp


def host_address() -> str:
    """This host's (network namespace's) first address."""
    return subprocess.run(["hostname", "-I"], capture_output=True, text=True,
                          check=True).stdout.split()[0]


class Adder:
    """Serves additions, and says where it runs."""

    def add(self, a: int, b: int) -> int:
        return a + b

    def host(self) -> str:
        return host_address()


def add_and_stop(adder) -> None:
    """Calls the adder on another pod, says what it got and where each runs, and stops the
    program."""
    print(f"client got {adder.add(2, 3)} from the adder", flush=True)
    print(f"adder on {adder.host()}, client on {host_address()}", flush=True)
    lp.stop()


def fail() -> None:
    raise RuntimeError("boom in a pod")


def fail_first_time(marker: str, adder) -> None:
    """Fails the first time it runs (no `marker` file yet), then works and stops the
    program: a node that needs one restart."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("first run fails")
    print(f"second run got {adder.add(1, 1)}", flush=True)
    lp.stop()


def adder_and_client(name: str = "adder_client") -> lp.Program:
    program = lp.Program(name)
    adder = program.add_node(lp.CourierNode(Adder), label="adder")
    program.add_node(lp.PyNode(add_and_stop, adder), label="client")
    return program


def adder_and_failing(name: str = "failing") -> lp.Program:
    program = lp.Program(name)
    program.add_node(lp.CourierNode(Adder), label="adder")
    program.add_node(lp.PyNode(fail), label="bad")
    return program


def adder_and_flaky(marker: str) -> lp.Program:
    program = lp.Program("flaky")
    adder = program.add_node(lp.CourierNode(Adder), label="adder")
    with program.group("flaky", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.0)):
        program.add_node(lp.PyNode(fail_first_time, marker, adder))
    return program


def call_then_wait(adder) -> None:
    """Calls the adder (so its pod is up), says so, and waits for the program to stop."""
    adder.add(0, 0)
    print("the adder answered", flush=True)
    lp.wait_for_stop()


def adder_and_waiter() -> lp.Program:
    program = lp.Program("waiting")
    adder = program.add_node(lp.CourierNode(Adder), label="adder")
    program.add_node(lp.PyNode(call_then_wait, adder), label="waiter")
    return program
