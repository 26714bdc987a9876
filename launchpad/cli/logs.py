"""`launchpad logs [RUN] NODE [-f]`: a node's output, read through its program's controller.

NODE is `label/index`, or a label whose group has one node. The controller serves the log
its launcher keeps of each node (the protocol's read_log: local_mp and Slurm keep one per
node in the run folder, or local_mp's terminal='output_to_files' the node's own file in
$LAUNCHPAD_LOGGING_DIR; local_mt's nodes are threads writing to the launching process's own
output, which the error says). `-f` follows the log until the node's run has ended and all
it wrote is printed, or the program has ended; Ctrl+C ends it quietly.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading

from launchpad import control, courier, telemetry
from launchpad.cli import runs, status

_CHUNK = 1 << 20  # bytes asked for per read
_FOLLOW_POLL_SECS = 0.2  # how often -f asks for more once it has read all there is


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "logs", help="print a node's output",
        description="Prints the output of a node of a running program.",
        usage="launchpad logs [-h] [-f] [--run-dir DIR] [RUN] NODE")
    parser.add_argument("names", nargs="+", metavar="[RUN] NODE",
                        help="the run (default: the one running program) and the node: "
                             "label/index, or a label of one node")
    parser.add_argument("-f", "--follow", action="store_true",
                        help="print what the node writes next too, until its run ends")
    runs.add_run_dir(parser)
    parser.set_defaults(handler=run)


def node(program: telemetry.ProgramStatus, given: str) -> tuple[str, int]:
    """The (label, index) of the node `given` names in the program.

    Raises:
      SystemExit: the program has no such node, or the label names several (they are listed).
    """
    label, slash, index = given.rpartition("/")
    if not slash or not index.isdigit():
        label, index = given, ""
    names = [n.name for n in program.nodes]
    group = [n for n in program.nodes if n.label == label]
    if not group:
        runs.fail(f"program {program.program!r} has no node {given!r}; its nodes: "
                  f"{', '.join(names)}")
    if not index:
        if len(group) > 1:
            runs.fail(f"group {label!r} of program {program.program!r} has {len(group)} "
                      f"nodes; name one: {', '.join(n.name for n in group)}")
        return label, group[0].index
    if int(index) not in [n.index for n in group]:
        runs.fail(f"program {program.program!r} has no node {given!r}; its nodes: "
                  f"{', '.join(names)}")
    return label, int(index)


def run(args: argparse.Namespace) -> int:
    if len(args.names) > 2:
        runs.fail(f"logs takes [RUN] NODE, got {' '.join(args.names)}")
    given_run, given_node = args.names if len(args.names) == 2 else (None, args.names[0])
    found = runs.find(given_run, args.run_dir)
    label, index = node(status.of(found), given_node)
    client = runs.client(found)
    # Ctrl+C ends the copy between two reads: raised inside a call, KeyboardInterrupt could
    # leave the client's connection half done, and closing it wait for good.
    interrupted = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    try:
        _copy(client, label, index, args.follow, interrupted)
    except BrokenPipeError:  # (`| head`): the reader has gone; nothing more to say
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except courier.ServerUnavailableError:
        if not args.follow:
            runs.gone(found)
        # a follow ends with the program
    except LookupError as e:  # no log of that node is kept: where its output goes
        runs.fail(str(e).splitlines()[0])
    finally:
        client.close()
    return 0


def _copy(client: control.ControllerClient, label: str, index: int, follow: bool,
          interrupted: threading.Event) -> None:
    """Prints the node's log; with `follow`, what comes next too until its run has ended
    (or `interrupted` is set). A node that has printed nothing is said so, on stderr."""
    out = sys.stdout.buffer
    offset = 0
    data, more = client.read_log(label, index, offset, _CHUNK, runs.CALL_SECS)
    if not data:
        print(f"launchpad: node {label}/{index} "
              f"{'has printed nothing yet' if more else 'printed nothing'}"
              f"{'; waiting for its output' if follow and more else ''}",
              file=sys.stderr, flush=True)
    while not interrupted.is_set():
        if data:
            out.write(data)
            out.flush()
            offset += len(data)
        elif not follow or not more:
            return
        else:
            interrupted.wait(_FOLLOW_POLL_SECS)  # nothing to wait on across processes
        data, more = client.read_log(label, index, offset, _CHUNK, runs.CALL_SECS)
