"""Launchpad's path of MultiProcessingColocation (launchpad/nodes/colocation.py)."""

from launchpad.nodes.colocation import MultiProcessingColocation

__all__ = ["MultiProcessingColocation"]
