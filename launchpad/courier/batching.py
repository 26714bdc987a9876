"""`batched_handler`: serve many concurrent single calls with one call on a stacked batch.

    class Policy:
        @lp.batched_handler(batch_size=8)
        def act(self, observation):          # observation has a leading axis of 8
            return self._net(observation)     # so does the result; each caller gets its row

Calls are collected until `batch_size` have arrived or `timeout` has passed since the first,
then the function runs once (in one of `max_parallelism` threads) on arguments stacked leaf by
leaf (numpy arrays gain a leading axis; tuples, lists, namedtuples and dicts are walked), and the
result is split back along its leading axis. A courier server receives a Future for each call
(`__courier_submit__`), so waiting for a batch never holds a server thread: no deadlock, however
few threads the server has. Called directly (not over courier), a batched method blocks.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import datetime
import functools
import threading
from collections.abc import Callable
from typing import Any

from launchpad.courier._process.threads import DaemonThreadPool


def batched_handler(batch_size: int, max_parallelism: int = 1,
                    timeout: datetime.timedelta | float = datetime.timedelta(milliseconds=200),
                    pad_batch: bool = False) -> Callable[[Callable], "BatchedFunction"]:
    """Decorates a function or method so concurrent calls are served as one batch.

    Args:
      batch_size: how many calls make a batch.
      max_parallelism: how many batches may run at once.
      timeout: how long the first call of a batch waits for the batch to fill (timedelta or
        seconds); then the batch runs with fewer items.
      pad_batch: pad a partial batch to `batch_size` by repeating its last item (for functions
        compiled for one batch shape); the padded results are dropped.
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if not isinstance(max_parallelism, int) or max_parallelism < 1:
        raise ValueError(f"max_parallelism must be a positive int, got {max_parallelism!r}")
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
    if not isinstance(seconds, (int, float)) or seconds < 0:
        raise ValueError(f"timeout must be a non-negative timedelta or seconds, got {timeout!r}")
    return lambda fn: BatchedFunction(fn, batch_size, max_parallelism, float(seconds), pad_batch)


class BatchedFunction:
    """What `batched_handler` returns: callable as a function, bound per instance as a method."""

    def __init__(self, fn: Callable, batch_size: int, max_parallelism: int, timeout: float,
                 pad_batch: bool):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._options = (batch_size, max_parallelism, timeout, pad_batch)
        self._unbound: _Batcher | None = None
        self._lock = threading.Lock()

    def __set_name__(self, owner, name):
        self._attribute = f"_batched_handler_{name}"

    def __getstate__(self) -> dict:
        # A class pickled by value (defined in __main__) carries its batched methods: what
        # travels is the function and its options, never batches in progress here.
        return {**self.__dict__, "_unbound": None, "_lock": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        batcher = instance.__dict__.get(self._attribute)
        if batcher is None:
            with self._lock:
                batcher = instance.__dict__.setdefault(
                    self._attribute, _Batcher(self._fn.__get__(instance), *self._options))
        return batcher

    def _batcher(self) -> "_Batcher":
        with self._lock:
            if self._unbound is None:
                self._unbound = _Batcher(self._fn, *self._options)
            return self._unbound

    def __call__(self, *args, **kwargs) -> Any:
        return self._batcher()(*args, **kwargs)

    def __courier_submit__(self, *args, **kwargs) -> concurrent.futures.Future:
        return self._batcher().__courier_submit__(*args, **kwargs)


class _Batcher:
    """Collects calls into batches for one function (or one instance's method)."""

    def __init__(self, fn: Callable, batch_size: int, max_parallelism: int, timeout: float,
                 pad_batch: bool):
        self._fn = fn
        self._name = getattr(fn, "__qualname__", repr(fn))
        self._batch_size = batch_size
        self._timeout = timeout
        self._pad_batch = pad_batch
        self._lock = threading.Lock()
        self._items: list = []
        self._generation = 0
        self._pool = DaemonThreadPool(max_parallelism, thread_name_prefix="courier-batch")

    def __call__(self, *args, **kwargs) -> Any:
        return self.__courier_submit__(*args, **kwargs).result()

    def __courier_submit__(self, *args, **kwargs) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            self._items.append((args, kwargs, future))
            if len(self._items) >= self._batch_size:
                batch = self._take()
            else:
                batch = None
                if len(self._items) == 1:
                    self._start_timer(self._generation)
        if batch:
            self._pool.submit(contextvars.copy_context().run, self._run, batch)
        return future

    def _take(self) -> list:
        batch, self._items = self._items, []
        self._generation += 1
        return batch

    def _start_timer(self, generation: int) -> None:
        context = contextvars.copy_context()
        timer = threading.Timer(self._timeout, context.run, (self._flush, generation))
        timer.daemon = True
        timer.start()

    def _flush(self, generation: int) -> None:
        with self._lock:
            if generation != self._generation or not self._items:
                return  # that batch filled up and ran already
            batch = self._take()
        self._pool.submit(contextvars.copy_context().run, self._run, batch)

    def _run(self, batch: list) -> None:
        futures = [future for _, _, future in batch]
        items = [(args, kwargs) for args, kwargs, _ in batch]
        if self._pad_batch and len(items) < self._batch_size:
            items += [items[-1]] * (self._batch_size - len(items))
        try:
            args = stack([a for a, _ in items])
            kwargs = stack([k for _, k in items])
            result = self._fn(*args, **kwargs)
            rows = unstack(result, len(items), self._name)
        except BaseException as e:  # noqa: BLE001 - every caller of the batch gets the error
            for future in futures:
                future.set_exception(e)
            return
        for future, row in zip(futures, rows, strict=False):  # padded rows are dropped
            future.set_result(row)


def stack(structures: list) -> Any:
    """Stacks structurally identical values leaf by leaf: leaves become arrays with a new axis."""
    first = structures[0]
    if isinstance(first, dict):
        return type(first)((k, stack([s[k] for s in structures])) for k in first)
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(stack(list(leaves)) for leaves in zip(*structures, strict=True)))
    if isinstance(first, (tuple, list)):
        return type(first)(stack(list(leaves)) for leaves in zip(*structures, strict=True))
    if first is None:
        return None
    import numpy as np  # here: a node that never batches need not import it (~40 ms)
    return np.stack([np.asarray(s) for s in structures])


def unstack(structure: Any, size: int, name: str) -> list:
    """Splits a batched result along the leading axis of each leaf into `size` results."""
    if isinstance(structure, dict):
        columns = {k: unstack(v, size, name) for k, v in structure.items()}
        return [type(structure)((k, columns[k][i]) for k in structure) for i in range(size)]
    if isinstance(structure, tuple) and hasattr(structure, "_fields"):
        columns = [unstack(v, size, name) for v in structure]
        return [type(structure)(*(c[i] for c in columns)) for i in range(size)]
    if isinstance(structure, (tuple, list)):
        columns = [unstack(v, size, name) for v in structure]
        return [type(structure)(c[i] for c in columns) for i in range(size)]
    if structure is None:
        return [None] * size
    if not hasattr(structure, "__len__") or len(structure) != size:
        raise ValueError(
            f"Batched handler {name!r} must return arrays with a leading batch axis of size "
            f"{size}; got a leaf {type(structure).__name__} "
            f"of length {len(structure) if hasattr(structure, '__len__') else 'none'}")
    return [structure[i] for i in range(size)]
