"""Blocking calls to a server of this process, made straight into it: no message, no stream.

A client whose connection reached its server in this process (in_process.py) makes a
blocking call without a deadline here: on the calling thread, into the server's `run_here`, which
runs it as a stream's call runs (in the server's context and call slots, counted, waited for
by a stop). What is skipped is only what a copy does not need: framing the message, the
stream, a future, and the pickling of values that cannot be changed (numbers, strings,
bytes, None, and tuples of them), which a copy could not tell from the original. Everything
else is copied as between processes: arguments and results are pickled and unpickled (their
arrays copied once, and read-only, as received ones are), and an exception comes back as the
wire would bring it, rebuilt with the server's traceback as its cause.

A server that is stopping, a token it does not accept, or a connection made before this
process was forked (its server is the parent's: here only a copy of it, which must not
answer) sends the call the usual way (`NOT_HERE`), which waits for a restarted server,
reaches the parent's through a socket, or fails as on any transport.
"""

from __future__ import annotations

from typing import Any, Protocol

from launchpad.courier._in_process import forks
from launchpad.courier._serving import replies
from launchpad.courier._wire import serialization
from launchpad.courier._wire.serialization import Frame, Kind

NOT_HERE = object()  # what `call` returns when the call must go the usual way
_UNCHANGEABLE = frozenset({int, float, bool, complex, str, bytes, type(None)})


class Target(Protocol):
    """What a server of this process offers its direct calls (_serving/dispatcher.py
    implements it)."""

    def accepts_token(self, token: str) -> bool: ...

    def serving(self) -> bool: ...

    def run_here(self, name: str, args: tuple, kwargs: dict) -> Any: ...


class DirectCalls:
    """The direct calls of one connection to `target` with `token` (see the module doc)."""

    def __init__(self, target: Target, token: str):
        self._target = target
        self._admitted = target.accepts_token(token)
        self._forks = forks.count()  # a fork since: the target is a copy

    def call(self, method: str, args: tuple, kwargs: dict) -> Any:
        """The call's result (a copy), or NOT_HERE; raises what the call raised (a copy).

        Raises:
          SerializationError: an argument (named) or the result cannot be pickled.
        """
        if not (self._admitted and self._forks == forks.count() and self._target.serving()):
            return NOT_HERE
        if not _unchangeable_arguments(args, kwargs):
            arguments = serialization.dumps_call_arguments(method, args, kwargs)
            args, kwargs = replies.load_arguments(_frame(Kind.CALL, method, arguments))
        try:
            result = self._target.run_here(method, args, kwargs)
            if _unchangeable(result):
                return result
            parts = replies.pickle_result(method, result)
        except BaseException as e:  # noqa: BLE001 - raised as the wire would bring it back
            error = serialization.load_exception(
                _frame(Kind.ERROR, method, serialization.dumps_exception(e)))
        else:
            return _frame(Kind.RESULT, method, parts).load()
        raise error  # (out of the handler: no context the wire would not bring)


def _unchangeable_arguments(args: tuple, kwargs: dict) -> bool:
    """Whether no argument can change (the common case first: numbers and strings)."""
    for value in args:
        if type(value) not in _UNCHANGEABLE and not _unchangeable(value):
            return False
    return not kwargs or all(map(_unchangeable, kwargs.values()))


def _unchangeable(value: Any, depth: int = 0) -> bool:
    """Whether `value` cannot change, so that it is its own copy (tuples two levels deep)."""
    kind = type(value)
    if kind in _UNCHANGEABLE:
        return True
    return kind is tuple and depth < 2 and all(_unchangeable(v, depth + 1) for v in value)


def _frame(kind: Kind, method: str, parts: list) -> Frame:
    """Pickled parts as a received frame holds them: each buffer copied, read-only."""
    return Frame(kind, 0, method, memoryview(parts[0]),
                 [memoryview(bytes(part)) for part in parts[1:]])
