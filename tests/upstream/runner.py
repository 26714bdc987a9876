"""Runs one of Launchpad's own test files, or one of its examples, unchanged, over ours.

    python -m tests.upstream.runner tests MODULE XML [TEST=REASON ...]
    python -m tests.upstream.runner main MODULE [ARG ...]

in the environment `staging.environment(staged)` gives: Launchpad's staged tests and
examples laid under ours (staging.py), in this process and in its programs' node processes.

`tests` runs MODULE's tests as Launchpad ran them (absltest.main: its flags parsed, its test
cases), writing each test's outcome to XML (JUnit); the tests named TEST (as
`Class.method`) are skipped with REASON - the table of tests/upstream/exclusions.py, nothing
else. `main` runs MODULE as `__main__`, as `python -m` would, with ARGs as its command line.
"""

from __future__ import annotations

import importlib
import runpy
import sys
import unittest


def _skip(module: object, skips: dict[str, str]) -> None:
    for test, reason in skips.items():
        class_name, method = test.split(".")
        test_class = getattr(module, class_name)
        setattr(test_class, method, unittest.skip(reason)(getattr(test_class, method)))


def main(argv: list[str]) -> None:
    mode, module_name, *rest = argv
    if mode == "main":
        sys.argv = [module_name, *rest]
        runpy.run_module(module_name, run_name="__main__", alter_sys=True)
        return
    xml, *skipped = rest
    module = importlib.import_module(module_name)
    _skip(module, dict(entry.split("=", 1) for entry in skipped))
    from absl.testing import absltest
    sys.argv = [module.__file__, f"--xml_output_file={xml}"]
    absltest.main(module=module)


if __name__ == "__main__":
    main(sys.argv[1:])
