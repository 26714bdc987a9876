"""What a node is made of, as a digest that two processes compare: has this node changed?

    fingerprint(node) -> 'sha256 hex' of
        its type                          (as below, a class)
        its constructor's arguments       (Node.replica's: what it was made with)
          handles                         -> the names of their nodes ('learner/0')
          a group handle that follows its -> its group's label (its members are whoever
          group                              the group holds: its size is no change)
          functions, classes of the       -> their name and code (not their module: a
          user's code                        launch script's is `__main__`): bytecode,
                                             constants, names (not line numbers: a line
                                             added above them changes nothing), defaults,
                                             closures, the module globals it reads that
                                             are constants or the user's functions and
                                             classes; a class's own functions and bases
          functions, classes elsewhere    -> their module and name (an installed package's,
          (the standard library, installed   the standard library's: the same in both)
          packages, launchpad)
          anything else                   -> as pickle writes it (numbers, strings, arrays,
                                             dataclasses: their class as above)

`Controller.apply` compares the running program's nodes with a new program's by it: a node
whose digest differs is replaced. Both are computed where the code was loaded (the running
program's by its controller, from the objects it launched; the new one's where it was built):
a function pickled by reference would otherwise be compared with itself.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import sysconfig
import types
from typing import Any

import cloudpickle

from launchpad.nodes.errors import UncomparableNodeError
from launchpad.nodes.group import GroupHandle
from launchpad.nodes.handles import Handle

_PACKAGE_ROOTS = tuple(os.path.realpath(path) + os.sep for path in {
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"],
    sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
_LAUNCHPAD = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep


def fingerprint(node: Any, known: dict[int, str] | None = None) -> str:
    """The digest of what `node` is made of (see the module doc). `known`: the digests of
    functions and classes met already (by id), shared by the nodes of one program, which
    are mostly made of the same code.

    Raises:
      UncomparableNodeError: something among its arguments cannot be pickled.
    """
    buffer = io.BytesIO()
    try:
        args, kwargs = node._made_with
        _Digester(buffer, set(), {} if known is None else known).dump(
            (type(node), args, sorted(kwargs.items())))
    except Exception as e:  # noqa: BLE001 - whatever pickling raised, said with the node
        raise UncomparableNodeError(f"{node!r} cannot be compared: its arguments do not "
                                    f"pickle ({type(e).__name__}: {e})") from e
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def fingerprints(nodes: list) -> dict[str, str]:
    """Each node's fingerprint, by name ('' where its arguments do not pickle: it compares
    as changed)."""
    found, known = {}, {}
    for node in nodes:
        try:
            found[node.name] = fingerprint(node, known)
        except UncomparableNodeError:
            found[node.name] = ""
    return found


class _Digester(cloudpickle.Pickler):
    """A pickler whose output is only hashed, never loaded (see the module doc)."""

    def __init__(self, file: io.BytesIO, visiting: set[int], known: dict[int, str]):
        super().__init__(file)
        self._visiting = visiting  # the code being digested
        self._known = known

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Handle):
            return str, (f"handle of {obj.node_name}",)
        if isinstance(obj, GroupHandle) and obj.follows is not None:
            return str, (f"handle of group {obj.follows}",)
        if isinstance(obj, (types.FunctionType, type)) and _is_users(obj.__module__):
            return str, (self._code_of(obj),)
        return NotImplemented  # (elsewhere's functions and classes: by reference)

    def _code_of(self, obj: types.FunctionType | type) -> str:
        """The digest of a user's function or class (a function that calls itself, or
        classes that name each other, are named where they recur)."""
        name = obj.__qualname__  # (not its module: a launch script's is __main__ there)
        if id(obj) in self._visiting:
            return f"recurring {name}"
        if id(obj) in self._known:
            return self._known[id(obj)]
        self._visiting.add(id(obj))
        try:
            if isinstance(obj, type):
                own = sorted((key, _member_functions(value)) for key, value in vars(obj).items()
                             if isinstance(value, (types.FunctionType, staticmethod,
                                                   classmethod, property)))
                parts = ("class", name, obj.__bases__, own)
            else:
                closure = tuple(cell.cell_contents for cell in obj.__closure__ or ()
                                if _has_contents(cell))
                parts = ("function", name, _code_digest(obj.__code__), obj.__defaults__,
                         obj.__kwdefaults__, closure, _globals_used(obj))
            buffer = io.BytesIO()
            _Digester(buffer, self._visiting, self._known).dump(parts)
            digest = f"{name} {hashlib.sha256(buffer.getvalue()).hexdigest()}"
            if not self._visiting - {id(obj)}:  # (one made inside a recursion is partial)
                self._known[id(obj)] = digest
            return digest
        finally:
            self._visiting.discard(id(obj))


_PLAIN = (bool, int, float, complex, str, bytes, type(None))


def _globals_used(function: types.FunctionType) -> list[tuple[str, Any]]:
    """The module globals `function`'s code reads that are part of what it does: plain
    constants (STEP = 10), and the user's functions and classes (digested in turn)."""
    names = set()
    codes = [function.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    used = []
    for name in sorted(names):
        value = function.__globals__.get(name)
        if _is_plain(value) or (isinstance(value, (types.FunctionType, type))
                                and _is_users(value.__module__)):
            used.append((name, value))
    return used


def _is_plain(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_is_plain(item) for item in value)
    return isinstance(value, _PLAIN)


def _member_functions(value: Any) -> Any:
    """A class member's functions: a function, or those a descriptor wraps (each digested
    by the pickler, with what it uses)."""
    if isinstance(value, (staticmethod, classmethod)):
        return value.__func__
    if isinstance(value, property):
        return (value.fget, value.fset, value.fdel)
    return value


def _code_digest(code: types.CodeType) -> str:
    """The digest of what `code` does: bytecode, constants (nested code objects by their
    digest), names and arguments; not its file nor its line numbers."""
    constants = tuple(_code_digest(c) if isinstance(c, types.CodeType) else repr(c)
                      for c in code.co_consts)
    parts = (code.co_code, constants, code.co_names, code.co_varnames, code.co_freevars,
             code.co_argcount, code.co_kwonlyargcount, code.co_flags)
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _has_contents(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _is_users(module_name: str | None) -> bool:
    """Whether a module is the user's code: not the standard library's, an installed
    package's, nor launchpad's."""
    module = sys.modules.get(module_name or "")
    path = getattr(module, "__file__", None)
    if module_name == "__main__":
        return True
    if path is None:
        return False  # built in
    path = os.path.realpath(path)
    return not path.startswith(_PACKAGE_ROOTS) and not path.startswith(_LAUNCHPAD)


def users_modules() -> list[str]:
    """The names of the loaded modules that are the user's code (see `_is_users`), but the
    script itself (`__main__`, whose code cloudpickle always pickles by value)."""
    return [name for name, module in list(sys.modules.items())
            if name != "__main__" and module is not None and _is_users(name)]
