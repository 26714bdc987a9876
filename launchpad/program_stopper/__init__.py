"""Launchpad's path of `make_program_stopper` (launchpad/stopping.py)."""
