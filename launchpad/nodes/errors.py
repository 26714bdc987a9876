"""Errors of the node layer, defined once."""


class ColocationError(RuntimeError):
    """A node inside a colocation failed; its exception is the `__cause__`."""


class StaleDataError(RuntimeError):
    """A cacher holds only data older than its `stale_after_ms`, and cannot refresh it."""


class Interrupted(BaseException):
    """Raised in a thread by a `ThreadInterrupt` (thread_interrupt.py): a BaseException, so
    that a loop's `except Exception:` does not swallow it."""


class UncomparableNodeError(ValueError):
    """A node whose arguments cannot be pickled, even for a digest (nodes/fingerprint.py)."""
