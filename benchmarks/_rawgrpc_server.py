"""Raw gRPC echo server: the baseline the courier benchmark compares against.

Run as `python -m benchmarks._rawgrpc_server`: binds a free port on 127.0.0.1, prints it on one
stdout line, then serves until its stdin is closed (so it exits with its parent, even one that
was killed) or it receives SIGTERM.

One generic unary-unary method passes raw bytes both ways (no (de)serializers) and returns the
request unchanged: the cheapest call grpcio in Python can make, so the measured cost is gRPC's own.
It runs with the allocator setting courier's processes use (launchpad/courier/allocator.py), so
that large payloads compare the two protocols, not two malloc configurations.
"""

from __future__ import annotations

import concurrent.futures
import sys

import grpc

from launchpad.courier import allocator

SERVICE = "bench.Echo"
METHOD = "Echo"
METHOD_PATH = f"/{SERVICE}/{METHOD}"
# Unlimited message size both ways, as courier's transport sets it.
OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


def _echo(request: bytes, context: grpc.ServicerContext) -> bytes:
    return request


def start_server(host: str = "127.0.0.1") -> tuple[grpc.Server, int]:
    """Starts the echo server on a free port; returns it and the port."""
    allocator.retain_freed_memory()
    handler = grpc.method_handlers_generic_handler(
        SERVICE, {METHOD: grpc.unary_unary_rpc_method_handler(_echo)})
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=16),
                         handlers=[handler], options=OPTIONS)
    port = server.add_insecure_port(f"{host}:0")
    if port == 0:
        raise RuntimeError(f"Cannot bind the raw gRPC echo server to {host}:0")
    server.start()
    return server, port


def main() -> None:
    server, port = start_server()
    print(port, flush=True)
    sys.stdin.read()  # Returns when the parent closes our stdin (or exits).
    server.stop(None).wait()


if __name__ == "__main__":
    main()
