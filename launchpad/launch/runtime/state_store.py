"""The saved states of a stateful node (lp.StatePolicy): how they are written and read, and
when a node's object is saved (a run's states, and their folder: run_states.py).

    <run's state folder>/<label>.<index>/<seq>.state     save_state()'s value, pickled

A node's object that defines `save_state()` and `restore_state(state)` is, once built and
before its server serves anything, given its latest state: of this run (a restarted node),
else of the run resumed (`lp.launch(..., resume=RUN_ID)`). It is saved every `every_secs`
when its node stops gracefully, and when its run fails while its object can still answer
(before a restart); the last `keep` states stay.

* **Whole or not at all.** A state is written to a temporary file, flushed to disk (fsync),
  then renamed into place: a save cut short (the node killed) leaves the previous states,
  and a reader never meets half a state.
* **Private.** The folders are made and checked as the run folder's are (0700, below safe
  folders: private_files.py); a state file is read only if it is a regular file of this user
  that no one else can write. Nothing is unpickled from a place another user could write.
* **Never beside a handler.** A save waits for the node's courier calls under way to end,
  and calls wait for a save (`guarded`), unless the class sets
  `save_state_concurrently = True`.
* **A failed save is the node's failure**, named, and the previous states are kept: its
  node fails at once (a `run()` under way is interrupted: nodes/thread_interrupt.py).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import threading
import types
import typing
from collections.abc import Callable
from typing import Any

import cloudpickle
from absl import logging

from launchpad import courier
from launchpad.launch.runtime import private_files
from launchpad.launch.runtime.errors import StateError

_STATE_FILE = re.compile(r"^(\d{9})\.state$")


@dataclasses.dataclass(frozen=True)
class StateSpec:
    """Where one node's states go and come from, and how often (what its runner is given)."""

    folder: str  # this run's state folder
    resume_folder: str | None  # the resumed run's, read when this run has none yet
    every_secs: float
    keep: int


@typing.runtime_checkable
class Stateful(typing.Protocol):
    """A node's object that keeps a state of its own (lp.StatePolicy saves and restores it);
    it is not served while it saves, unless it is `SavesConcurrently`."""

    def save_state(self) -> Any:
        """Its state, picklable."""

    def restore_state(self, state: Any) -> None:
        """Takes `state` (what save_state returned) back."""


def is_stateful(instance: Any) -> bool:
    """Whether `instance` saves and restores a state of its own."""
    return isinstance(instance, Stateful)


class NodeState:
    """One node's saved states, and what saves them (see the module doc)."""

    @classmethod
    def of(cls, spec: StateSpec | None, node_name: str) -> NodeState | None:
        """The states of node `node_name` where `spec` says (None: it keeps none)."""
        return None if spec is None else cls(spec, node_name)

    def __init__(self, spec: StateSpec, node_name: str):
        self._spec = spec
        self._name = node_name
        self._subfolder = node_name.replace("/", ".")
        self._lock = _SaveLock()
        self._saving = threading.Lock()  # one save at a time (the period's, the stop's)
        self._instance: Any = None
        self._next_seq = 0
        self._over = threading.Event()  # the node stopped (its last save made), or a save failed
        self.failure: BaseException | None = None  # how a save failed
        self._on_failure: Callable[[], None] | None = None

    @property
    def attached(self) -> bool:
        """Whether a stateful object is attached (and saved)."""
        return self._instance is not None

    def attach(self, instance: Any, node_context: Any) -> None:
        """Restores `instance`'s latest state, then saves it every `every_secs` (a daemon
        thread) and when its node (`node_context`) stops, if it is stateful; else does
        nothing."""
        if not is_stateful(instance):
            return
        self._instance = instance
        folder = self._folder()
        seqs = _seqs(folder)
        self._next_seq = max(seqs, default=-1) + 1
        latest = self._latest(folder, seqs)
        if latest is not None:
            instance.restore_state(latest)
        node_context.add_stop_handler(self._last_save)
        threading.Thread(target=self._save_every_period, args=(node_context.stop_event,),
                         daemon=True, name=f"lp-state-{self._name}").start()

    def wait(self) -> None:
        """Blocks until the node has stopped (its last state saved) or a save failed.

        Raises:
          StateError: a save failed (named), what the node then fails with.
        """
        self._over.wait()
        if self.failure is not None:
            raise self.failure

    def guarded(self, instance: Any) -> Any:
        """What a node's server serves for `instance`: its methods, each waiting for a save
        under way (unless it saves concurrently, or keeps no state)."""
        if self._instance is not instance or _saves_concurrently(instance):
            return instance
        return _Guarded(instance, self._lock)

    def when_save_fails(self, callback: Callable[[], None] | None) -> None:
        """Calls `callback` once a save fails (`failure` set by then), at once if one has;
        it may be called twice. None forgets it. What ends a node's `run()` loop at once
        (nodes/base.py)."""
        self._on_failure = callback  # (then `failure` read: one side sees the other's write)
        if callback is not None and self.failure is not None:
            callback()

    def save_after_failure(self, timeout: float) -> None:
        """Saves the state of a node whose run failed while its object can still answer
        (unless a save failed already), waiting at most `timeout` for calls under way. A
        save that fails now leaves the previous states; the node's failure stays its run's."""
        if self._instance is None or self.failure is not None:
            return
        saver = threading.Thread(target=self._save, daemon=True,
                                 name=f"lp-state-{self._name}-failed")
        saver.start()
        saver.join(timeout)

    def _last_save(self) -> None:
        """A graceful stop's save, after which `wait` returns."""
        if self.failure is None:
            self._save()
        self._over.set()

    def _save_every_period(self, stop_event: threading.Event) -> None:
        while not stop_event.wait(self._spec.every_secs) and self.failure is None:
            self._save()

    def _save(self) -> None:
        """Saves the object's state as the next file, then lets the oldest go; a failure
        (the state, its pickling, the write) is the node's, named."""
        with self._saving:
            try:
                with self._lock.exclusive():
                    state = self._instance.save_state()
                data = cloudpickle.dumps(state)
                folder = self._folder()
                _write_whole(os.path.join(folder, f"{self._next_seq:09d}.state"), data)
            except Exception as e:  # noqa: BLE001 - the node's failure, named
                self.failure = StateError(f"Node {self._name} could not save its state "
                                          f"({type(e).__name__}: {e}); its previous states "
                                          "are kept")
                self.failure.__cause__ = e
                logging.error("%s", self.failure)
                self._over.set()
                if self._on_failure is not None:
                    self._on_failure()
                return
            self._next_seq += 1
            for old in _seqs(folder)[:-self._spec.keep]:
                os.unlink(os.path.join(folder, f"{old:09d}.state"))

    def _folder(self) -> str:
        """This node's folder of this run, made private if new (its run's folder too)."""
        folder = os.path.join(self._spec.folder, self._subfolder)
        for path in (self._spec.folder, folder):
            os.makedirs(path, mode=0o700, exist_ok=True)
            private_files.check_private_dir(path)
        return folder

    def _latest(self, folder: str, seqs: list[int]) -> Any:
        """The latest state of this run, else of the run resumed; None if neither has one."""
        if not seqs and self._spec.resume_folder:
            folder = os.path.join(self._spec.resume_folder, self._subfolder)
            if not os.path.isdir(folder):
                return None
            private_files.check_private_dir(folder)
            seqs = _seqs(folder)
        if not seqs:
            return None
        path = os.path.join(folder, f"{seqs[-1]:09d}.state")
        data = private_files.read_private(path)  # checked before anything is unpickled
        try:
            return cloudpickle.loads(data)
        except Exception as e:
            raise StateError(f"Node {self._name}: its state {path} cannot be read "
                             f"({type(e).__name__}: {e})") from e


