"""`PyNode` runs a function; `PyClassNode` builds an object and runs its `run()`.

Neither serves anything, so their handles cannot be called. The node is done when the
function (or `run()`) returns; an exception fails the node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from launchpad.nodes import base


class PyNode(base.Node):
    """Runs `fn(*args, **kwargs)` once, with handles in the arguments turned into clients."""

    def __init__(self, fn: Callable[..., Any], *args, **kwargs):
        super().__init__()
        if not callable(fn):
            raise TypeError(f"PyNode needs a callable, got {fn!r}")
        self._fn = fn
        self._args = args
        self._kwargs = kwargs

    def create_handle(self) -> base.Handle:
        return base.UnservedHandle(self)

    def default_label(self) -> str:
        return getattr(self._fn, "__name__", type(self._fn).__name__)

    def arguments(self) -> Any:
        return self._args, self._kwargs

    def runs(self) -> str:
        return base.name_of(self._fn)

    def execute(self) -> None:
        self._fn(*base.dereference_all(self._args), **base.dereference_all(self._kwargs))


class PyClassNode(base.Node):
    """Builds `cls(*args, **kwargs)` in the node's process and calls its `run()` if it has one.

    `disable_run()` skips `run()`; `configure(*args, **kwargs)` sets the constructor
    arguments after the node was added, so nodes can hold each other's handles (cycles).
    """

    def __init__(self, cls: Callable[..., Any], *args, **kwargs):
        super().__init__()
        if not callable(cls):
            raise TypeError(f"{type(self).__name__} needs a class or factory, got {cls!r}")
        self._cls = cls
        self._args = args
        self._kwargs = kwargs
        self._should_run = True

    def configure(self, *args, **kwargs) -> None:
        """Replaces the constructor arguments (use after add_node to build cycles)."""
        self._args = args
        self._kwargs = kwargs

    def disable_run(self) -> None:
        """Do not call the object's `run()`."""
        self._should_run = False

    def enable_run(self) -> None:
        """Call the object's `run()` (the default)."""
        self._should_run = True

    def create_handle(self) -> base.Handle:
        return base.UnservedHandle(self)

    def default_label(self) -> str:
        return getattr(self._cls, "__name__", type(self._cls).__name__)

    def arguments(self) -> Any:
        return self._args, self._kwargs

    def runs(self) -> str:
        return base.name_of(self._cls)

    def build(self) -> Any:
        """Constructs the node's object in the current process."""
        return self._cls(*base.dereference_all(self._args), **base.dereference_all(self._kwargs))

    def runs_object(self, instance: Any) -> bool:
        return self._should_run and callable(getattr(instance, "run", None))

    def execute(self) -> None:
        instance = self.build()
        if self.runs_object(instance):
            instance.run()
