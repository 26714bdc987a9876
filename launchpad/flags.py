"""The `--lp_*` command-line flags (absl), defined when launchpad is imported.

Launchpad's own flags keep their names, types and defaults - `--lp_launch_type` (default
local_mt), `--lp_termination_notice_secs` (10), `--lp_worker_manager_v2`, `--tmux_session_name`,
`--tmux_open_window`, `--lp_catch_deferred_exception` - beside ours (the cluster launchers', the
live table's, the dashboard's). Defining is not parsing: `import launchpad` parses nothing, and
`value(name)` reads a flag when a launch needs it, from the app's parsed flags or else straight
from sys.argv, so a launch works whether or not the script parsed its flags.

`LAUNCH_TYPE`, `LP_TERMINATION_NOTICE_SECS` and `LP_WORKER_MANAGER_V2` are Launchpad's flag
holders (`lp.LAUNCH_TYPE.value` is the launch type given on the command line).
"""

from __future__ import annotations

import sys
from typing import Any

from absl import flags

from launchpad.context import LaunchType

FLAGS = flags.FLAGS
DEFAULT_LAUNCH_TYPE = LaunchType.LOCAL_MULTI_THREADING.value
DEFAULT_TERMINATION_NOTICE_SECS = 10

# Flags whose value a launch reads from the command line when lp.launch() is not given it.
SLURM_FLAGS = {"partition": "partition", "account": "account", "qos": "QoS",
               "time_limit": "time limit (minutes, or D-HH:MM:SS)"}


def define(flag_values: flags.FlagValues) -> None:
    """Defines every launch flag in `flag_values`."""
    flags.DEFINE_enum(
        "lp_launch_type", DEFAULT_LAUNCH_TYPE, [t.value for t in LaunchType],
        "How to launch a Launchpad program when lp.launch() is given no launch_type.",
        flag_values=flag_values, allow_override=True)
    flags.DEFINE_integer(
        "lp_termination_notice_secs", DEFAULT_TERMINATION_NOTICE_SECS,
        "Seconds nodes get to finish after a stop before they are ended: 0 ends them at "
        "once, a negative value never does.", flag_values=flag_values)
    flags.DEFINE_bool(
        "lp_worker_manager_v2", False,
        "Launchpad's switch between its two worker managers; accepted, with no effect here "
        "(one runtime serves every launch type).", flag_values=flag_values)
    flags.DEFINE_string("tmux_session_name", "launchpad",
                        "terminal=tmux_session: the prefix of the tmux session's name.",
                        flag_values=flag_values)
    flags.DEFINE_string("tmux_open_window", None,
                        "terminal=tmux_session: accepted, with no effect (the session is "
                        "made detached; attach to it with tmux attach -t NAME).",
                        flag_values=flag_values)
    flags.DEFINE_bool(
        "lp_catch_deferred_exception", True,
        "Whether an exception of an lp.Deferred constructor is raised again naming where the "
        "Deferred was made.", flag_values=flag_values)
    flags.DEFINE_string(
        "lp_bind_address", None,
        "The interface nodes bind their servers to (default: loopback for local launch "
        "types; for cluster ones, the interface through which a host reaches the "
        "controller; 0.0.0.0 binds every interface).", flag_values=flag_values)
    for name, what in SLURM_FLAGS.items():
        flags.DEFINE_string(f"lp_slurm_{name}", None,
                            f"launch_type=slurm: the job's {what}, when lp.launch() is given "
                            "no slurm=lp.SlurmSettings(...)", flag_values=flag_values)
    flags.DEFINE_bool("lp_status", False,
                      "Local launch types: show a live table of the nodes (their state, "
                      "restarts, CPU, memory, call rates) while the program runs, when the "
                      "output is a terminal (needs the `status` extra: rich); under local_mp "
                      "node output then goes to files.", flag_values=flag_values)
    flags.DEFINE_bool("lp_dry_run", False,
                      "Check the launch and print what it would start (under slurm: each "
                      "node's host slot and the sbatch request), starting nothing.",
                      flag_values=flag_values)
    flags.DEFINE_string("lp_resume", None,
                        "Start every stateful node (lp.StatePolicy) from its latest state "
                        "of this earlier run of the program (a run id), when lp.launch() "
                        "is given no resume=", flag_values=flag_values)
    flags.DEFINE_string("lp_ray_address", None,
                        "launch_type=ray: the Ray cluster to join (its head's host:port, or "
                        "auto), when lp.launch() is given no ray=lp.RaySettings(...); default "
                        "$RAY_ADDRESS, else a Ray started for the launch",
                        flag_values=flag_values)
    flags.DEFINE_bool("lp_verbose_errors", False,
                      "Show node tracebacks whole, launchpad's own frames included (by "
                      "default they are left out; as LAUNCHPAD_VERBOSE_ERRORS=1 does)",
                      flag_values=flag_values)
    flags.DEFINE_integer("lp_dashboard_port", None,
                         "Serve the program's web dashboard and /metrics on this port of "
                         "127.0.0.1 (its URL, with a token, is printed at launch), when "
                         "lp.launch() is given no dashboard_port; 0 or unset: none",
                         flag_values=flag_values)


if "lp_launch_type" not in FLAGS:
    define(FLAGS)

LAUNCH_TYPE = flags.FlagHolder(FLAGS, FLAGS["lp_launch_type"])
LP_TERMINATION_NOTICE_SECS = flags.FlagHolder(FLAGS, FLAGS["lp_termination_notice_secs"])
LP_WORKER_MANAGER_V2 = flags.FlagHolder(FLAGS, FLAGS["lp_worker_manager_v2"])


def value(name: str) -> Any:
    """Reads a launch flag now: from the app's parsed flags, else straight from sys.argv."""
    if FLAGS.is_parsed():
        return FLAGS[name].value
    own = flags.FlagValues()
    define(own)
    own(sys.argv[:1] + [a for a in sys.argv[1:] if a.startswith(("--lp_", "--nolp_", "--tmux_"))],
        known_only=True)
    return own[name].value
