"""Errors of the launch layer, defined once."""

from __future__ import annotations

import functools

from launchpad.launch.runtime import traceback_text


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

    Its message is what the user reads: the node, and its traceback as traceback_text.py
    shortens it (their frames, not launchpad's), ending with the node's exception - said
    once: the node's exception is an attribute, not a `__cause__` printed again above it.

    Attributes:
      program: the program's name.
      node: 'label/index' of the node that failed first.
      reason: what happened (the exception, or the exit code or signal of its process).
      node_traceback: the node's formatted traceback, whole, when there is one.
      restarts: how many times the node had been restarted before this failure.
      node_exception: the exception the node raised, when it could be sent here.
    """

    # The exception class of the node that this error is also an instance of (node_failure
    # makes such a subclass); None for this class itself.
    node_exception_type: type[BaseException] | None = None

    def __init__(self, program: str, node: str, reason: str, node_traceback: str = "",
                 restarts: int = 0):
        super().__init__(_failure_message(program, node, reason, node_traceback, restarts))
        self.program = program
        self.node = node
        self.reason = reason
        self.node_traceback = node_traceback
        self.restarts = restarts
        self.node_exception: BaseException | None = None

    def __reduce__(self):
        return (_rebuilt, (type(self).node_exception_type, self.program,
                           self.node, self.reason, self.node_traceback, self.restarts))

    @property
    def summary(self) -> str:
        """The failure in one line, its reason included (a status, the dashboard's banner)."""
        return f"{_header(self.program, self.node, self.restarts)}: {self.reason}"


def _header(program: str, node: str, restarts: int) -> str:
    header = f"Node {node} of program {program!r} failed"
    if restarts:
        header += f" (after {restarts} restart{'s' if restarts > 1 else ''})"
    return header


def _failure_message(program: str, node: str, reason: str, node_traceback: str,
                     restarts: int) -> str:
    header = _header(program, node, restarts)
    if not node_traceback.strip():
        return f"{header}: {reason}"
    text, hidden = traceback_text.shorten(node_traceback)
    framed = text.startswith(traceback_text.HEADER + "\n")
    return traceback_text.headed(text, hidden, f"{header}; its traceback" if framed else header)


def node_failure(program: str, node: str, reason: str, node_traceback: str = "",
                 cause: BaseException | None = None, restarts: int = 0) -> NodeFailedError:
    """The NodeFailedError of node `node`, whose exception (when known) is `cause`.

    The error is also an instance of `cause`'s type, so that code that waits for a program
    catches the node's own exception as it would have under Launchpad's thread launchers
    (`except ValueError` catches a node's ValueError); `cause` is its `node_exception`."""
    kind = type(cause) if isinstance(cause, Exception) else None
    error = _with_type_of(kind)(program, node, reason, node_traceback, restarts)
    error.node_exception = cause
    return error


def _rebuilt(kind: type | None, *args) -> NodeFailedError:
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
