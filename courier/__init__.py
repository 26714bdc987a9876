"""Launchpad's `courier` package: `courier.Client`, `courier.Server` (functions bound by
name: Bind, Start, Stop, Join) and `courier.list_methods`, over launchpad's courier.

Servers and clients made in a node of a launched program carry its token (and TLS), so the
program's nodes reach them and nothing else does; made outside any program, they carry this
process's token ($LAUNCHPAD_COURIER_TOKEN, if set, for processes that share one).
"""

from courier.python.client import Client, list_methods
from courier.python.py_server import Server

__all__ = ["Client", "Server", "list_methods"]
