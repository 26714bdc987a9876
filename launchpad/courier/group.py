"""Calls to a group of courier servers at once: `GroupClient`.

    group.call.m(*args, **kwargs)          every member's result, in member order
    group.futures.m(*args, **kwargs)       a Future per member, in member order
    group.broadcast.m(*args, **kwargs)     fire and forget: returns at once
    group.choose.m(*args, **kwargs)        one member's result: the least loaded one's
    group.scatter.m([args_0, args_1, ...]) member i called with args_i; results in order
    group.call(timeout=5).m(...)           the same, with a deadline per member (any view)
    group[3], group[0:8], len(group)       a member's client, a sub-group, the size

A call to N members pickles its arguments once and puts N messages on their way, each on its
member's own connection, before it waits for any reply, not N round trips. The calling
thread sends them itself and waits on all the members' sockets at once, reading each reply
as it comes (in_flight.read_replies): no thread is woken per member. (Members reached by
gRPC, or in this process, or not yet reached, are called as futures.) Its large buffers
are copied once into shared memory, which every member on this host reads
(lanes.share), not once per member.

`call` and `scatter` raise `GroupCallError` if any member failed, holding every member's
result or exception (`e.results`). `broadcast` never waits: its messages are sent by a few
threads of the group's, so a member that is slow, or gone and being reconnected to, holds up
no other; its failures are counted (`broadcast_errors`) and logged once per member.
`choose` calls the member with the fewest of this group's calls in flight; one that is gone
(`ServerUnavailableError`) is left for another, within the timeout, and is chosen last for
`UNAVAILABLE_SECS` after any call of the group found it gone or missed its deadline (a member
killed while idle may only show as that: a transport that waits for a restarting server waits
until the deadline). A member that is restarting is waited for as its own client waits (its
connect_timeout).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from absl import logging

from launchpad.courier._connection import in_flight
from launchpad.courier._process.threads import DaemonThreadPool
from launchpad.courier._shared_memory import lanes
from launchpad.courier._wire import serialization
from launchpad.courier.client import Client
from launchpad.courier.errors import CallTimeoutError, GroupCallError, ServerUnavailableError

_BROADCAST_THREADS = 4  # senders of broadcasts: a member being reconnected to holds one
UNAVAILABLE_SECS = 5.0  # a member found gone, or late, is chosen last for this long


class GroupClient:
    """One client for the courier servers of a group (see the module doc).

    Args:
      clients: a client of each member, in member order.
      names: what errors and logs call each member (default: its address).
    """

    def __init__(self, clients: Sequence[Client], names: Sequence[str] | None = None):
        clients = list(clients)
        if not clients or not all(isinstance(c, Client) for c in clients):
            raise TypeError(f"A GroupClient needs one or more courier Clients, got {clients!r}")
        if names is not None and len(names) != len(clients):
            raise ValueError(f"{len(names)} names for {len(clients)} members")
        self._clients = clients
        self._names = list(names) if names is not None else [c.address for c in clients]
        self._lock = threading.Lock()
        self._in_flight = [0] * len(clients)
        self._next_choice = itertools.count()  # ties of choose go round the members
        self._broadcast_errors = [0] * len(clients)
        self._gone_until = [0.0] * len(clients)  # monotonic time: chosen last until then
        self._senders: DaemonThreadPool | None = None

    def __len__(self) -> int:
        return len(self._clients)

    def __getitem__(self, index: int | slice) -> Client | GroupClient:
        """A member's client, or a sub-group (its own group: its own calls in flight)."""
        if isinstance(index, slice):
            return GroupClient(self._clients[index], self._names[index])
        return self._clients[index]

    @property
    def names(self) -> list[str]:
        return list(self._names)

    @property
    def call(self) -> _View:
        return _View(self, self._call)

    @property
    def futures(self) -> _View:
        return _View(self, lambda method, args, kwargs, timeout: self._submit_all(
            method, self._pickle_once(method, args, kwargs)))

    @property
    def broadcast(self) -> _View:
        return _View(self, self._broadcast)

    @property
    def choose(self) -> _View:
        return _View(self, self._choose)

    @property
    def scatter(self) -> _View:
        return _View(self, self._scatter)

    def broadcast_errors(self) -> dict[str, int]:
        """Member name -> how many of its broadcast calls failed."""
        with self._lock:
            return dict(zip(self._names, self._broadcast_errors, strict=True))

    def close(self) -> None:
        """Closes every member's client; calls in flight fail."""
        for client in self._clients:
            client._close()
        if self._senders is not None:
            self._senders.shutdown(wait=False)

    # --- the views' calls -------------------------------------------------------------------

    def _submit(self, member: int, method: str, parts: list, counted: bool = False,
                started: list[in_flight.StartedCall] | None = None) -> concurrent.futures.Future:
        """Starts a call on `member`, counted in flight until it lands (`counted`: it is
        already, by the choice that picked the member). With `started`, a call whose reply
        this thread can read itself is added there (in_flight.read_replies)."""
        if not counted:
            with self._lock:
                self._in_flight[member] += 1
        client = self._clients[member]
        call = client._start_parts(method, parts) if started is not None else None
        if call is not None:
            started.append(call)
            future = call.future
        else:
            future = client._submit_parts(method, parts)
        future.add_done_callback(lambda done: self._landed(member, done))
        return future

    def _landed(self, member: int, future: concurrent.futures.Future) -> None:
        gone = (not future.cancelled()
                and isinstance(future.exception(), ServerUnavailableError))
        with self._lock:
            self._in_flight[member] -= 1
            if gone:
                self._mark_gone(member)

    def _mark_gone(self, member: int) -> None:
        """Leaves `member` last in `choose` for a while (called holding the lock)."""
        self._gone_until[member] = time.monotonic() + UNAVAILABLE_SECS

    def _submit_all(self, method: str, parts: list) -> list[concurrent.futures.Future]:
        return [self._submit(member, method, parts) for member in range(len(self))]

    def _pickle_once(self, method: str, args: tuple, kwargs: dict) -> list:
        """The arguments of a call to every member, pickled once; large buffers are also
        copied once into shared memory when members share this host (lanes.share)."""
        parts = serialization.dumps_call_arguments(method, args, kwargs)
        if len(parts) > 1 and self._members_share_this_host():
            return lanes.share(parts)
        return parts

    def _members_share_this_host(self) -> bool:
        """Whether two or more members are on this host (as last resolved)."""
        here = (client for client in self._clients
                if lanes.is_same_host(client.address))
        return next(here, None) is not None and next(here, None) is not None

    def _call(self, method: str, args: tuple, kwargs: dict, timeout: float | None) -> list:
        parts = self._pickle_once(method, args, kwargs)
        return self._call_each(method, [parts] * len(self), timeout)

    def _scatter(self, method: str, args: tuple, kwargs: dict, timeout: float | None) -> list:
        if len(args) != 1 or not isinstance(args[0], Sequence) or len(args[0]) != len(self):
            raise ValueError(f"scatter.{method} takes one list of {len(self)} arguments, the "
                             f"i-th for member i (a tuple: its positional arguments)")
        return self._call_each(method, [serialization.dumps_call_arguments(
            method, given if isinstance(given, tuple) else (given,), kwargs)
            for given in args[0]], timeout)

    def _call_each(self, method: str, parts: list[list], timeout: float | None) -> list:
        """Member i called with parts[i]: every message sent, then the replies read by
        this thread as they come (those it can read: in_flight.read_replies), each waited
        for at most `timeout` seconds from now."""
        deadline = None if timeout is None else time.monotonic() + timeout
        started: list[in_flight.StartedCall] = []
        futures = [self._submit(member, method, parts[member], started=started)
                   for member in range(len(self))]
        in_flight.read_replies(started, deadline)
        return self._gather(method, futures, deadline, timeout)

    def _gather(self, method: str, futures: list[concurrent.futures.Future],
                deadline: float | None, timeout: float | None) -> list:
        """Each member's result, waiting for each until `deadline` (time.monotonic())."""
        results: list[Any] = []
        for member, future in enumerate(futures):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                results.append(future.result(left))
            except concurrent.futures.TimeoutError:
                future.cancel()  # (the member may still run it)
                with self._lock:
                    self._mark_gone(member)
                results.append(CallTimeoutError(
                    f"Deadline Exceeded: {method!r} on member {self._names[member]} did not "
                    f"complete within timeout={timeout}s"))
            except Exception as e:  # noqa: BLE001 - kept as that member's result
                results.append(e)
        failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
        if failed:
            raise GroupCallError(method, results, [self._names[i] for i in failed])
        return results

    def _broadcast(self, method: str, args: tuple, kwargs: dict,
                   timeout: float | None) -> None:
        parts = self._pickle_once(method, args, kwargs)
        with self._lock:
            if self._senders is None:
                self._senders = DaemonThreadPool(_BROADCAST_THREADS, "courier-broadcast")
            senders = self._senders
        for member in range(len(self)):
            senders.submit(self._send_broadcast, member, method, parts)

    def _send_broadcast(self, member: int, method: str, parts: list) -> None:
        try:
            future = self._submit(member, method, parts)
        except Exception as e:  # noqa: BLE001 - counted as the member's failure
            self._broadcast_failed(member, method, e)
            return
        future.add_done_callback(lambda done: done.cancelled() or done.exception() is None
                                 or self._broadcast_failed(member, method, done.exception()))

    def _broadcast_failed(self, member: int, method: str, error: BaseException) -> None:
        with self._lock:
            self._broadcast_errors[member] += 1
            first = self._broadcast_errors[member] == 1
        if first:  # once per member: a member that is gone would fill the log
            logging.warning("Courier broadcast of %r to %s failed (counted, logged once): "
                            "%s: %s", method, self._names[member], type(error).__name__, error)

    def _choose(self, method: str, args: tuple, kwargs: dict, timeout: float | None) -> Any:
        parts = serialization.dumps_call_arguments(method, args, kwargs)
        deadline = None if timeout is None else time.monotonic() + timeout
        gone: set[int] = set()
        while True:
            member = self._pick_least_loaded(gone)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            future = self._submit(member, method, parts, counted=True)
            try:
                return future.result(left)
            except concurrent.futures.TimeoutError:
                future.cancel()  # no longer counted in flight (the member may still run it)
                with self._lock:
                    self._mark_gone(member)
                raise CallTimeoutError(
                    f"Deadline Exceeded: {method!r} on member {self._names[member]} did not "
                    f"complete within timeout={timeout}s") from None
            except ServerUnavailableError:
                gone.add(member)
                if len(gone) == len(self) and (deadline is None
                                               or time.monotonic() >= deadline):
                    raise
                if len(gone) == len(self):
                    gone.clear()  # every one gone: look again, while time is left

    def _pick_least_loaded(self, gone: set[int]) -> int:
        """The member with the fewest calls in flight (ties: the next one round; members
        found gone lately last), counted in flight at once, so that concurrent choices
        spread."""
        start = next(self._next_choice)
        order = [(start + i) % len(self) for i in range(len(self))]
        now = time.monotonic()
        with self._lock:
            member = min((m for m in order if m not in gone),
                         key=lambda m: (self._gone_until[m] > now, self._in_flight[m]))
            self._in_flight[member] += 1
            return member


class _View:
    """`view.method(*args, **kwargs)` makes a group call of `method`; `view(timeout=...)`
    gives the same view with a deadline per member."""

    def __init__(self, group: GroupClient,
                 make: Callable[[str, tuple, dict, float | None], Any],
                 timeout: float | None = None):
        self._group = group
        self._make = make
        self._timeout = timeout

    def __call__(self, *, timeout: float | None = None) -> _View:
        if timeout is not None and not timeout >= 0:
            raise ValueError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
        return _View(self._group, self._make, timeout)

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)
        return lambda *args, **kwargs: self._make(method, args, kwargs, self._timeout)
