"""The Megatron example (examples/megatron) as its users run it, in a subprocess: the same
trainer learns the digits with its wide layer split over a 2x2 mesh and on one device, and bad
flags are refused before anything launches."""

from __future__ import annotations

import re

import pytest

from tests.examples.test_examples import run_example
from tests.stacks import needs_tensorflow

pytestmark = pytest.mark.timeout(600)

FINAL_ACCURACY = re.compile(r"driver: test accuracy (\d\.\d+) on 359 held-out digits after "
                            r"(\d+) steps")
# Measured: 0.978 (mesh 2x2) and 0.981 (one device) after 200 steps; 0.94-0.95 after 50.
STATED_ACCURACY = 0.9


@needs_tensorflow
@pytest.mark.parametrize("args, where", [
    (["--mesh=batch:2,model:2"], "split (None, 'model'), <Replicator mesh {'batch': 2, "
                                 "'model': 2}>"),
    (["--devices=1"], "split None, <Replicator one_device"),
], ids=["mesh_2x2", "one_device"])
def test_the_example_learns_the_digits_split_over_a_mesh_and_on_one_device(args, where):
    result = run_example("megatron", [*args, "--steps=150"], "local_mp", timeout=300)
    report = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, report
    assert f"driver: training 76,810 parameters, wide layer (64, 1024) {where}" in (
        result.stdout), report
    final = FINAL_ACCURACY.search(result.stdout)
    assert final and int(final[2]) == 150, report
    assert float(final[1]) >= STATED_ACCURACY, report
    assert "Program stopped cleanly." in result.stdout, report


@pytest.mark.parametrize("args, error", [
    (["--mesh=batch:2,model:2", "--devices=1"], "pick one"),
    (["--mesh=batch:2,model:3"], "--hidden=1024 does not split over the mesh's model axis"),
    (["--mesh=batch2"], "each part is AXIS:SIZE"),
])
def test_bad_flags_are_refused_before_launching(args, error):
    result = run_example("megatron", args, "local_mp", timeout=120)
    assert result.returncode != 0 and error in result.stderr, result.stderr
