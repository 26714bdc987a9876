"""Errors of the launch layer, defined once."""

from __future__ import annotations


class LaunchError(Exception):
    """Base class of errors raised by launchers and the controller."""


class SlurmError(LaunchError):
    """Slurm refused or lost the program's job."""


class KubernetesError(LaunchError):
    """The Kubernetes API refused or lost part of the program's launch."""


class DashboardError(LaunchError):
    """A launch's dashboard could not be served (its port is taken)."""


class NodeFailedError(LaunchError):
    """A node of the program failed; raised by `controller.wait()`.

    Attributes:
      program: the program's name.
      node: 'label/index' of the node that failed first.
      reason: what happened (the exception, or the exit code or signal of its process).
      node_traceback: the node's formatted traceback, when there is one.
    """

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
        return (type(self), (self.program, self.node, self.reason, self.node_traceback))


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