@typing.runtime_checkable
class SavesConcurrently(typing.Protocol):
    """A stateful object that says whether it may be served while it saves."""

    save_state_concurrently: bool


def _saves_concurrently(instance: Any) -> bool:
    return isinstance(instance, SavesConcurrently) and instance.save_state_concurrently is True


def _seqs(folder: str) -> list[int]:
    """The sequence numbers of the states in `folder`, oldest first."""
    found = [_STATE_FILE.match(name) for name in os.listdir(folder)]
    return sorted(int(match.group(1)) for match in found if match)


def _write_whole(path: str, data: bytes) -> None:
    """Writes `data` as the private file `path`, whole or not at all (see the module doc)."""
    partial = f"{path}.partial"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    with open(os.open(partial, flags, 0o600), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)
    directory = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash of the host
    finally:
        os.close(directory)


class _SaveLock:
    """Calls share it; a save takes it alone, after the calls under way, before new ones."""

    def __init__(self):
        self._changed = threading.Condition()
        self._calls = 0
        self._saving = False

    def shared(self) -> _Held:
        return _Held(self, exclusive=False)

    def exclusive(self) -> _Held:
        return _Held(self, exclusive=True)

    def acquire(self, exclusive: bool) -> None:
        with self._changed:
            self._changed.wait_for(lambda: not self._saving)
            if exclusive:
                self._saving = True
                self._changed.wait_for(lambda: self._calls == 0)
            else:
                self._calls += 1

    def release(self, exclusive: bool) -> None:
        with self._changed:
            if exclusive:
                self._saving = False
            else:
                self._calls -= 1
            self._changed.notify_all()


class _Held:
    def __init__(self, lock: _SaveLock, exclusive: bool):
        self._lock = lock
        self._exclusive = exclusive

    def __enter__(self) -> None:
        self._lock.acquire(self._exclusive)

    def __exit__(self, *exc: object) -> None:
        self._lock.release(self._exclusive)


class _Guarded(types.SimpleNamespace):
    """`instance`'s public methods, each holding the save lock shared while it runs."""

    def __init__(self, instance: Any, lock: _SaveLock):
        super().__init__(**{name: _holding(getattr(instance, name), lock)
                            for name in courier.public_methods(instance)})


def _holding(method: Any, lock: _SaveLock) -> Any:
    @functools.wraps(method)
    def held(*args: Any, **kwargs: Any) -> Any:
        with lock.shared():
            return method(*args, **kwargs)
    return held
