"""Launching: turns a program into running nodes, under one controller.

The top of this package is what users call, and Launchpad's module paths:
`launch.py` (`lp.launch`), `options.py` (its options, checked against one schema),
`launchers.py` (the table of engines: one row each names its launchers, settings, exports
and entry points), `attach.py` (`lp.attach`), `run_registry.py` (the runs `launchpad ls`
lists), `__main__.py` (what a node's host runs), and Launchpad's `worker_manager*`,
`serialization`, `signal_handling` and `*_multi_*` folders. The rooms below it, each with one job:

    runtime/       what every launcher shares; runtime/controller/, the controller
    node_process/  what runs in and around a node's process on its host
    local/         launchers of this host: threads and processes
    slurm/, ray/, kubernetes/   a launcher per cluster engine
    dashboard/     a program's web page and /metrics

Engine folders (local, slurm, ray, kubernetes) import runtime/ and node_process/ and never
each other; runtime/ imports none of them, and nothing above the engines names one
(tests/test_imports.py).
"""
