"""Launchpad's path of MultiProcessingColocation (launchpad/nodes/colocation.py)."""
