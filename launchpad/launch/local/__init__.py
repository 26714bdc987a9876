"""Launchers of this host: local_mt and test_mt run each node as a thread, local_mp and
test_mp as a process (forked from a fork server); the live status table shows them in the
launching terminal."""
