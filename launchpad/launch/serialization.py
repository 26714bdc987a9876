"""Launchpad's path of the node pickling every launcher uses (runtime/serialization.py)."""

from launchpad.launch.runtime.serialization import (  # noqa: F401 - Launchpad's names
    check_nodes_are_serializable,
    enable_lru_cache_pickling_once,
    pickle_node,
    serialize_functions,
)
