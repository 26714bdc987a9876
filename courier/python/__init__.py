"""Launchpad's `courier.python` modules: `client` and `py_server`."""
