"""Reverb replay servers as nodes (Launchpad's package): `node` (ReverbNode, ReverbHandle)."""
