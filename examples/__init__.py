"""Runnable Launchpad example programs; run each as `python -m examples.<name>.launch`."""
