"""Launchpad's `lazy_loader` (Launchpad's path): `LazyImports`, whose scope's imports
Launchpad's `__init__` deferred to their first use.

Kept so that code written with it runs: here the imports in its scope happen at once (the
same names, bound the same way; only not deferred). Launchpad's own package needs no such
machinery here: `import launchpad` imports neither TensorFlow nor Reverb by its own imports.
"""

from __future__ import annotations

import types
from typing import Any


class LazyImports:
    """A `with` block whose imports Launchpad made lazy; here they are made at once.

    Args:
      parent: the name of the module doing the imports.
      add_to_globals: Launchpad's: whether the names were put in the module's globals (the
        `from` imports of the block do so here in any case).
    """

    def __init__(self, parent: str, add_to_globals: bool = True):
        self._parent = parent
        self._add_to_globals = add_to_globals

    def __enter__(self) -> LazyImports:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: types.TracebackType | None) -> None:
        return None
