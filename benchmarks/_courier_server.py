"""Courier server for the courier benchmarks (an echo, or the object they name).

Run as `python -m benchmarks._courier_server [--host H] [--tls DIR] [--no-metrics]
[--service MODULE:CLASS]`: starts a `launchpad.courier.Server` on a free port of H (127.0.0.1
by default) serving `benchmarks.rpc_program.Echo` (or a fresh MODULE.CLASS: the soak's
checking service), over TLS with the PEM files `ca.pem`, `cert.pem` and `key.pem` of DIR if
given, without counting its calls with `--no-metrics` (telemetry_overhead.py's baseline:
courier/metrics.py's recording replaced by a no-op); prints the port on one stdout line,
then serves until its stdin is closed (so it exits with its parent, even one that was
killed).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from benchmarks.rpc_program import Echo
from launchpad import courier
from launchpad.courier import metrics


def tls_from(directory: str | None) -> courier.TLS | None:
    """The TLS of the PEM files in `directory` (None without one)."""
    if directory is None:
        return None
    return courier.TLS(*(os.path.join(directory, f"{name}.pem")
                         for name in ("ca", "cert", "key")))


def service(name: str | None) -> object:
    """A fresh instance of the class `name` ('module:Class'; None: Echo)."""
    if name is None:
        return Echo()
    module, _, cls = name.partition(":")
    return getattr(importlib.import_module(module), cls)()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--tls", default=None)
    parser.add_argument("--no-metrics", action="store_true")
    parser.add_argument("--service", default=None,
                        help="MODULE:CLASS of the object served (default: rpc_program's Echo)")
    args = parser.parse_args()
    if args.no_metrics:
        metrics.CallMetrics.record = lambda self, method, secs, failed: None
    server = courier.Server(service(args.service), host=args.host, tls=tls_from(args.tls))
    server.start()
    print(server.port, flush=True)
    sys.stdin.read()  # Returns when the parent closes our stdin (or exits).
    server.stop()


if __name__ == "__main__":
    main()
