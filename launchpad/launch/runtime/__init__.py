"""The runtime every launcher shares: the program's controller and what a launch keeps.

The controller (`controller.py`) and its parts: the protocol it serves
(`controller_service.py`), node addresses (`registry.py`), node workers and their ending
(`supervisor.py`, `ending.py`), what nodes report (`node_book.py`), interrupts and the
interpreter's exit (`interrupts.py`, `at_exit.py`). What a launch is told and keeps:
resources, node specs, private files, run records, node logs, terminals, the dry run. The
proxies of programs that run elsewhere (`remote.py`), and the launch layer's errors.

It imports no launcher: the engine folders build on it.
"""
