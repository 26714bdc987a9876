"""Launchpad's path of `lp.stop` (launchpad/stopping.py)."""

from launchpad.stopping import stop

__all__ = ["stop"]
