"""Courier echo server for the courier benchmark.

Run as `python -m benchmarks._courier_server`: starts a `launchpad.courier.Server` on a free port
of 127.0.0.1 serving an object whose `echo(x)` returns `x`, prints the port on one stdout line,
then serves until its stdin is closed (so it exits with its parent, even one that was killed) or
it receives SIGTERM.
"""

from __future__ import annotations

import sys
from typing import Any

from launchpad import courier


class Echo:
    """The served object: one method that returns its argument."""

    def echo(self, x: Any) -> Any:
        return x


def main() -> None:
    server = courier.Server(Echo())
    server.start()
    print(server.port, flush=True)
    sys.stdin.read()  # Returns when the parent closes our stdin (or exits).
    server.stop()


if __name__ == "__main__":
    main()
