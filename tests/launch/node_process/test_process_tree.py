"""Ending a node's descendants works whatever descriptors the node's process holds."""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(60)

# In a fresh process: more than select()'s 1024 descriptors open (a courier server raises the
# open-files limit, so a busy node gets there), then a child ended by end_descendants.
_SCRIPT = textwrap.dedent("""
    import os
    import resource
    import subprocess
    import sys

    from launchpad.launch.node_process import process_tree

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    # Waits for its stdin, which ends with this process if the test fails.
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    process_tree.end_descendants()
    print(child.wait(timeout=10))
""")


_HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]


@pytest.mark.skipif(_HARD != resource.RLIM_INFINITY and _HARD < 2048,
                    reason="needs a hard open-files limit of 2048 or more")
def test_descendants_are_ended_by_a_process_with_descriptors_above_1024():
    result = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "-15"  # SIGTERM, within the grace
