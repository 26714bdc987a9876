"""The commands that load a program without launching it, from MODULE:FUNCTION.

    launchpad kubernetes-manifests MODULE:FUNCTION -o DIR [--image IMAGE] [--namespace NS]
                                   [--tls] [--allow-changes] [--arg NAME=VALUE ...]
    launchpad graph MODULE:FUNCTION -o FILE [--collapse-at N] [--arg NAME=VALUE ...]

Each imports MODULE and calls FUNCTION(**args) (e.g. the `make_program` of an example), which
returns a Program, without launching it. `kubernetes-manifests` writes the Kubernetes objects
that run it (`lp.kubernetes_manifests`) into DIR, one YAML file per object, numbered in the
order to apply them (`kubectl apply -f DIR`). One of them is the launch's Secret: DIR is made
private (0700), its files 0600. `graph` draws the program (`lp.render_program`) into FILE:
.svg, .png, .pdf, or .dot for the DOT source. A module that cannot be imported, a function
that raises or returns no Program: one line, exit status 1.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from launchpad.launch.kubernetes import manifests as kubernetes_manifests
from launchpad.launch.kubernetes.settings import KubernetesSettings
from launchpad.program import Program
from launchpad.render import DRAWN, SOURCE, render_program


def add_parsers(commands: argparse._SubParsersAction) -> None:
    manifests = commands.add_parser(
        "kubernetes-manifests", help="write the Kubernetes objects of a program as YAML",
        description="Writes the Kubernetes objects that run a program, one YAML file each.")
    _add_target(manifests)
    manifests.add_argument("-o", "--output", required=True, metavar="DIR",
                           help="the folder to write into (made if missing)")
    manifests.add_argument("--image", required=True, help="the image every pod runs")
    manifests.add_argument("--namespace", default="default", help="the objects' namespace")
    manifests.add_argument("--tls", action="store_true",
                           help="certificates made now for TLS between the program's parts")
    manifests.add_argument("--allow-changes", action="store_true",
                           help="a program that may change while it runs (scale, apply): "
                                "its controller gets a ServiceAccount and a Role")
    add_program_arguments(manifests)
    manifests.set_defaults(handler=_kubernetes_manifests)
    graph = commands.add_parser(
        "graph", help="draw a program's nodes and who calls whom, without launching it",
        description="Draws a program: its groups, its nodes shaped by type, an edge from "
                    "each node to every node whose handle it holds.")
    _add_target(graph)
    graph.add_argument("-o", "--output", required=True, metavar="FILE",
                       help="the file to write; its suffix says the format: "
                            + ", ".join("." + s for s in DRAWN + SOURCE) + " (the DOT source)")
    graph.add_argument("--collapse-at", type=int, default=3, metavar="N",
                       help="draw N or more identical nodes of a group as one (0: never; "
                            "default 3)")
    add_program_arguments(graph)
    graph.set_defaults(handler=_graph)


def _add_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="MODULE:FUNCTION",
                        help="a function returning the Program, e.g. "
                             "examples.hello_world.launch:make_program")


def add_program_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                        help="a keyword argument of FUNCTION (a Python literal, else a "
                             "string); may be repeated")


def keyword(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise SystemExit(f"launchpad: --arg {text!r} is not NAME=VALUE")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def load_program(target: str, kwargs: dict[str, Any]) -> Program:
    module_name, sep, function_name = target.partition(":")
    if not sep or not module_name or not function_name:
        raise SystemExit(f"launchpad: {target!r} is not MODULE:FUNCTION")
    sys.path.insert(0, os.getcwd())  # as `python -m` would: modules of this folder import
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - whatever importing it raises, named in one line
        why = str(e) if isinstance(e, ImportError) else f"{type(e).__name__}: {e}"
        raise SystemExit(f"launchpad: cannot import {module_name}: {why}") from e
    function = getattr(module, function_name, None)
    if not callable(function):
        raise SystemExit(f"launchpad: module {module_name} has no function {function_name!r}")
    try:
        program = function(**kwargs)
    except Exception as e:  # noqa: BLE001 - whatever the user's function raises, named
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


def _kubernetes_manifests(args: argparse.Namespace) -> int:
    """`launchpad kubernetes-manifests`: the program's objects as YAML files."""
    program = load_program(args.target, dict(keyword(a) for a in args.arg))
    try:
        objects = kubernetes_manifests.kubernetes_manifests(
            program, settings=KubernetesSettings(image=args.image, namespace=args.namespace,
                                                 allow_changes=args.allow_changes),
            tls=args.tls or None)
    except (TypeError, ValueError) as e:
        raise SystemExit(f"launchpad: {e}") from e
    paths = write_yaml(objects, args.output)
    print(f"launchpad: wrote {len(paths)} objects of program {program.name!r} to "
          f"{args.output}")
    return 0


def _graph(args: argparse.Namespace) -> int:
    """`launchpad graph`: the program's picture in a file."""
    if args.collapse_at < 0 or args.collapse_at == 1:
        raise SystemExit(f"launchpad: --collapse-at={args.collapse_at} must be 0 (never) or "
                         "at least 2")
    program = load_program(args.target, dict(keyword(a) for a in args.arg))
    try:
        path = render_program(program, args.output, collapse_at=args.collapse_at or None)
    except (ImportError, RuntimeError, ValueError, OSError) as e:
        raise SystemExit(f"launchpad: {e}") from e
    print(f"launchpad: drew program {program.name!r} ({len(program.get_all_nodes())} nodes) "
          f"into {path}")
    return 0
