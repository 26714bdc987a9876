"""A launch script for the Slurm tests of a launcher's life: `python -m
tests.launch.slurm.waiting NAME RUN_DIR [PENDING_TIMEOUT_SECS]`.

It launches program NAME - one node that waits for its stop - under slurm (the cluster of
$SLURM_CONF), prints `launched RUN_ID`, waits for the program and prints `ended`, or `failed:
ERROR` if a node failed (under --lp_dry_run it prints the plan, and `launched ` with no
run id).
"""

from __future__ import annotations

import sys

import launchpad as lp


def main(name: str, run_dir: str, pending_timeout_secs: str | None = None) -> None:
    program = lp.Program(name)
    program.add_node(lp.PyNode(lp.wait_for_stop), label="waiter")
    timeout = float(pending_timeout_secs) if pending_timeout_secs else None
    controller = lp.launch(program, launch_type="slurm", termination_notice_secs=5,
                           slurm=lp.SlurmSettings(run_dir=run_dir,
                                                  pending_timeout_secs=timeout))
    print(f"launched {controller.run_id}", flush=True)  # one write: stderr shares the pipe
    try:
        controller.wait()
    except lp.LaunchError as e:
        print(f"failed: {str(e).splitlines()[0]}", flush=True)
        return
    print("ended", flush=True)


if __name__ == "__main__":
    main(*[arg for arg in sys.argv[1:] if not arg.startswith("--")])  # --lp_* are absl's
