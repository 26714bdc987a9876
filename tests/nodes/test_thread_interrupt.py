"""ThreadInterrupt: an exception raised in another thread's Python code, once, never after
it is disarmed, and not swallowed by `except Exception`."""

import threading

from launchpad.nodes.errors import Interrupted
from launchpad.nodes.thread_interrupt import ThreadInterrupt

TIMEOUT = 30.0


def _looping(made: list, started: threading.Event, ended: list) -> None:
    """A loop that swallows every Exception, as a careless run() does, until interrupted."""
    interrupt = ThreadInterrupt()
    made.append(interrupt)
    started.set()
    try:
        for _ in range(int(TIMEOUT / 0.01)):
            try:
                threading.Event().wait(0.01)
            except Exception:  # noqa: BLE001 - what the interrupt must get through
                pass
        ended.append("returned")
    except Interrupted:
        ended.append("interrupted")
    finally:
        interrupt.disarm()


def test_a_fired_interrupt_ends_a_loop_that_swallows_exceptions():
    made, started, ended = [], threading.Event(), []
    thread = threading.Thread(target=_looping, args=(made, started, ended))
    thread.start()
    assert started.wait(TIMEOUT)
    made[0].fire()
    made[0].fire()  # once only
    thread.join(TIMEOUT)
    assert ended == ["interrupted"]


def test_an_interrupt_disarmed_is_never_raised():
    interrupt = ThreadInterrupt()
    interrupt.disarm()
    interrupt.fire()
    threading.Event().wait(0.01)  # Python code runs on: nothing is raised in it
    assert not interrupt.fired
