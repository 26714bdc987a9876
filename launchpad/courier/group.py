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


class _Member:
    """A member of a group: its client, its name, and what the group counts of it."""

    __slots__ = ("client", "name", "in_flight", "broadcast_errors", "gone_until")

    def __init__(self, client: Client, name: str):
        self.client = client
        self.name = name
        self.in_flight = 0
        self.broadcast_errors = 0
        self.gone_until = 0.0  # monotonic time: chosen last until then


class GroupClient:
    """One client for the courier servers of a group (see the module doc).

    Its members may change while it is used (`change_members`: a group of a running program
    that grows or shrinks); each call addresses the members of the moment it starts.

    Args:
      clients: a client of each member, in member order.
      names: what errors and logs call each member (default: its address).
    """

    def __init__(self, clients: Sequence[Client], names: Sequence[str] | None = None):
        self._lock = threading.Lock()
        self._members = _members_of(clients, names, {})
        self._next_choice = itertools.count()  # ties of choose go round the members
        self._senders: DaemonThreadPool | None = None
        self._on_change: list[Callable[[list[str]], None]] = []

    def __len__(self) -> int:
        return len(self._members)

    def __getitem__(self, index: int | slice) -> Client | GroupClient:
        """A member's client, or a sub-group (its own group: its own calls in flight)."""
        members = self._members
        if isinstance(index, slice):
            return GroupClient([m.client for m in members[index]],
                               [m.name for m in members[index]])
        return members[index].client

    @property
    def names(self) -> list[str]:
        return [member.name for member in self._members]

    def change_members(self, clients: Sequence[Client], names: Sequence[str]) -> None:
        """Makes the group these members (its group grew or shrank). Members kept (by name)
        keep their counts; the clients of members removed are closed, so that a call still
        in flight to one fails, naming it. Then each `on_change` callback gets the names."""
        with self._lock:
            kept = {member.name: member for member in self._members}
            self._members = _members_of(clients, names, kept)
            removed = [m for name, m in kept.items() if name not in set(names)]
            callbacks = list(self._on_change)
        unused = [client for client, name in zip(clients, names, strict=True)
                  if name in kept and kept[name].client is not client]
        for member in removed:
            member.client._close(f"{member.name} left the group (its group shrank) with the "
                                 "call in flight")
        for client in unused:
            client._close()
        for callback in callbacks:
            callback(list(names))

    def on_change(self, callback: Callable[[list[str]], None]) -> None:
        """Calls `callback(names)` whenever the members change."""
        with self._lock:
            self._on_change.append(callback)

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
            return {member.name: member.broadcast_errors for member in self._members}

    def close(self) -> None:
        """Closes every member's client; calls in flight fail."""
        for member in self._members:
            member.client._close()
        if self._senders is not None:
            self._senders.shutdown(wait=False)

    # --- the views' calls -------------------------------------------------------------------

    def _submit(self, member: _Member, method: str, parts: list, counted: bool = False,
                started: list[in_flight.StartedCall] | None = None) -> concurrent.futures.Future:
        """Starts a call on `member`, counted in flight until it lands (`counted`: it is
        already, by the choice that picked the member). With `started`, a call whose reply
        this thread can read itself is added there (in_flight.read_replies)."""
        if not counted:
            with self._lock:
                member.in_flight += 1
        client = member.client
        call = client._start_parts(method, parts) if started is not None else None
        if call is not None:
            started.append(call)
            future = call.future
        else:
            future = client._submit_parts(method, parts)
        future.add_done_callback(lambda done: self._landed(member, done))
        return future

    def _landed(self, member: _Member, future: concurrent.futures.Future) -> None:
        gone = (not future.cancelled()
                and isinstance(future.exception(), ServerUnavailableError))
        with self._lock:
            member.in_flight -= 1
            if gone:
                _mark_gone(member)

    def _submit_all(self, method: str, parts: list) -> list[concurrent.futures.Future]:
        return [self._submit(member, method, parts) for member in self._members]

    def _pickle_once(self, method: str, args: tuple, kwargs: dict) -> list:
        """The arguments of a call to every member, pickled once; large buffers are also
        copied once into shared memory when members share this host (lanes.share)."""
        parts = serialization.dumps_call_arguments(method, args, kwargs)
        if len(parts) > 1 and self._members_share_this_host():
            return lanes.share(parts)
        return parts

    def _members_share_this_host(self) -> bool:
        """Whether two or more members are on this host (as last resolved)."""
        here = (member for member in self._members
                if lanes.is_same_host(member.client.address))
        return next(here, None) is not None and next(here, None) is not None

    def _call(self, method: str, args: tuple, kwargs: dict, timeout: float | None) -> list:
        members = self._members
        parts = self._pickle_once(method, args, kwargs)
        return self._call_each(method, members, [parts] * len(members), timeout)

    def _scatter(self, method: str, args: tuple, kwargs: dict, timeout: float | None) -> list:
        members = self._members
        if (len(args) != 1 or not isinstance(args[0], Sequence)
                or len(args[0]) != len(members)):
            raise ValueError(f"scatter.{method} takes one list of {len(members)} arguments, "
                             f"the i-th for member i (a tuple: its positional arguments)")
        return self._call_each(method, members, [serialization.dumps_call_arguments(
            method, given if isinstance(given, tuple) else (given,), kwargs)
            for given in args[0]], timeout)

    def _call_each(self, method: str, members: tuple[_Member, ...], parts: list[list],
                   timeout: float | None) -> list:
        """Member i called with parts[i]: every message sent, then the replies read by
        this thread as they come (those it can read: in_flight.read_replies), each waited
        for at most `timeout` seconds from now."""
        deadline = None if timeout is None else time.monotonic() + timeout
        started: list[in_flight.StartedCall] = []
        futures = [self._submit(member, method, member_parts, started=started)
                   for member, member_parts in zip(members, parts, strict=True)]
        in_flight.read_replies(started, deadline)
        return self._gather(method, members, futures, deadline, timeout)

    def _gather(self, method: str, members: tuple[_Member, ...],
                futures: list[concurrent.futures.Future],
                deadline: float | None, timeout: float | None) -> list:
        """Each member's result, waiting for each until `deadline` (time.monotonic())."""
        results: list[Any] = []
        for member, future in zip(members, futures, strict=True):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                results.append(future.result(left))
            except concurrent.futures.TimeoutError:
                future.cancel()  # (the member may still run it)
                with self._lock:
                    _mark_gone(member)
                results.append(CallTimeoutError(
                    f"Deadline Exceeded: {method!r} on member {member.name} did not "
                    f"complete within timeout={timeout}s"))
            except Exception as e:  # noqa: BLE001 - kept as that member's result
                results.append(e)
        failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
        if failed:
            raise GroupCallError(method, results, [members[i].name for i in failed])
        return results

    def _broadcast(self, method: str, args: tuple, kwargs: dict,
                   timeout: float | None) -> None:
        parts = self._pickle_once(method, args, kwargs)
        with self._lock:
            if self._senders is None:
                self._senders = DaemonThreadPool(_BROADCAST_THREADS, "courier-broadcast")
            senders = self._senders
        for member in self._members:
            senders.submit(self._send_broadcast, member, method, parts)

    def _send_broadcast(self, member: _Member, method: str, parts: list) -> None:
        try:
            future = self._submit(member, method, parts)
        except Exception as e:  # noqa: BLE001 - counted as the member's failure
            self._broadcast_failed(member, method, e)
            return
        future.add_done_callback(lambda done: done.cancelled() or done.exception() is None
                                 or self._broadcast_failed(member, method, done.exception()))

    def _broadcast_failed(self, member: _Member, method: str, error: BaseException) -> None:
        with self._lock:
            member.broadcast_errors += 1
            first = member.broadcast_errors == 1
        if first:  # once per member: a member that is gone would fill the log
            logging.warning("Courier broadcast of %r to %s failed (counted, logged once): "
                            "%s: %s", method, member.name, type(error).__name__, error)

    def _choose(self, method: str, args: tuple, kwargs: dict, timeout: float | None) -> Any:
        parts = serialization.dumps_call_arguments(method, args, kwargs)
        deadline = None if timeout is None else time.monotonic() + timeout
        members = self._members
        gone: set[int] = set()
        while True:
            index = self._pick_least_loaded(members, gone)
            member = members[index]
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            future = self._submit(member, method, parts, counted=True)
            try:
                return future.result(left)
            except concurrent.futures.TimeoutError:
                future.cancel()  # no longer counted in flight (the member may still run it)
                with self._lock:
                    _mark_gone(member)
                raise CallTimeoutError(
                    f"Deadline Exceeded: {method!r} on member {member.name} did not "
                    f"complete within timeout={timeout}s") from None
            except ServerUnavailableError:
                gone.add(index)
                if len(gone) == len(members) and (deadline is None
                                                  or time.monotonic() >= deadline):
                    raise
                if len(gone) == len(members):
                    gone.clear()  # every one gone: look again, while time is left

    def _pick_least_loaded(self, members: tuple[_Member, ...], gone: set[int]) -> int:
        """The index of the member with the fewest calls in flight (ties: the next one
        round; members found gone lately last), counted in flight at once, so that
        concurrent choices spread."""
        start = next(self._next_choice)
        order = [(start + i) % len(members) for i in range(len(members))]
        now = time.monotonic()
        with self._lock:
            index = min((i for i in order if i not in gone),
                        key=lambda i: (members[i].gone_until > now, members[i].in_flight))
            members[index].in_flight += 1
            return index


def _members_of(clients: Sequence[Client], names: Sequence[str] | None,
                kept: dict[str, _Member]) -> tuple[_Member, ...]:
    """The members of these clients, in order (those named in `kept` are kept as they are).

    Raises:
      TypeError: no clients, or something other than courier Clients.
      ValueError: as many names as clients are needed.
    """
    clients = list(clients)
    if not clients or not all(isinstance(c, Client) for c in clients):
        raise TypeError(f"A GroupClient needs one or more courier Clients, got {clients!r}")
    if names is not None and len(names) != len(clients):
        raise ValueError(f"{len(names)} names for {len(clients)} members")
    names = list(names) if names is not None else [c.address for c in clients]
    return tuple(kept.get(name) or _Member(client, name)
                 for client, name in zip(clients, names, strict=True))


def _mark_gone(member: _Member) -> None:
    """Leaves `member` last in `choose` for a while (called holding the group's lock)."""
    member.gone_until = time.monotonic() + UNAVAILABLE_SECS


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
