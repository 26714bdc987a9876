"""Every name of Launchpad's public surface is here, at Launchpad's paths, with Launchpad's
signature: checked against the sources of its released wheels (read with `ast`, never run).

For each of Launchpad's modules below, every public function and class it defines must exist
at the same path here, but the internals INTERNALS names (with why); a function's parameters,
and a class's constructor's and public methods', must be Launchpad's: the same names in the
same order, of the same kinds, with a default where Launchpad has one (the same, when it is
a literal). Ours may add parameters with defaults after Launchpad's (so every call written
for Launchpad's binds the same), and parameters Launchpad keeps private (`_name`) are not
compared.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os

import pytest

import launchpad as lp

# Launchpad's modules with a public face: everything they define, but INTERNALS.
MODULES = [
    "launchpad", "launchpad.address", "launchpad.context", "launchpad.flags",
    "launchpad.program", "launchpad.nodes.base", "launchpad.nodes.dereference",
    "launchpad.nodes.python.node", "launchpad.nodes.python.local_multi_processing",
    "launchpad.nodes.python.xm_docker", "launchpad.nodes.courier.node",
    "launchpad.nodes.courier.courier_utils", "launchpad.nodes.reverb.node",
    "launchpad.nodes.multi_threading_colocation.node",
    "launchpad.nodes.multi_processing_colocation.node",
    "launchpad.launch.launch", "launchpad.launch.worker_manager",
    "launchpad.launch.worker_manager_v2", "launchpad.launch.worker_manager_migration",
    "launchpad.launch.serialization", "launchpad.launch.signal_handling",
    "launchpad.launch.test_multi_threading.launch",
    "launchpad.launch.test_multi_threading.address_builder",
    "launchpad.launch.test_multi_processing.launch",
    "launchpad.launch.local_multi_processing.launch",
    "launchpad.launch.local_multi_threading.launch",
    "launchpad.program_stopper.program_stopper", "launchpad.stop_program.stop",
    "courier", "courier.python.client", "courier.python.py_server",
]

# What those modules define that is not provided here, and why: internals of Launchpad's own
# launchers, which code built on it does not call (Launchpad's lazy imports are done by
# the module's own imports here).
INTERNALS = {
    "launchpad.context.set_context": "sets the thread's LaunchContext: Launchpad's nodes' own",
    "launchpad.nodes.python.local_multi_processing.to_multiprocessing_executables":
        "turns nodes into Launchpad's local_mp commands: its launcher's own",
    "launchpad.nodes.python.xm_docker.initializer": "XManager's Vertex AI set-up",
    "launchpad.nodes.python.xm_docker.to_docker_executables": "XManager's executables",
    "launchpad.launch.local_multi_threading.launch.thread_handler":
        "Launchpad's pdb post-mortem hook of its local_mt threads",
    "launchpad.launch.worker_manager_v2.WorkerManager":
        "Launchpad's second, unfinished WorkerManager (its flag said not to use it): the "
        "name is WorkerManager's here",
    "courier.python.client.translate_status": "turns a C++ absl Status into StatusNotOk",
    "courier.python.client.exception_handler": "re-raises C++ absl Statuses as StatusNotOk",
}
# Launchpad's methods that are its own launchers' machinery (of any class): name -> why.
INTERNAL_METHODS = {
    "to_executables": "how Launchpad's launchers turn nodes into executables",
    "bind_addresses": "Launchpad's launchers' binding of addresses to builders",
    "default_launch_config": "Launchpad's launchers' per-node config",
    "launch_context": "set on each node by Launchpad's launchers; a node's code here asks "
                      "launchpad.context.get_context()",
    "connect": "Launchpad's launch-time hook of handles, which none of its handles uses",
    "transform": "Launchpad's launch-time hook of handles, which none of its handles uses",
    "__init__": "of a handle: a handle is made by its node (node.create_handle()), as in "
                "Launchpad; Launchpad's took the node's Address, ours the node",
}
_HANDLES = ("CourierHandle", "ReverbHandle")
_NO_DEFAULT = object()



def _upstream(release, module: str) -> ast.Module | None:
    base = os.path.join(release.sources, *module.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            with open(path) as f:
                return ast.parse(f.read())
    return None


def _defined(tree: ast.Module) -> dict[str, ast.AST]:
    return {n.name: n for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}


def _literal(node: ast.AST | None):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return inspect.Parameter.empty  # not a literal: only its presence is compared


def _launchpads(function: ast.FunctionDef, method: bool) -> list[tuple[str, str, object]]:
    """(name, kind, default: a literal, `empty` for another value, or _NO_DEFAULT) of
    Launchpad's parameters (a method's without self)."""
    a = function.args
    positional = a.posonlyargs + a.args
    defaults = [_NO_DEFAULT] * (len(positional) - len(a.defaults)) + list(a.defaults)
    found = [(p.arg, "positional", d if d is _NO_DEFAULT else _literal(d))
             for p, d in zip(positional, defaults, strict=True)]
    if method:
        found = found[1:]  # self / cls
    if a.vararg:
        found.append(("*", "var_positional", _NO_DEFAULT))
    found += [(p.arg, "keyword", _NO_DEFAULT if d is None else _literal(d))
              for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
    if a.kwarg:
        found.append(("**", "var_keyword", _NO_DEFAULT))
    return [p for p in found if not p[0].startswith("_")]


def _ours(function, method: bool) -> dict[str, inspect.Parameter]:
    named = {}
    parameters = list(inspect.signature(function).parameters.values())
    for p in parameters[1:] if method else parameters:
        key = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, p.name)
        named[key] = p
    return named


def _compare(where: str, upstream: list, ours, method: bool = False) -> list[str]:
    problems = []
    parameters = _ours(ours, method)
    order = list(parameters)
    for position, (name, kind, default) in enumerate(upstream):
        mine = parameters.get(name)
        if mine is None:
            problems.append(f"{where}: no parameter {name}")
            continue
        if kind == "positional" and (order.index(name) != position
                                     or mine.kind not in (mine.POSITIONAL_ONLY,
                                                          mine.POSITIONAL_OR_KEYWORD)):
            problems.append(f"{where}: {name} is not positional parameter {position}")
        if kind == "keyword" and mine.kind not in (mine.KEYWORD_ONLY,
                                                   mine.POSITIONAL_OR_KEYWORD):
            problems.append(f"{where}: {name} cannot be given by keyword")
        if default is _NO_DEFAULT and kind in ("positional", "keyword"):
            if mine.default is not mine.empty:
                problems.append(f"{where}: {name} has a default, Launchpad's has none")
        elif kind in ("positional", "keyword"):
            if mine.default is mine.empty:
                problems.append(f"{where}: {name} has no default, Launchpad's has one")
            elif default is not inspect.Parameter.empty and mine.default != default:
                problems.append(f"{where}: {name}={mine.default!r}, Launchpad's {default!r}")
    theirs = {u[0] for u in upstream}
    last = max((order.index(n) for n in theirs if n in order), default=-1)
    added = [n for n, p in parameters.items()
             if n not in theirs and n not in ("*", "**") and not n.startswith("_")
             and (p.default is p.empty or (order.index(n) < last
                                           and p.kind != p.KEYWORD_ONLY))]
    if added:
        problems.append(f"{where}: parameters Launchpad has not, before or without a "
                        f"default: {added}")
    return problems


def _class_problems(where: str, node: ast.ClassDef, ours: type) -> list[str]:
    problems = []
    methods = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
    if "__init__" in methods and node.name not in _HANDLES:
        problems += _compare(f"{where}()", _launchpads(methods["__init__"], True), ours)
    for name, method in methods.items():
        if name.startswith("_") or name in INTERNAL_METHODS:
            continue
        mine = inspect.getattr_static(ours, name, None)
        if mine is None:
            problems.append(f"{where}.{name}: missing")
        elif isinstance(mine, property) or any(
                isinstance(d, ast.Name) and d.id == "property" for d in method.decorator_list):
            continue  # a property: its presence is the signature
        elif callable(mine) or isinstance(mine, (staticmethod, classmethod)):
            static = any(isinstance(d, ast.Name) and d.id.endswith("staticmethod")
                         for d in method.decorator_list)
            problems += _compare(f"{where}.{name}", _launchpads(method, not static),
                                 getattr(ours, name), method=not static)
    return problems


@pytest.mark.parametrize("module", MODULES)
def test_launchpads_names_are_here_with_launchpads_signatures(release, module):
    tree = _upstream(release, module)
    if tree is None:
        pytest.skip(f"{release.name} has no {module}")
    ours = importlib.import_module(module)
    problems = []
    for name, node in _defined(tree).items():
        if f"{module}.{name}" in INTERNALS:
            continue
        mine = getattr(ours, name, None)
        if mine is None:
            problems.append(f"{module}.{name}: missing")
        elif isinstance(node, ast.ClassDef):
            problems += _class_problems(f"{module}.{name}", node, mine)
        else:
            problems += _compare(f"{module}.{name}", _launchpads(node, False), mine)
    assert not problems, "\n".join(problems)


def test_every_name_launchpad_exports_is_exported(release):
    tree = _upstream(release, "launchpad")
    exported = [alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) for alias in node.names]
    missing = [name for name in exported if not hasattr(lp, name)]
    assert exported and not missing, missing
