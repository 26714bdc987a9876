"""Pickling nodes for where they run, with an error that names them (Launchpad's path:
launch/serialization.py).

Every launcher that moves a node - into a process, a job step, a pod, or through a pickle
round trip under test_mt - pickles it here: `pickle_node`. A node that cannot be pickled
fails the launch with `NodeSerializationError`, naming its group and node and saying what
to do. Code pickled by value keeps its file and lines (code_sources.py).
`functools.lru_cache` wrappers pickle as a fresh cache around the same function
(`enable_lru_cache_pickling_once`), as in Launchpad.
"""

from __future__ import annotations

import copyreg
import functools
import os
import sys
from collections.abc import Sequence
from typing import Any

import cloudpickle

from launchpad.launch.runtime import code_sources, unpicklable
from launchpad.launch.runtime.errors import NodeSerializationError
from launchpad.nodes import fingerprint
from launchpad.nodes.base import Node


@functools.lru_cache(maxsize=1)
def enable_lru_cache_pickling_once() -> None:
    """Lets `functools.lru_cache` wrappers pickle (as a new cache of the same function)."""
    cache_type = type(functools.lru_cache()(lambda: None))

    def reduce_cache(wrapper: Any) -> tuple:
        return _new_cache, (wrapper.__wrapped__, wrapper.cache_parameters())

    copyreg.pickle(cache_type, reduce_cache)


def _new_cache(function: Any, parameters: dict) -> Any:
    return functools.lru_cache(**parameters)(function)


def pickle_node(node: Any, label: str, name: str, *, threads: bool = False) -> bytes:
    """cloudpickle of `node` (node `name` of group `label`).

    Args:
      threads: the node would otherwise run as a thread (test_mt's check), where
        `serialize_py_nodes=False` lets it run unpickled.

    Raises:
      NodeSerializationError: the node (its function, class or arguments) does not pickle.
    """
    enable_lru_cache_pickling_once()
    try:
        return code_sources.dumps(node)
    except Exception as e:  # noqa: BLE001 - whatever pickling raised, it is named below
        where = "as a thread of a test_mt launch" if threads else "in its own process"
        fix = _what_fails(node)
        if threads:
            fix += (" Or pass serialize_py_nodes=False to lp.launch: test_mt's nodes then "
                    "run as threads unpickled.")
        raise NodeSerializationError(  # (Launchpad's words first: code looks for them)
            f"The nodes associated to the label {label!r} were not serializable with "
            f"cloudpickle: node {name} cannot be pickled to run {where}: {fix}\n"
            f"(pickling said: {type(e).__name__}: {e})") from None


def _what_fails(node: Any) -> str:
    """The part of `node` that does not pickle, by the name its user gave it, and the fix."""
    named = node.named_arguments() if isinstance(node, Node) else []
    what, where, value = next(((what, where, value) for what, where, value in named
                               if not unpicklable.pickles(value)), ("it", "node", node))
    path, culprit = unpicklable.find(value)
    kind = _type_name(culprit)
    inside = f" holds {_a(kind)} at {where}{path}," if path else f" ({where}) is {_a(kind)},"
    said = f"{what}{inside} which cannot be pickled."
    if where == "function":
        return (f"{said} Make {_a(kind)} where the function runs (in it, or in the object it "
                f"builds), not outside it.")
    made_by = value if not path or not isinstance(value, (dict, list, tuple)) else culprit
    return (f"{said} Make it picklable, or let the node make it where it runs: pass "
            f"lp.Deferred({_type_name(made_by)}, ...) in its place, which the node calls "
            f"there.")


def _type_name(value: Any) -> str:
    """The type of `value` as its user knows it: their own class by its name, a standard
    library's with its module (as pickle says it: '_thread.lock', 'socket.socket')."""
    kind = type(value)
    standard = kind.__module__.partition(".")[0] in sys.stdlib_module_names
    return f"{kind.__module__}.{kind.__qualname__}" if standard and \
        kind.__module__ != "builtins" else kind.__qualname__


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


def serialize_functions(data_file_path: str, description: str, functions: Sequence[Any]) -> None:
    """Writes cloudpickle of `functions` (e.g. nodes' `function`s) to `data_file_path`, a
    new file of this user's only (Launchpad's).

    Raises:
      NodeSerializationError: they do not pickle (`description` names them).
    """
    pickled = pickle_node(list(functions), description, description)
    with open(os.open(data_file_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        f.write(pickled)


def check_nodes_are_serializable(label: str, nodes: Sequence[Any]) -> None:
    """Raises NodeSerializationError if a node of group `label` does not pickle."""
    for index, node in enumerate(nodes):
        pickle_node(node, label, f"{label}/{index}", threads=True)


def pickle_program_change(program: Any) -> tuple[bytes, dict[str, str]]:
    """A program's next version, as `apply` sends it to the controller of the running one:
    pickled with the user's code by value (that controller's process has its own, older
    copy of those modules loaded, which may lack what the new code names), and each node's
    fingerprint, computed here, with the new code.

    Raises:
      NodeSerializationError: a node does not pickle (named).
    """
    users = [sys.modules[name] for name in fingerprint.users_modules()]
    for module in users:
        cloudpickle.register_pickle_by_value(module)
    try:
        for node in program.get_all_nodes():
            pickle_node(node, node.label, node.name)  # (one that does not is named)
        return code_sources.dumps(program), fingerprint.fingerprints(program.get_all_nodes())
    finally:
        for module in users:
            cloudpickle.unregister_pickle_by_value(module)
