"""Launchpad's path of MultiThreadingColocation (launchpad/nodes/colocation.py)."""

from launchpad.nodes.colocation import MultiThreadingColocation

__all__ = ["MultiThreadingColocation"]
