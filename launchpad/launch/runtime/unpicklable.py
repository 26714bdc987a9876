"""Where in a value pickling fails: the path to the innermost part that does not pickle.

`TypeError: cannot pickle '_thread.lock' object` says what failed but not where: a node's
arguments can be deep (a config holding an agent holding a replay client holding a lock). When
a node does not pickle, `find` walks down from the value, into whichever part does not pickle
on its own, until none of the part's own parts fails: that part is the culprit, and the steps
taken are its path (`.replay.lock`, `['optimizer']`, `[2]`, `<closure lock>`). It pickles
each part it looks at, so it is only for the error's message, not for the way to success.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

import cloudpickle

_MAX_DEPTH = 12
_MAX_PARTS = 1000  # the parts of one value looked at (a long list is not walked to its end)


def find(value: Any) -> tuple[str, Any]:
    """(the path from `value` to the innermost part of it that does not pickle, that part);
    ('', value) when no part of it fails on its own (it is the culprit itself)."""
    path = ""
    for _ in range(_MAX_DEPTH):
        failing = next(((step, part) for step, part in _parts(value) if not pickles(part)),
                       None)
        if failing is None:
            break
        step, value = failing
        path += step
    return path, value


def pickles(value: Any) -> bool:
    """Whether `value` pickles (with cloudpickle, as a node does)."""
    try:
        cloudpickle.dumps(value)
    except Exception:  # noqa: BLE001 - whatever pickling raises, it does not pickle
        return False
    return True


def _parts(value: Any) -> Iterator[tuple[str, Any]]:
    """The parts of `value` pickling goes into, each with the step that reaches it."""
    if isinstance(value, dict):
        items: Any = ((f"[{key!r}]", part) for key, part in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"[{position}]", part) for position, part in enumerate(value))
    elif isinstance(value, types.FunctionType):
        items = _function_parts(value)
    elif isinstance(value, (type, types.ModuleType)) or not hasattr(value, "__dict__"):
        return
    else:
        items = ((f".{name}", part) for name, part in vars(value).items())
    for count, item in enumerate(items):
        if count == _MAX_PARTS:
            return
        yield item


def _function_parts(function: types.FunctionType) -> Iterator[tuple[str, Any]]:
    """What a function pickled by value carries: the variables it closes over, and the
    globals its code names."""
    code = function.__code__
    for name, cell in zip(code.co_freevars, function.__closure__ or (), strict=True):
        try:
            yield f"<closure {name}>", cell.cell_contents
        except ValueError:  # an empty cell
            continue
    for name in code.co_names:
        if name in function.__globals__:
            yield f"<global {name}>", function.__globals__[name]
