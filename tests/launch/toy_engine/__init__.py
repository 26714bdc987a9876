"""A toy engine, outside the package: one folder and one row (test_toy_engine.py adds it).

Its launcher runs each node as a thread, as local_mt does, and keeps what it was told; its
settings are `lp.ToySettings`; its entry point, `python -m launchpad.launch --toy-echo
PATH`, copies a file to stdout. What matters is how little adding it takes."""
