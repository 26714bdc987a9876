"""Lays Launchpad's staged tests and examples under ours in every process of an upstream run
(the runner's, and its programs' node processes, which import the tests' modules by name as
Launchpad's did): see tests/upstream/staging.py."""

import os

if os.environ.get("LAUNCHPAD_UPSTREAM_STAGED"):
    from tests.upstream import staging

    staging.install(os.environ["LAUNCHPAD_UPSTREAM_STAGED"])
