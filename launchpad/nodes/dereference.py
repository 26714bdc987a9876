"""What a node's arguments stand for, made in the node's own process (Launchpad's path).

A `Dereferenceable` is a placeholder that becomes an object where the node runs: a handle
becomes a client of its node, a `Deferred` the object its constructor returns. Placeholders
may sit anywhere in a node's arguments - in lists, tuples, namedtuples, dicts, sets,
dataclasses, or the arguments of a Deferred - and `dereference_all` replaces each, just
before the node's code runs.
"""

from __future__ import annotations

import abc
import dataclasses
import sys
import threading
from collections.abc import Callable
from typing import Any


class Dereferenceable(abc.ABC):
    """A placeholder that `dereference()` turns into what it stands for."""

    @abc.abstractmethod
    def dereference(self) -> Any:
        """Returns the object this placeholder stands for."""

    def inner_placeholders(self) -> list[Dereferenceable]:
        """The placeholders this one holds and makes itself (a Deferred's arguments, a
        group handle's members), for those who look for every handle a node receives."""
        return []


def maybe_dereference(obj: Any) -> Any:
    """`obj.dereference()` for a placeholder, else `obj` itself."""
    return obj.dereference() if isinstance(obj, Dereferenceable) else obj


class Deferred(Dereferenceable):
    """A constructor call made in the node's process, once, after the placeholders in its
    arguments were made: `lp.Deferred(make_env, seed)` passes `make_env(seed)` to the node,
    so an argument that does not pickle (an environment) need not travel.

    A constructor that raises keeps its exception's type, with a note of where the Deferred
    was made (unless --nolp_catch_deferred_exception).
    """

    def __init__(self, constructor: Callable[..., Any], /, *args, **kwargs):
        if not callable(constructor):
            raise TypeError(f"Deferred needs a callable, got {constructor!r}")
        self._constructor = constructor
        self._args = args
        self._kwargs = kwargs
        caller = sys._getframe(1)  # noqa: SLF001 - where the Deferred was made, for errors
        self._made_at = f"{caller.f_code.co_filename}:{caller.f_lineno}"
        self._built: list = []  # the object, once made
        self._lock = threading.Lock()

    def inner_placeholders(self) -> list[Dereferenceable]:
        return placeholders_in((self._args, self._kwargs))

    def _apply_to_args(self, fn: Callable[[Any], Any]) -> Any:
        """`(args, kwargs)` with `fn(x)` for each placeholder x in them (Launchpad's, which
        code walking a Deferred's handles calls; Launchpad's applied `fn` to every leaf)."""
        return _rebuild((self._args, self._kwargs), fn)

    def dereference(self) -> Any:
        with self._lock:
            if not self._built:
                self._built.append(self._build())
            return self._built[0]

    def _build(self) -> Any:
        args, kwargs = dereference_all((self._args, self._kwargs))
        try:
            return self._constructor(*args, **kwargs)
        except Exception as e:
            from launchpad import flags as lp_flags  # the flags are read only on a failure
            if lp_flags.value("lp_catch_deferred_exception") and hasattr(e, "add_note"):
                e.add_note(f"(raised by the constructor of {self!r}, made at {self._made_at})")
            raise

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_built": [], "_lock": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def __repr__(self) -> str:
        return f"Deferred({getattr(self._constructor, '__qualname__', self._constructor)!r})"


def dereference_all(value: Any) -> Any:
    """Returns `value` with every placeholder in it replaced by what it stands for."""
    return _rebuild(value, lambda leaf: leaf.dereference())


def placeholders_in(value: Any) -> list[Dereferenceable]:
    """Every placeholder `dereference_all(value)` would replace, in order, and those each
    holds itself (its `inner_placeholders`: a Deferred's arguments) after each."""
    found: list[Dereferenceable] = []

    def collect(leaf: Dereferenceable) -> Any:
        found.append(leaf)
        found.extend(leaf.inner_placeholders())
        return leaf

    _rebuild(value, collect)
    return found


def _rebuild(value: Any, leaf: Callable[[Dereferenceable], Any]) -> Any:
    """`value` with `leaf(x)` for each placeholder x in it, in lists, tuples, namedtuples,
    sets, dicts (values) and dataclasses (their init fields)."""
    if isinstance(value, Dereferenceable):
        return leaf(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_rebuild(v, leaf) for v in value))
    if isinstance(value, (list, tuple, set, frozenset)):
        return type(value)(_rebuild(v, leaf) for v in value)
    if isinstance(value, dict):
        rebuilt = {k: _rebuild(v, leaf) for k, v in value.items()}
        if type(value) is dict:
            return rebuilt
        copy = value.copy()  # keeps OrderedDict / defaultdict and their settings
        copy.update(rebuilt)
        return copy
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _rebuild(getattr(value, f.name), leaf)
                   for f in dataclasses.fields(value) if f.init}
        if all(changes[k] is getattr(value, k) for k in changes):
            return value
        return dataclasses.replace(value, **changes)
    return value
