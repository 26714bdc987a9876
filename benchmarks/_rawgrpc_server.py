"""Raw gRPC echo server: the baseline the courier benchmark compares against.

Run as `python -m benchmarks._rawgrpc_server [--host H] [--tls DIR]`: binds a free port on H
(127.0.0.1 by default; over TLS with DIR's PEM files, as _courier_server.py), prints it on one
stdout line, then serves until its stdin is closed (so it exits with its parent, even one that
was killed) or it receives SIGTERM.

One generic unary-unary method passes raw bytes both ways (no (de)serializers) and returns the
request unchanged: the cheapest call grpcio in Python can make, so the measured cost is gRPC's own.
It runs with the allocator setting courier's processes use (launchpad/courier/allocator.py), so
that large payloads compare the two protocols, not two malloc configurations.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys

import grpc

from benchmarks._courier_server import tls_from
from launchpad.courier._grpc import credentials
from launchpad.courier._process import allocator

SERVICE = "bench.Echo"
METHOD = "Echo"
METHOD_PATH = f"/{SERVICE}/{METHOD}"
# Unlimited message size both ways, as courier's transport sets it.
OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


def _echo(request: bytes, context: grpc.ServicerContext) -> bytes:
    return request


def start_server(host: str = "127.0.0.1",
                 credentials: grpc.ServerCredentials | None = None) -> tuple[grpc.Server, int]:
    """Starts the echo server on a free port; returns it and the port."""
    allocator.retain_freed_memory()
    handler = grpc.method_handlers_generic_handler(
        SERVICE, {METHOD: grpc.unary_unary_rpc_method_handler(_echo)})
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=16),
                         handlers=[handler], options=OPTIONS)
    target = f"{host}:0"
    port = (server.add_insecure_port(target) if credentials is None
            else server.add_secure_port(target, credentials))
    if port == 0:
        raise RuntimeError(f"Cannot bind the raw gRPC echo server to {host}:0")
    server.start()
    return server, port


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--tls", default=None)
    args = parser.parse_args()
    tls = tls_from(args.tls)
    server, port = start_server(args.host,
                                None if tls is None else credentials.server_credentials(tls))
    print(port, flush=True)
    sys.stdin.read()  # Returns when the parent closes our stdin (or exits).
    server.stop(None).wait()


if __name__ == "__main__":
    main()
