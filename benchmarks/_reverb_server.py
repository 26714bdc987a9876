"""A plain Reverb server for the ReverbNode benchmark (the baseline).

Run as `python -m benchmarks._reverb_server`: starts a `reverb.Server` with the benchmark's
tables on a free port, prints the port on one stdout line, then serves until its stdin is
closed (so it exits with its parent, even one that was killed).
"""

from __future__ import annotations

import sys

import reverb

from benchmarks.reverb_node import make_tables


def main() -> None:
    server = reverb.Server(tables=make_tables(), port=None)
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
