"""Groups that grow and shrink while their program runs: `Controller.scale(label, count)`.

    grow:   node = group[0].replica()     the group's own node made again: its constructor,
            program.add_node(node, label)  its arguments, its handles (the same edges)
            registry, book, supervisor     know the new unit before it runs
            start_nodes([node, ...])       its launcher starts it as it started the others;
                                           where it cannot (no room), all of it is undone
    shrink: the group handles that follow it are told first, and have let the members go
            (a call in flight to one fails, naming it) before they are stopped; then from
            the highest index down: supervisor.retire (its end is a finish, whatever
            it is), its stop future set (a process's runner waits on it: `wait_for_stop`
            of that node) and worker.retire() (a thread's context), then ending.end_workers:
            the grace period, SIGTERM, SIGKILL; then it is forgotten everywhere, and its
            launcher frees what it held (`nodes_removed`)

A launcher that can start nodes of a running program gives `start_nodes` (local_mt and
local_mp do); elsewhere `scale` refuses, naming the launch type.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable

from launchpad import telemetry
from launchpad.launch.runtime import ending
from launchpad.launch.runtime.controller.node_book import NodeBook, kind_of
from launchpad.launch.runtime.controller.registry import AddressRegistry, NodeKey
from launchpad.launch.runtime.controller.supervisor import Supervisor
from launchpad.nodes import fingerprint
from launchpad.program import Program

# How many of the program's latest changes its status shows.
KEPT_CHANGES = 100
# The launchers that start nodes of a running program.
CHANGEABLE = "local_mt, local_mp, slurm, ray and kubernetes (with allow_changes)"
# How long a shrink waits for the group handles that follow the group to let its removed
# members go before it stops them (a follower in a node that is gone never says it did).
FOLLOWERS_TIMEOUT_SECS = 5.0


class GroupScaling:
    """See the module doc; one change at a time."""

    def __init__(self, program: Program, registry: AddressRegistry, supervisor: Supervisor,
                 book: NodeBook, grace_secs: float):
        # Set by a launcher that can start nodes of a running program: they start the new
        # nodes (raising, before any starts, if they cannot) and free what removed ones held.
        self.start_nodes: Callable[[list], None] | None = None
        self.nodes_removed: Callable[[list[str]], None] = lambda names: None
        self._program = program
        # Each node's fingerprint as it was launched (or applied): what `apply` compares a
        # new program with, computed from now (beside the launch, which it does not delay),
        # before the code the nodes were made of can change (a module reloaded).
        self._fingerprints: concurrent.futures.Future = concurrent.futures.Future()
        threading.Thread(target=lambda: self._fingerprints.set_result(
            fingerprint.fingerprints(program.get_all_nodes())), daemon=True,
            name=f"lp-fingerprints-{program.name}").start()
        self._registry = registry
        self._supervisor = supervisor
        self._book = book
        self._grace = grace_secs
        self._lock = threading.Lock()
        self._futures_lock = threading.Lock()
        self._followers_caught_up = threading.Condition(self._futures_lock)
        self._caught_up: dict[str, int] = {}  # followers of each group told its last size
        self._retired: dict[NodeKey, concurrent.futures.Future] = {}
        self._changes: collections.deque[telemetry.Change] = collections.deque(
            maxlen=KEPT_CHANGES)  # what `status` shows
        self._sizes: dict[str, int] = {}  # each group's size as last announced
        self._size_waiters: dict[str, list[concurrent.futures.Future]] = {}

    def stop_future(self, unit: NodeKey,
                    program_stop: concurrent.futures.Future) -> concurrent.futures.Future:
        """Set when `unit` is retired or `program_stop` is (what a node's runner waits on)."""
        with self._futures_lock:
            retired = self._retired.setdefault(unit, concurrent.futures.Future())
        either: concurrent.futures.Future = concurrent.futures.Future()

        program_stop.add_done_callback(lambda _: _settle(either, None))
        retired.add_done_callback(lambda _: _settle(either, None))
        return either

    def size_future(self, label: str, known: int,
                    program_stop: concurrent.futures.Future) -> concurrent.futures.Future:
        """Set to group `label`'s size once it is not `known` (at once if it is not now), or
        to -1 once `program_stop` is: what a group handle that follows its group waits on."""
        waiter: concurrent.futures.Future = concurrent.futures.Future()
        with self._futures_lock:
            size = self._sizes.get(label, len(self._program.groups.get(label, [])))
            if size == known:
                self._size_waiters.setdefault(label, []).append(waiter)
                self._caught_up[label] = self._caught_up.get(label, 0) + 1
                self._followers_caught_up.notify_all()
            else:
                waiter.set_result(size)
        program_stop.add_done_callback(lambda _: _settle(waiter, -1))
        return waiter

    def _announce(self, label: str, size: int) -> int:
        """Tells the group handles that follow `label` that it has `size` members now;
        returns how many were told."""
        with self._futures_lock:
            self._sizes[label] = size
            waiters = self._size_waiters.pop(label, [])
            self._caught_up[label] = 0
        for waiter in waiters:
            _settle(waiter, size)
        return len(waiters)

    def _await_followers(self, label: str, told: int) -> None:
        """Waits until `told` followers of `label` have changed their members (each then
        waits for the next change), for at most FOLLOWERS_TIMEOUT_SECS (one may be gone)."""
        with self._followers_caught_up:
            self._followers_caught_up.wait_for(
                lambda: self._caught_up.get(label, 0) >= told, FOLLOWERS_TIMEOUT_SECS)

    def scale(self, label: str, count: int, launch_type: str) -> list[str]:
        """Makes group `label` `count` nodes; returns the names of the nodes added or
        removed (see Controller.scale)."""
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"A group is scaled to 1 node or more, got count={count!r}")
        group = self._program.groups.get(label)
        if not group:
            raise ValueError(f"Program {self._program.name!r} has no group {label!r}; its "
                             f"groups are {', '.join(sorted(self._program.groups))}")
        if self.start_nodes is None:
            raise NotImplementedError(
                f"Groups of a program launched with {launch_type or 'this launcher'} cannot "
                f"be scaled while it runs ({CHANGEABLE} can)")
        if group[0].companion_nodes():
            raise ValueError(f"Group {label!r} is the tasks of one replicated node; its size "
                             "is its cluster spec's")
        with self.lock:
            current = len(self._program.groups[label])
            if count == current:
                return []
            changed = (self._grow(label, count - current) if count > current
                       else self._shrink(label, current - count))
            self.record(f"group {label!r}: {current} -> {count} nodes "
                        f"({'added' if count > current else 'removed'} {', '.join(changed)})")
            return changed

    def record(self, what: str) -> None:
        """Keeps `what` changed now, for the program's status (the last KEPT_CHANGES)."""
        self._changes.append(telemetry.Change(time.time(), what))

    def changes(self) -> list[telemetry.Change]:
        return list(self._changes)

    def _grow(self, label: str, more: int) -> list[str]:
        template = self._program.groups[label][0]
        made = [template.replica() for _ in range(more)]  # all made before any is added
        self.add(label, made, [self.fingerprints[template.name]] * more)
        return [node.name for node in made]

    def _shrink(self, label: str, fewer: int) -> list[str]:
        group = self._program.groups[label]
        units = [(label, index) for index in reversed(range(len(group) - fewer, len(group)))]
        self.remove(units, "(its group shrank)")
        return [f"{label}/{index}" for label, index in units]

    @property
    def fingerprints(self) -> dict[str, str]:
        """Each running node's fingerprint (nodes/fingerprint.py), by name."""
        return self._fingerprints.result()

    @property
    def lock(self) -> threading.Lock:
        """Held while the program changes (one change at a time: scale, apply)."""
        return self._lock

    def add(self, label: str, nodes: list, fingerprints: list[str]) -> None:
        """Nodes `nodes`, new, join group `label` (made if new) at its end, and start; where
        their launcher refuses, all of it is undone. Under `lock`."""
        for node in nodes:
            if node.is_added():  # a new program's, which `apply` brings
                self._program.adopt_node(node)
            else:
                self._program.add_node(node, label)
            self._know((node.label, node.index), node)
        try:
            self.start_nodes(nodes)
        except BaseException:
            units = [(node.label, node.index) for node in reversed(nodes)]
            self._forget(units)
            for _ in units:
                self._program.pop_node(label)
            raise
        self.fingerprints.update(zip([node.name for node in nodes], fingerprints, strict=True))
        self._announce(label, len(self._program.groups[label]))

    def adopt_policies(self, label: str, new: Program) -> None:
        """Group `label`, which `new` brings to the running program, takes `new`'s policies:
        its restart policy, in the program and in the supervisor; its state policy, in the
        program, which the controller gives its nodes' states by (`plan` refuses it where
        the run keeps no states). Under `lock`, before the group's nodes are added."""
        self._program.set_restart_policy(label, new.restart_policies.get(label))
        self._supervisor.set_restart_policy(label, new.restart_policies.get(label))
        self._program.set_state_policy(label, new.state_policies.get(label))

    def remove(self, units: list[NodeKey], why: str) -> None:
        """The last nodes of their groups, `units` (highest first), stop gracefully and are
        no more: the group handles that follow their groups let them go first. Under
        `lock`."""
        for label in dict.fromkeys(label for label, _ in units):
            size = len(self._program.groups[label]) - sum(u[0] == label for u in units)
            self._await_followers(label, self._announce(label, size))
        self._end(units, why)
        self._forget(units)
        for label, index in units:
            self._program.pop_node(label)
            self.fingerprints.pop(f"{label}/{index}", None)
        self.nodes_removed([f"{label}/{index}" for label, index in units])

    def replace(self, node, fingerprint_of_node: str) -> None:
        """`node` takes the place of the running node of its label and index: that one
        stops gracefully (a StatePolicy's state saved), then `node` starts (and restores
        it); lookups of its address made meanwhile wait for the new one. Under `lock`."""
        unit = (node.label, node.index)
        self._registry.node_replacing(unit)
        self._end([unit], "(it is replaced)")
        self._forget([unit], replaced=True)
        self.nodes_removed([f"{unit[0]}/{unit[1]}"])
        self._program.replace_node(node)
        self.fingerprints[node.name] = fingerprint_of_node
        self._know(unit, node)
        self.start_nodes([node])

    def _know(self, unit: NodeKey, node) -> None:
        """The registry, book and supervisor learn of `unit` before it runs."""
        self._registry.add_unit(unit, [(inner.label, inner.index)
                                       for inner in node.all_nodes()])
        self._book.add(unit, kind_of(node))
        self._supervisor.add_unit(unit)

    def _end(self, units: list[NodeKey], why: str) -> None:
        """Retires `units` and waits for their ends: their stop future, the grace period,
        SIGTERM, SIGKILL; each end through the supervisor's books."""
        workers = []
        for unit in units:
            worker = self._supervisor.retire(unit)
            with self._futures_lock:
                retired = self._retired.setdefault(unit, concurrent.futures.Future())
            retired.set_result(None)
            if worker is not None:
                worker.retire()
                workers.append(worker)
        ending.end_workers(workers, self._grace, why)
        for unit in units:
            self._supervisor.wait_for_unit(unit, ending.KILL_AFTER_TERMINATE_SECS)

    def _forget(self, units: list[NodeKey], replaced: bool = False) -> None:
        """`units` are no more, anywhere but in the program (and, if they are `replaced`,
        the registry, whose lookups of them wait for the new ones)."""
        for unit in units:
            self._supervisor.forget_unit(unit)
            if not replaced:
                self._registry.remove_unit(unit)
            self._book.remove(unit)
            with self._futures_lock:
                self._retired.pop(unit, None)


def _settle(future: concurrent.futures.Future, result: object) -> None:
    """Sets `future`'s result unless it has one (two events may race to settle it)."""
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        future.set_result(result)
