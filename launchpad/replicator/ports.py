"""`ReservedPort`: the port of a TensorFlow cluster task, held until TensorFlow's server binds it.

A cluster's tasks must know every task's address before any of them starts its server, so a
task's port is chosen seconds before TensorFlow binds it (the other tasks come up meanwhile).
A port picked free and let go in that time can be taken by any other process of the host, and
the task then fails with "Could not start gRPC server". So the task keeps the port bound
(never listening, so it takes no connection) with SO_REUSEPORT for as long as it runs, and
tells TensorFlow (`TF_GRPC_REUSE_PORT`, TensorFlow 2.3 and later) to bind with SO_REUSEPORT
too: TensorFlow's server binds beside the holder, and no other process can bind the port
(the kernel shares a port only between sockets that all ask for it, of one user).
"""

from __future__ import annotations

import os
import socket

# Read by TensorFlow's gRPC server when it binds: "1" adds SO_REUSEPORT to its socket.
REUSE_PORT_VARIABLE = "TF_GRPC_REUSE_PORT"
# TensorFlow's cluster servers listen on every IPv4 interface.
_TF_BIND_HOST = "0.0.0.0"


class ReservedPort:
    """A free TCP port of this host, held by this process until `close()`.

    Creating one sets `TF_GRPC_REUSE_PORT=1` in this process's environment, so that the
    TensorFlow server started later in it can bind the port while it is held.
    """

    def __init__(self):
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            self._socket.bind((_TF_BIND_HOST, 0))
        except BaseException:
            self._socket.close()
            raise
        self.port: int = self._socket.getsockname()[1]
        os.environ[REUSE_PORT_VARIABLE] = "1"

    def close(self) -> None:
        """Lets the port go (TensorFlow's server, if it bound it, keeps it)."""
        self._socket.close()

    def __enter__(self) -> ReservedPort:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
