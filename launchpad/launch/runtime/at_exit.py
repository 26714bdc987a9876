"""What becomes of running programs when the launching interpreter exits.

A launch script is usually written as Launchpad's were: `main()` calls `lp.launch(...)` and
returns. The program must not die with it, so:

- `local_mt` and `local_mp`: the exit waits for the program to stop (by itself, `lp.stop()`,
  or Ctrl+C: once stops, twice kills), as Launchpad's local launchers did;
- `test_mt` launched without a test case: the program is stopped (its nodes get their grace
  period) and waited for, so its threads end in order instead of dying mid-call.

A program that failed makes the interpreter exit with status 1, its failure printed.

The hook is one of `threading`'s exit hooks, the ones `concurrent.futures` registers to join
its pools, and it is registered after that module's, so it runs first: while it waits, nodes
(and the libraries they use) can still start threads and submit work to executors. A plain
`atexit` hook would run after the pools had shut down.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401 - its exit hook must be registered before ours
import os
import sys
import threading
from typing import Any

from launchpad.launch.runtime import terminals
from launchpad.launch.runtime.errors import LaunchError

_lock = threading.Lock()
_programs: dict[Any, bool] = {}  # running controllers -> whether the exit stops them first
_registered = False


def wait_for(controller: Any) -> None:
    """The interpreter's exit waits for `controller`'s program to stop."""
    _add(controller, stop_first=False)


def stop(controller: Any) -> None:
    """The interpreter's exit stops `controller`'s program and waits for it."""
    _add(controller, stop_first=True)


def _add(controller: Any, stop_first: bool) -> None:
    global _registered
    with _lock:
        if not _registered:
            threading._register_atexit(_at_exit)  # noqa: SLF001 - see the module doc
            _registered = True
        _programs[controller] = stop_first
    controller.on_finish(lambda: _forget(controller))


def _forget(controller: Any) -> None:
    with _lock:
        _programs.pop(controller, None)


def _at_exit() -> None:
    with _lock:
        programs = dict(_programs)
    if not programs:
        return
    waiting = [c.program_name for c, stop_first in programs.items() if not stop_first]
    if waiting:
        terminals.say(f"the launching script has returned; waiting for {', '.join(waiting)} "
                      "to stop (Ctrl+C to stop it)")
    for controller, stop_first in programs.items():
        if stop_first:
            controller.stop()
    failures = []
    for controller in programs:
        try:
            controller.wait()
        except LaunchError as e:
            failures.append(e)
    if failures:
        for failure in failures:
            terminals.say(str(failure))
        _exit_failed()


def _exit_failed() -> None:
    """Ends the interpreter with status 1 (the status is fixed before exit hooks run, so only
    `os._exit` can change it), after running the `atexit` handlers it would have run."""
    atexit._run_exitfuncs()  # noqa: SLF001 - what a normal exit would do next
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(1)
