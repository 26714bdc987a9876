"""Programs the Kubernetes tests build manifests of and run in pods (importable by the pods,
whose image is this checkout)."""

from __future__ import annotations

import os
import subprocess
import threading

import launchpad as lp
from launchpad import context


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


class CountsThenFails:
    """Counts to 3, waits for that state to be saved, and fails; run again (its pod re-run
    by its Job), it prints the count it was given back and stops the program."""

    def __init__(self):
        self._count = 0
        self._restored = None
        self._saves_of_three = 0
        self._saved = threading.Event()

    def run(self) -> None:
        if self._restored is not None:
            print(f"restored {self._restored}", flush=True)
            lp.stop()
            return
        self._count = 3
        if not self._saved.wait(30):
            raise RuntimeError("the count was never saved")
        raise RuntimeError("failing after the save")

    def save_state(self):
        # Saves are made one after another: a second save of the count means the first is
        # written.
        self._saves_of_three += self._count == 3
        if self._saves_of_three == 2:
            self._saved.set()
        return self._count

    def restore_state(self, state) -> None:
        self._restored = state


def stateful() -> lp.Program:
    program = lp.Program("stateful")
    with program.group("counter", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.0),
                       state=lp.StatePolicy(every_secs=0.1)):
        program.add_node(lp.CourierNode(CountsThenFails))
    return program


class CountsThenStops:
    """Counts to 7 and stops its program (its state is saved at the stop); started from a
    state, it first prints it."""

    def __init__(self):
        self._count = 0
        self._restored = None

    def run(self) -> None:
        if self._restored is not None:
            print(f"resumed at {self._restored}", flush=True)
        self._count = 7
        lp.stop()
        lp.wait_for_stop()

    def save_state(self):
        return self._count

    def restore_state(self, state) -> None:
        self._restored = state


def resumable(label: str = "counter") -> lp.Program:
    program = lp.Program("resumable")
    with program.group(label, state=lp.StatePolicy(every_secs=60)):
        program.add_node(lp.CourierNode(CountsThenStops))
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


class Greeter:
    """A worker: says its index and the greeting it was made with."""

    def __init__(self, greeting: str):
        self._greeting = greeting

    def greet(self) -> str:
        return f"{self._greeting} from {context.current().index}"


class Watcher:
    """Follows the greeters' group: prints its members and their greetings at each change
    (its pod's log is what the test reads), until the program stops."""

    def __init__(self, greeters):
        self._greeters = greeters

    def run(self) -> None:
        said = None
        while not lp.wait_for_stop(0.1):
            try:
                saying = (self._greeters.names, sorted(self._greeters.call.greet()))
            except lp.courier.GroupCallError:
                continue  # a member left mid-call: asked again
            if saying != said:
                print(f"watcher sees {saying[0]} saying {saying[1]}", flush=True)
                said = saying


def greeters(count: int = 2, greeting: str = "hello") -> lp.Program:
    """A group of greeters and a watcher of it (tests/launch/kubernetes/test_changes.py)."""
    program = lp.Program("greeters")
    with program.group("greeter"):
        for _ in range(count):
            program.add_node(lp.CourierNode(Greeter, greeting))
    program.add_node(lp.CourierNode(Watcher, program.group_handle("greeter")),
                     label="watcher")
    return program


class Counter:
    """Counts the calls to `next()` (its state, saved often); says where it runs."""

    def __init__(self):
        self._count = 0
        self._saves: list[int] = []

    def next(self) -> int:
        self._count += 1
        return self._count

    def saved(self) -> int | None:
        """The count surely written: saves are made one after another, so a count saved
        twice was written once at least."""
        last = self._saves[-2:]
        return last[0] if len(last) == 2 and last[0] == last[1] else None

    def where(self) -> tuple[str, int]:
        return host_address(), self._count

    def save_state(self) -> int:
        self._saves.append(self._count)
        return self._count

    def restore_state(self, state: int) -> None:
        self._count = state


def count_then_follow(counter) -> None:
    """Counts to 5, waits for that count to be saved, says so, then prints where the counter
    runs and its count at each change until the program stops."""
    for _ in range(5):
        counter.next()
    while counter.saved() != 5:
        lp.wait_for_stop(0.1)
    print("counted to 5, saved", flush=True)
    said = None
    while not lp.wait_for_stop(0.2):
        try:
            where = counter.where()
        except Exception:  # noqa: BLE001 - its node lost or restarting: asked again
            continue
        if where != said:
            print(f"counter at {where[1]} on {where[0]}", flush=True)
            said = where


def counter_and_caller(archive: bool = False) -> lp.Program:
    """A stateful counter that its group restarts, and a node calling it (test_changes.py's
    lost pod); with `archive`, a second stateful group, of one Counter."""
    program = lp.Program("lost")
    with program.group("counter", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.0),
                       state=lp.StatePolicy(every_secs=0.1)):
        counter = program.add_node(lp.CourierNode(
            Counter, courier_client_kwargs={"call_timeout": 2}))
    program.add_node(lp.PyNode(count_then_follow, counter), label="caller")
    if archive:
        with program.group("archive", state=lp.StatePolicy(every_secs=60)):
            program.add_node(lp.CourierNode(Counter))
    return program
