"""How many times this process was forked from its ancestors (0 in the first one).

An object made before a fork is copied into the child with the rest of the process, and some
must not be used there: a stream or a direct call to a server of this process would reach the
child's copy of the server, which serves nobody. Such an object keeps `count()` from when it
was made and compares it when used (an integer, so the check costs nothing on the hot path).
"""

from __future__ import annotations

import os

_count = [0]


def _forked() -> None:
    _count[0] += 1


os.register_at_fork(after_in_child=_forked)


def count() -> int:
    """How many forks made this process (see the module doc)."""
    return _count[0]
