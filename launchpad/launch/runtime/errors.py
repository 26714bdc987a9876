"""Errors of the launch layer, defined once."""

from __future__ import annotations

import functools


class LaunchError(Exception):
    """Base class of errors raised by launchers and the controller."""


class DashboardError(LaunchError):
    """A launch's dashboard could not be served (its port is taken)."""


class StateError(LaunchError):
    """A stateful node's state could not be saved or read (lp.StatePolicy), or a resumed
    run's states are not this program's."""


class AgentGoneError(ConnectionError):
    """The node's host agent no longer listens."""


class NodeFailedError(LaunchError, RuntimeError):
    """A node of the program failed; raised by `controller.wait()` (a RuntimeError, as
    Launchpad's was). Made by `node_failure`, it is also an instance of the exception the
    node raised, when there is one (see there).

    Attributes:
      program: the program's name.
      node: 'label/index' of the node that failed first.
      reason: what happened (the exception, or the exit code or signal of its process).
      node_traceback: the node's formatted traceback, when there is one.
    """

    # The exception class of the node that this error is also an instance of (node_failure
    # makes such a subclass); None for this class itself.
    node_exception_type: type[BaseException] | None = None

    def __init__(self, program: str, node: str, reason: str, node_traceback: str = ""):
        message = f"Node {node} of program {program!r} failed: {reason}"
        if node_traceback:
            message += f"\n\nTraceback of node {node}:\n{node_traceback.rstrip()}"
        super().__init__(message)
        self.program = program
        self.node = node
        self.reason = reason
        self.node_traceback = node_traceback

    def __reduce__(self):
        return (_rebuilt, (type(self).node_exception_type, self.program,
                           self.node, self.reason, self.node_traceback))


def node_failure(program: str, node: str, reason: str, node_traceback: str = "",
                 cause: BaseException | None = None) -> NodeFailedError:
    """The NodeFailedError of node `node`, whose exception (when known) is `cause`.

    The error is also an instance of `cause`'s type, so that code that waits for a program
    catches the node's own exception as it would have under Launchpad's thread launchers
    (`except ValueError` catches a node's ValueError); `cause` is its `__cause__`."""
    kind = type(cause) if isinstance(cause, Exception) else None
    error = _with_type_of(kind)(program, node, reason, node_traceback)
    error.__cause__ = cause
    return error


def _rebuilt(kind: type | None, *args: str) -> NodeFailedError:
    return _with_type_of(kind)(*args)


@functools.lru_cache(maxsize=256)
def _with_type_of(kind: type | None) -> type:
    """NodeFailedError mixed with exception type `kind` (itself, where they cannot mix)."""
    if kind is None or issubclass(kind, NodeFailedError) or issubclass(NodeFailedError, kind):
        return NodeFailedError
    try:
        return type(f"NodeFailedError[{kind.__name__}]", (NodeFailedError, kind),
                    {"__module__": __name__, "node_exception_type": kind})
    except TypeError:  # a final type, or one whose instances are laid out apart
        return NodeFailedError


class NodeSerializationError(LaunchError, ValueError, RuntimeError):
    """A node cannot be pickled to go where it runs; names its group and node. (A
    RuntimeError too, as Launchpad's was.)"""


class NodeNotReadyError(LaunchError, TimeoutError):
    """A node's address was asked for, but the node did not register it in time."""


class NodeEndedError(LaunchError, ConnectionError):
    """A node's address was asked for, but the node has finished or failed (or the program
    stopped), so it serves nothing anymore."""


class UnknownNodeError(LaunchError, LookupError):
    """A handle or address names a node the program does not have."""


class ProgramStoppedError(LaunchError, RuntimeError):
    """The program has stopped; nothing more can be asked of its controller."""


class UnsafePathError(LaunchError, PermissionError):
    """A launch's private file or folder could be reached by another user, so it is not used."""
