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
from collections.abc import Sequence
from typing import Any

from launchpad.launch.runtime import code_sources
from launchpad.launch.runtime.errors import NodeSerializationError


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
    except Exception as e:
        remedy = ("pass serialize_py_nodes=False to lp.launch to run them as threads "
                  "without pickling" if threads else "they must pickle to run in a process")
        raise NodeSerializationError(
            f"{type(e).__name__}: {e}\nThe nodes associated to the label {label!r} were not "
            f"serializable with cloudpickle (node {name}): make their functions, classes "
            f"and arguments picklable (lp.Deferred builds an argument in the node), or "
            f"{remedy}") from e


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
