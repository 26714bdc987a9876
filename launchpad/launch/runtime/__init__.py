"""The runtime every launcher shares, by job:

    controller/        the program's controller, built of explicit parts (its registry,
                       supervisor, node book, stop sequence, protocol service); the rest of
                       launchpad holds a `Controller` and never its parts
    launcher.py        the launcher contract: `Launcher` (prepare, then start), `Plan`,
                       `DetachedRuns`, `LaunchOptions`
    ending.py          a node's worker (`NodeWorker`) and the one way workers end
    spec.py, process.py, serialization.py   node specs, node processes, pickled nodes
    controllers.py     what users hold: `ProgramController`, `RemoteController`, `Controllers`
    terminals.py, line_pump.py, output_files.py, node_logs.py   where node output goes
    run_records.py, run_states.py, state_store.py, private_files.py   run folders, states,
                       and the files no other user may write
    resources.py, dry_run.py, status_text.py, interrupts.py, at_exit.py, errors.py

It imports no launcher: the engine folders build on it.
"""
