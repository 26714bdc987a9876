"""Hello world: the smallest Launchpad program (a server node and a client node)."""
