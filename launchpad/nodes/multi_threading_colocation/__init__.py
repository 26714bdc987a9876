"""Launchpad's path of MultiThreadingColocation (launchpad/nodes/colocation.py)."""
