"""Node types: each module says how its node runs and what its handle is."""
