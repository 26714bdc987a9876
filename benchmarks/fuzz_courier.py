"""Benchmark: the fuzz suite (tests/fuzz) at length, many more hostile inputs than `make test`.

Run: `python -m benchmarks.fuzz_courier [--factor N] [-k EXPRESSION]`.
Prints one JSON object on stdout (pytest's own output goes to stderr).

Runs tests/fuzz in this process under hypothesis's "long" profile (tests/fuzz/conftest.py):
each target's examples times `--factor`, drawn afresh each run (the "ci" profile of `make
test` runs the same few every time). The report: the cases each target ran (a target is a
test, once per transport where it has them), its seconds, the targets that failed (none,
when nothing was found; hypothesis prints the smallest failing example of each above), and
the whole run's seconds.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import json
import os
import sys
import time

import pytest

_SUITE = "tests/fuzz"


class _Tally:
    """A pytest plugin: each test's cases (from the suite's counter), seconds, failures."""

    def __init__(self):
        self.cases: dict[str, int] = {}
        self.seconds: collections.Counter = collections.Counter()
        self.failed: list[str] = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        counter = importlib.import_module("tests.fuzz.conftest").CASES
        before = sum(counter.values())
        yield
        if sum(counter.values()) > before:  # (the suite's plain tests are no targets)
            self.cases[item.nodeid] = sum(counter.values()) - before

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] += report.duration
        if report.failed and report.nodeid not in self.failed:
            self.failed.append(report.nodeid)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=int, default=20,
                        help="examples per target, times its number under make test")
    parser.add_argument("-k", dest="expression", default="",
                        help="only the targets pytest's -k expression selects")
    args = parser.parse_args()
    # Read by tests/fuzz/conftest.py when pytest imports it, below.
    os.environ["LAUNCHPAD_FUZZ_PROFILE"] = "long"
    os.environ["LAUNCHPAD_FUZZ_FACTOR"] = str(args.factor)
    tally = _Tally()
    started = time.monotonic()
    options = ["-q", "-p", "no:cacheprovider", _SUITE]
    if args.expression:
        options += ["-k", args.expression]
    with contextlib.redirect_stdout(sys.stderr):
        exit_code = pytest.main(options, plugins=[tally])
    print(json.dumps({
        "profile": "long",
        "factor": args.factor,
        "cases": tally.cases,
        "total_cases": sum(tally.cases.values()),
        "failures": len(tally.failed),
        "failed": tally.failed,
        "seconds": {nodeid: round(tally.seconds[nodeid], 2) for nodeid in tally.cases},
        "total_seconds": round(time.monotonic() - started, 1),
        "pytest_exit_code": int(exit_code),
    }, indent=2))
    return 0 if exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
