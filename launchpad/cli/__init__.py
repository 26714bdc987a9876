"""The `launchpad` command (also runnable as `python -m launchpad.cli`).

    launchpad launch path/to/launch.py [FLAGS...]    runs a launch script (cli/launching.py)
    launchpad ls                                     this user's running programs (cli/runs.py)
    launchpad status [RUN] [--json]                  a program's node table (cli/status.py)
    launchpad logs [RUN] NODE [-f]                   a node's output (cli/logs.py)
    launchpad stop [RUN] [--timeout SECS]            stops a program (cli/runs.py)
    launchpad kubernetes-manifests MODULE:FUNCTION -o DIR [--image IMAGE] [--namespace NS]
                                   [--tls] [--arg NAME=VALUE ...]

ls, status, logs and stop find runs in the run registry (launch/run_registry.py) and ask
their controllers over the controller protocol; RUN is a run id (or its unique beginning),
needed only when more than one program runs.

kubernetes-manifests imports MODULE, calls FUNCTION(**args) (e.g. the `make_program` of an
example), which returns a Program, and writes the Kubernetes objects that run it
(`lp.kubernetes_manifests`) into DIR, one YAML file per object, numbered in the order to
apply them (`kubectl apply -f DIR`). One of them is the launch's Secret: DIR is made private
(0700), its files 0600.

Bad input, a run that is gone, a node the program does not have, a program function that
raises: one line on stderr (`launchpad: ...`) and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from typing import Any

from launchpad import control
from launchpad.cli import launching, logs, runs, status
from launchpad.courier import errors as courier_errors
from launchpad.launch import kubernetes_manifests
from launchpad.launch.errors import LaunchError
from launchpad.launch.kubernetes_settings import KubernetesSettings
from launchpad.program import Program


def _version() -> str:
    """The installed distribution's version; "unknown" when run from a tree not installed."""
    try:
        return importlib.metadata.version("launchpad-next")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="launchpad", description="Launchpad's tools.")
    parser.add_argument("--version", action="version", version=f"launchpad-next {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    # Each command's parser sets `handler`: its function of the parsed arguments -> exit status.
    launching.add_parser(commands)
    runs.add_parsers(commands)
    status.add_parser(commands)
    logs.add_parser(commands)
    manifests = commands.add_parser(
        "kubernetes-manifests", help="write the Kubernetes objects of a program as YAML",
        description="Writes the Kubernetes objects that run a program, one YAML file each.")
    manifests.add_argument("target", metavar="MODULE:FUNCTION",
                           help="a function returning the Program, e.g. "
                                "examples.hello_world.launch:make_program")
    manifests.add_argument("-o", "--output", required=True, metavar="DIR",
                           help="the folder to write into (made if missing)")
    manifests.add_argument("--image", required=True, help="the image every pod runs")
    manifests.add_argument("--namespace", default="default", help="the objects' namespace")
    manifests.add_argument("--tls", action="store_true",
                           help="certificates made now for TLS between the program's parts")
    manifests.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                           help="a keyword argument of FUNCTION (a Python literal, else a "
                                "string); may be repeated")
    manifests.set_defaults(handler=_manifests)
    return parser


def _keyword(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise SystemExit(f"launchpad: --arg {text!r} is not NAME=VALUE")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def _program(target: str, kwargs: dict[str, Any]) -> Program:
    module_name, sep, function_name = target.partition(":")
    if not sep or not module_name or not function_name:
        raise SystemExit(f"launchpad: {target!r} is not MODULE:FUNCTION")
    sys.path.insert(0, os.getcwd())  # as `python -m` would: modules of this folder import
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - whatever the module raised, named in one line
        raise SystemExit(f"launchpad: cannot import module {module_name} "
                         f"({type(e).__name__}: {e})") from e
    function = getattr(module, function_name, None)
    if not callable(function):
        raise SystemExit(f"launchpad: module {module_name} has no function {function_name!r}")
    try:
        program = function(**kwargs)
    except Exception as e:  # noqa: BLE001 - the user's function failed: its error, one line
        raise SystemExit(f"launchpad: {target}() raised {type(e).__name__}: {e}") from e
    if not isinstance(program, Program):
        raise SystemExit(f"launchpad: {target}() returned {type(program).__name__}, not a "
                         "Program")
    return program


def write_yaml(objects: Sequence[dict[str, Any]], folder: str) -> list[str]:
    """Writes each object as `NN-kind-name.yaml` into `folder` (private); their paths."""
    try:
        import yaml
    except ImportError as e:
        raise SystemExit("launchpad: writing YAML needs PyYAML: pip install pyyaml") from e
    os.makedirs(folder, mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    paths = []
    for number, obj in enumerate(objects):
        name = f"{number:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"
        path = os.path.join(folder, name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        with open(os.open(path, flags, 0o600), "w") as f:
            yaml.safe_dump(obj, f, sort_keys=False)
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command with `argv` (default sys.argv[1:]); its exit status.

    Raises:
      SystemExit: the command failed (its message says why, in one line), or a launch
        script exited (its status).
    """
    args = _parser().parse_args(argv)
    if args.handler is launching.run:
        return args.handler(args)  # a launch script's errors are its own, as under `python`
    try:
        return args.handler(args)
    except (LaunchError, courier_errors.CourierError, control.ControllerProtocolError,
            TimeoutError) as e:
        raise SystemExit(f"launchpad: {str(e).splitlines()[0]}") from e


def _manifests(args: argparse.Namespace) -> int:
    program = _program(args.target, dict(_keyword(a) for a in args.arg))
    try:
        objects = kubernetes_manifests.kubernetes_manifests(
            program, settings=KubernetesSettings(image=args.image, namespace=args.namespace),
            tls=args.tls or None)
    except (TypeError, ValueError) as e:
        raise SystemExit(f"launchpad: {e}") from e
    paths = write_yaml(objects, args.output)
    print(f"launchpad: wrote {len(paths)} objects of program {program.name!r} to "
          f"{args.output}")
    return 0
