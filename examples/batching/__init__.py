"""Batching: a server answers many clients' concurrent single calls in stacked batches."""
