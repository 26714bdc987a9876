"""Nodes that run Python code (Launchpad's package): `node` (PyNode, PyClassNode),
`local_multi_processing` (PythonProcess), `xm_docker` (DockerConfig)."""
