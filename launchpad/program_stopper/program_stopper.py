"""Launchpad's path of `make_program_stopper` (launchpad/stopping.py)."""

from launchpad.stopping import ProgramStopper, make_program_stopper

__all__ = ["ProgramStopper", "make_program_stopper"]
