"""What a courier server serves of its object: its public methods, found by name per call.

Public means a callable attribute whose name does not start with an underscore, and
`__call__` of a callable object; `LIST_METHODS` asks a server for the list. A method that
returns a `concurrent.futures.Future` is answered when the future completes; a batched
handler (batching.py) offers such a method as its `__courier_submit__`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from launchpad.courier import errors

LIST_METHODS = "__list_methods__"


def public_methods(obj: Any) -> list[str]:
    """Names a courier server serves for `obj`: public callables, and `__call__` if defined."""
    names = [n for n in dir(obj) if not n.startswith("_") and _is_method(obj, n)]
    if callable(obj) and not isinstance(obj, type):
        names.append("__call__")
    return sorted(names)


def method_of(obj: Any, name: str, server: str) -> Callable[..., Any]:
    """The method a call of `name` runs on `obj` (a batched handler's submit).

    Raises:
      UnknownMethodError: `obj` serves no method `name` (the error calls it `server`).
    """
    if name == LIST_METHODS:
        return lambda: public_methods(obj)
    method = None
    if not name.startswith("_") or name == "__call__":
        method = getattr(obj, name, None)
    if not callable(method):
        raise errors.UnknownMethodError(name, public_methods(obj), server)
    return getattr(method, "__courier_submit__", method)


def _is_method(obj: Any, name: str) -> bool:
    # getattr_static does not run properties, so listing methods has no side effects.
    attr = inspect.getattr_static(obj, name, None)
    if isinstance(attr, (staticmethod, classmethod)):
        return True
    return callable(attr) and not isinstance(attr, property)
