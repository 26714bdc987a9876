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

import concurrent.futures
import contextlib
import threading
from collections.abc import Callable

from launchpad.launch.runtime import ending
from launchpad.launch.runtime.controller.node_book import NodeBook, kind_of
from launchpad.launch.runtime.controller.registry import AddressRegistry, NodeKey
from launchpad.launch.runtime.controller.supervisor import Supervisor
from launchpad.program import Program

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
        self._registry = registry
        self._supervisor = supervisor
        self._book = book
        self._grace = grace_secs
        self._lock = threading.Lock()
        self._futures_lock = threading.Lock()
        self._followers_caught_up = threading.Condition(self._futures_lock)
        self._caught_up: dict[str, int] = {}  # followers of each group told its last size
        self._retired: dict[NodeKey, concurrent.futures.Future] = {}
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
                "be scaled while it runs (local_mt and local_mp can)")
        if group[0].companion_nodes():
            raise ValueError(f"Group {label!r} is the tasks of one replicated node; its size "
                             "is its cluster spec's")
        with self._lock:
            current = len(self._program.groups[label])
            if count > current:
                return self._grow(label, count - current)
            return self._shrink(label, current - count)

    def _grow(self, label: str, more: int) -> list[str]:
        template = self._program.groups[label][0]
        made = [template.replica() for _ in range(more)]  # all made before any is added
        for node in made:
            self._program.add_node(node, label)
            unit = (node.label, node.index)
            self._registry.add_unit(unit, [(inner.label, inner.index)
                                           for inner in node.all_nodes()])
            self._book.add(unit, kind_of(node))
            self._supervisor.add_unit(unit)
        try:
            self.start_nodes(made)
        except BaseException:
            self._forget([(node.label, node.index) for node in reversed(made)])
            raise
        self._announce(label, len(self._program.groups[label]))
        return [node.name for node in made]

    def _shrink(self, label: str, fewer: int) -> list[str]:
        group = self._program.groups[label]
        units = [(label, index) for index in reversed(range(len(group) - fewer, len(group)))]
        self._await_followers(label, self._announce(label, len(group) - fewer))
        workers = []
        for unit in units:
            worker = self._supervisor.retire(unit)
            with self._futures_lock:
                retired = self._retired.setdefault(unit, concurrent.futures.Future())
            retired.set_result(None)
            if worker is not None:
                worker.retire()
                workers.append(worker)
        ending.end_workers(workers, self._grace, "(its group shrank)")
        for unit in units:  # its end is through the supervisor's books before it is forgotten
            self._supervisor.wait_for_unit(unit, ending.KILL_AFTER_TERMINATE_SECS)
        self._forget(units)
        names = [f"{label}/{index}" for label, index in units]
        self.nodes_removed(names)
        return names

    def _forget(self, units: list[NodeKey]) -> None:
        """The group's highest `units` (highest first) are no more, anywhere."""
        for unit in units:
            self._supervisor.forget_unit(unit)
            self._registry.remove_unit(unit)
            self._book.remove(unit)
            self._program.pop_node(unit[0])
            with self._futures_lock:
                self._retired.pop(unit, None)


def _settle(future: concurrent.futures.Future, result: object) -> None:
    """Sets `future`'s result unless it has one (two events may race to settle it)."""
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        future.set_result(result)
