"""`CacherNode`: serves cached results of another node's methods.

The classic use: many actors read the learner's variables through a cacher instead of the
learner, so the learner answers one refresh per interval instead of one call per actor.

A call `cacher.method(*args)` is answered from the cache when it holds a result of that method
with those arguments; the first such call asks the source and waits. Every result in the cache
is refreshed in the background every `refresh_interval_ms`. A result older than
`stale_after_ms` (the source stopped answering) is never served: the call asks the source
itself and, if that fails too, raises `StaleDataError`.
"""

from __future__ import annotations

import pickle
import threading
import time
from typing import Any

from absl import logging

from launchpad import context
from launchpad.nodes import handles
from launchpad.nodes.courier import node as courier
from launchpad.nodes.errors import StaleDataError


class _Cache:
    """The object a CacherNode serves: every public method name is forwarded to the source."""

    def __init__(self, source: Any, refresh_interval_ms: float, stale_after_ms: float):
        self._source = source
        self._refresh_every = refresh_interval_ms / 1000
        self._stale_after = stale_after_ms / 1000
        self._lock = threading.Lock()
        self._entries: dict[tuple, tuple[Any, float]] = {}  # key -> (result, fetched at)
        self._calls: dict[tuple, tuple[str, tuple, dict]] = {}
        self._stopped = threading.Event()
        context.current().add_stop_handler(self._stopped.set)
        threading.Thread(target=self._refresh_forever, name="lp-cacher", daemon=True).start()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "run":  # `run` is a node's main loop, not data
            raise AttributeError(name)
        return lambda *args, **kwargs: self._get(name, args, kwargs)

    def _get(self, name: str, args: tuple, kwargs: dict) -> Any:
        key = (name, pickle.dumps((args, sorted(kwargs.items()))))
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and time.monotonic() - entry[1] <= self._stale_after:
            return entry[0]
        try:
            return self._fetch(key, name, args, kwargs)
        except Exception as e:
            if entry is None:
                raise
            raise StaleDataError(
                f"The cached result of {name!r} is {time.monotonic() - entry[1]:.3f}s old, "
                f"over stale_after_ms={self._stale_after * 1000:g}, and the source cannot "
                f"refresh it: {type(e).__name__}: {e}") from e

    def _fetch(self, key: tuple, name: str, args: tuple, kwargs: dict) -> Any:
        result = getattr(self._source, name)(*args, **kwargs)
        with self._lock:
            self._entries[key] = (result, time.monotonic())
            self._calls[key] = (name, args, kwargs)
        return result

    def _refresh_forever(self) -> None:
        while not self._stopped.wait(self._refresh_every):
            with self._lock:
                calls = list(self._calls.items())
            for key, (name, args, kwargs) in calls:
                try:
                    self._fetch(key, name, args, kwargs)
                except Exception as e:  # noqa: BLE001 - the entry ages; callers learn of it
                    logging.warning("Cacher could not refresh %r: %s: %s", name,
                                    type(e).__name__, e)


class CacherNode(courier.CourierNode):
    """Serves cached results of `source`'s methods (see the module doc).

    Args:
      source: the handle of the node whose methods are cached.
      refresh_interval_ms: how often every cached result is fetched again.
      stale_after_ms: results older than this are never served.
    """

    def __init__(self, source: handles.Handle, refresh_interval_ms: float, stale_after_ms: float,
                 **courier_kwargs: Any):
        if not isinstance(source, handles.Handle):
            raise TypeError(f"CacherNode caches a node: pass its handle, got {source!r}")
        if refresh_interval_ms <= 0 or stale_after_ms <= 0:
            raise ValueError("refresh_interval_ms and stale_after_ms must be positive, got "
                             f"{refresh_interval_ms} and {stale_after_ms}")
        if stale_after_ms < refresh_interval_ms:
            raise ValueError(f"stale_after_ms={stale_after_ms} is shorter than "
                             f"refresh_interval_ms={refresh_interval_ms}: every result would "
                             "go stale before its refresh")
        super().__init__(_Cache, source, refresh_interval_ms, stale_after_ms, **courier_kwargs)
        self._refresh_interval_ms = refresh_interval_ms

    def default_label(self) -> str:
        return "cacher"

    def runs(self) -> str:
        return f"refreshed every {self._refresh_interval_ms:g} ms"
