"""A node's share of its host's CPUs and GPUs (slot_binding.py): the launcher's offsets
bound, at the node's start, to the CPUs its process may use and the GPUs its step sees."""

from __future__ import annotations

import os
import subprocess
import sys

from launchpad.launch.node_process import slot_binding
from tests.processes import ROOT


def test_offsets_pick_entries_of_what_the_step_has_or_nothing_when_it_has_fewer():
    assert slot_binding.slots_env(4, 3, 1, 1) == {"LAUNCHPAD_CPU_SLOTS": "4-6",
                                                  "LAUNCHPAD_GPU_SLOTS": "1-1"}
    assert slot_binding.slots_env(0, 1, 0, 0) == {"LAUNCHPAD_CPU_SLOTS": "0-0"}
    assert slot_binding.chosen("1-2", [10, 11, 12, 13]) == [11, 12]
    assert slot_binding.chosen("3-4", [10, 11, 12, 13]) is None


def test_gpus_are_the_nth_of_those_the_step_sees_and_the_variables_are_taken():
    environ = {"CUDA_VISIBLE_DEVICES": "4,5,6,7", "LAUNCHPAD_GPU_SLOTS": "1-2"}
    slot_binding.bind(environ)
    assert environ == {"CUDA_VISIBLE_DEVICES": "5,6"}
    environ = {"CUDA_VISIBLE_DEVICES": "4", "LAUNCHPAD_GPU_SLOTS": "1-1"}
    slot_binding.bind(environ)  # the step sees fewer: nothing is bound
    assert environ == {"CUDA_VISIBLE_DEVICES": "4"}


def test_a_process_is_bound_to_its_cpu_slot():
    allowed = sorted(os.sched_getaffinity(0))
    last = len(allowed) - 1
    code = ("import os; from launchpad.launch.node_process import slot_binding; "
            "slot_binding.bind(); print(sorted(os.sched_getaffinity(0)))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True,
                            env={**os.environ, "LAUNCHPAD_CPU_SLOTS": f"{last}-{last}"})
    assert result.stdout.strip() == str([allowed[last]])
