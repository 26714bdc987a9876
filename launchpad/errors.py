"""Errors of the program's context and of its control protocol, defined once (those of
the courier, node and launch layers are in their own errors modules)."""


class NoContextError(RuntimeError):
    """A node-only API was used outside any running program's node."""


class ControllerProtocolError(RuntimeError):
    """The controller speaks another version of the protocol than this process."""
