"""local_mt's workers: a node's thread, as the controller ends it."""

import threading

import launchpad as lp
from launchpad.launch.local.mt import ThreadWorker
from launchpad.launch.runtime.controller import Controller

TIMEOUT = 30


def test_a_thread_its_program_ended_before_it_started_never_starts(no_leaked_threads):
    """A node that fails at once stops its program while the launcher may still be starting
    the others: their threads are ended unstarted, and never start (it once raised 'cannot
    join thread before it is started' in the stop sequence, and left the program up)."""
    program = lp.Program("p")
    program.add_node(lp.PyNode(print), label="late")
    controller = Controller(program, launch_type="local_mt", one_host=True)
    worker = ThreadWorker(controller, program.get_all_nodes()[0])
    controller.add_worker(worker)
    controller.stop()
    assert controller.wait(timeout=TIMEOUT) is True
    worker.start()
    assert worker.join(0) is True
    assert not [t for t in threading.enumerate() if t.name == "lp:p:late/0"]
