"""Launchpad's path of `lp.stop` (launchpad/stopping.py)."""
