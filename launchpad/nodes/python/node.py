"""`PyNode` runs a function; `PyClassNode` builds an object and runs its `run()`.

Neither serves anything, so their handles cannot be called. The node is done when the
function (or `run()`) returns; an exception fails the node. The parameters keep Launchpad's
names (`function`, `constructor`), so a keyword argument of the user's own named `fn` or
`cls` reaches the function.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from absl import logging

from launchpad import context
from launchpad.nodes import base, dereference, handles, running


class PyNode(base.Node):
    """Runs `function(*args, **kwargs)` once, with handles in the arguments turned into
    clients."""

    def __init__(self, function: Callable[..., Any], *args, **kwargs):
        super().__init__()
        if not callable(function):
            raise TypeError(f"{type(self).__name__} needs a callable, got {function!r}")
        self._function = function
        self._args = args
        self._kwargs = kwargs

    def create_handle(self) -> handles.Handle:
        return handles.UnservedHandle(self)

    def default_label(self) -> str:
        return getattr(self._function, "__name__", type(self._function).__name__)

    def arguments(self) -> Any:
        return self._args, self._kwargs

    def runs(self) -> str:
        return base.name_of(self._function)

    def named_arguments(self) -> list[tuple[str, str, Any]]:
        try:
            parameters = list(inspect.signature(self._function).parameters.values())
        except (TypeError, ValueError):  # a builtin, or a callable without a signature
            parameters = []
        positional = [p.name for p in parameters if p.kind in (
            p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        named = [(f"its function {self.runs()}", "function", self._function)]
        for position, value in enumerate(self._args):
            what = (f"its argument {positional[position]!r}" if position < len(positional)
                    else f"its argument {position + 1}")
            named.append((what, f"args[{position}]", value))
        named += [(f"its argument {key!r}", f"kwargs[{key!r}]", value)
                  for key, value in self._kwargs.items()]
        return named

    def run(self) -> None:
        args, kwargs = dereference.dereference_all((self._args, self._kwargs))
        self._function(*args, **kwargs)


class PyClassNode(PyNode):
    """Builds `constructor(*args, **kwargs)` in the node's process and calls its `run()` if
    it has one (a PyNode, as in Launchpad, whose function builds and runs the object).

    `disable_run()` skips `run()`; `configure(*args, **kwargs)` sets the constructor
    arguments after the node was added, so nodes can hold each other's handles (cycles).
    """

    def __init__(self, constructor: Callable[..., Any], *args, **kwargs):
        super().__init__(constructor, *args, **kwargs)
        self._should_run = True
        self._instance: Any = None

    @property
    def _constructor(self) -> Callable[..., Any]:  # Launchpad's name
        return self._function

    def configure(self, *args, **kwargs) -> None:
        """Replaces the constructor arguments (use after add_node to build cycles)."""
        self._args = args
        self._kwargs = kwargs

    def _collect_input_handles(self) -> None:
        """Launchpad's, called after its arguments change; ours finds a node's input handles
        in its arguments when asked (`input_handles`), so there is nothing to collect."""

    def disable_run(self) -> None:
        """Do not call the object's `run()`."""
        self._should_run = False

    def enable_run(self) -> None:
        """Call the object's `run()` (the default)."""
        self._should_run = True

    def _construct_instance(self) -> Any:
        """The node's object, built in this process on first use (Launchpad's name); a run
        lets it go when it ends, so the next run (a restart) builds a new one."""
        if self._instance is None:
            args, kwargs = dereference.dereference_all((self._args, self._kwargs))
            self._instance = self._function(*args, **kwargs)
            state = running.running_state()
            if state is not None:  # its group keeps state
                state.attach(self._instance, context.current())
        return self._instance

    def runs_object(self, instance: Any) -> bool:
        return self._should_run and isinstance(instance, running.Runnable)

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "_instance": None}

    def run(self) -> None:
        try:
            instance = self._construct_instance()
            if self.runs_object(instance):
                running.run_keeping_state(instance.run)
            else:
                logging.info("%r: its object has no run() (or disable_run() was called); "
                             "done", self)
        finally:
            self._instance = None
