"""What `import launchpad` costs and exposes, and the layering of DESIGN.md section 3."""

import ast
import builtins
import pathlib
import re
import subprocess
import sys

import launchpad as lp

PACKAGE = pathlib.Path(lp.__file__).parent


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, timeout=60).stdout.strip()


def test_import_launchpad_imports_no_extra_and_parses_no_flags():
    out = _run("import sys, launchpad; from absl import flags; "
               "print([m for m in ('tensorflow', 'reverb', 'ray', 'kubernetes', 'numpy', "
               "'graphviz', 'prometheus_client', 'selenium', 'http.server', "
               "'launchpad.launch.dashboard') "
               "if m in sys.modules], "
               "flags.FLAGS.is_parsed())")
    assert out == "[] False"


def test_a_launch_without_a_dashboard_imports_none_of_it():
    out = _run("import sys, launchpad as lp; p = lp.Program('p'); "
               "p.add_node(lp.PyNode(print), 'node'); "
               "lp.launch(p, launch_type='local_mt').wait(); "
               "print([m for m in sys.modules if m.startswith('launchpad.launch.dashboard') "
               "or m in ('prometheus_client', 'http.server')])")
    assert out.splitlines()[-1] == "[]"


def test_every_public_name_is_exported_once_and_exists():
    assert len(lp.__all__) == len(set(lp.__all__))
    for name in lp.__all__:
        assert hasattr(lp, name), name


def _imports_of(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("launchpad")}


def _layer_imports(layer: str) -> dict[str, set[str]]:
    return {str(p.relative_to(PACKAGE)): _imports_of(p)
            for p in (PACKAGE / layer).rglob("*.py")}


def _within(module: str, *packages: str) -> bool:
    """Whether `module` is one of `packages` or inside one (launch_context is not launch)."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_courier_imports_nothing_else_of_the_package():
    for module, imports in _layer_imports("courier").items():
        outside = {m for m in imports if not m.startswith("launchpad.courier")}
        assert not outside, f"{module} imports {outside}"


def test_nodes_never_import_launchers():
    for module, imports in _layer_imports("nodes").items():
        assert not {m for m in imports if _within(m, "launchpad.launch")}, module


def test_the_replicator_is_used_by_the_replicated_node_only_and_imports_no_launcher():
    for module, imports in _layer_imports("replicator").items():
        outside = {m for m in imports if not m.startswith("launchpad.replicator")}
        assert not outside, f"{module} imports {outside}"
    users = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if "replicator" not in p.parts
             and any(m.startswith("launchpad.replicator") for m in _imports_of(p))}
    assert users == {"nodes/replicated.py"}


def test_a_program_with_a_replicated_node_is_built_without_tensorflow():
    out = _run("import sys, launchpad as lp; p = lp.Program('p'); "
               "p.add_node(lp.ReplicatedNode(dict, num_workers=2, mode='async'), 'trainer'); "
               "print('tensorflow' in sys.modules, len(p.get_all_nodes()))")
    assert out == "False 4"


def _module_level_imports(path: pathlib.Path) -> set[str]:
    """What a module imports when it is imported (not inside functions or TYPE_CHECKING)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("launchpad")}


def test_the_graph_its_pictures_the_context_and_the_protocol_import_neither_nodes_nor_launchers():
    for name in ("program.py", "context.py", "node_launch.py", "address.py", "stopping.py",
                 "control.py", "dot.py", "render.py", "flags.py", "lazy_loader.py"):
        imports = _module_level_imports(PACKAGE / name)
        above = {m for m in imports if _within(m, "launchpad.nodes", "launchpad.launch")}
        assert not above, f"{name} imports {above}"


def test_a_nodes_runner_is_not_imported_by_the_package_before_it_runs():
    """`python -m launchpad.launch` runs a node; the package must not have imported its
    __main__ (runpy would warn, and run it twice)."""
    out = _run("import sys, launchpad; print('launchpad.launch.__main__' in sys.modules)")
    assert out == "False"


def test_the_command_is_imported_by_nothing_of_the_package_and_imports_no_extra():
    users = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if "cli" not in p.relative_to(PACKAGE).parts
             and any(m.startswith("launchpad.cli") for m in _imports_of(p))}
    assert not users, f"{users} import the command"
    out = _run("import sys, launchpad.cli; "
               "print([m for m in sys.modules if m.split('.')[0] in "
               "('ray', 'kubernetes', 'yaml', 'rich', 'tensorflow', 'numpy')], "
               "'launchpad.launch.slurm.launcher' in sys.modules)")
    assert out == "[] False"


def _all_imports(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_launchpads_top_level_courier_package_is_imported_by_nothing_of_ours():
    """`courier` (Launchpad's package, over ours) is the top of the layers, as the command
    is: made of launchpad's courier and context, and imported by no module of launchpad."""
    users = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if any(m == "courier" or m.startswith("courier.") for m in _all_imports(p))}
    assert not users, f"{users} import the top-level courier package"
    top = PACKAGE.parent / "courier"
    for path in top.rglob("*.py"):
        outside = {m for m in _all_imports(path) if m.startswith("launchpad")
                   and not m.startswith(("launchpad.courier", "launchpad.context"))
                   and m != "launchpad"}
        assert not outside, f"{path.relative_to(top.parent)} imports {outside}"


# --- The rules of a house: public faces, one package import, errors in their modules ---

def _is_module(dotted: str) -> bool:
    """Whether `dotted` (launchpad...) names a module or package of the tree."""
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _modules_imported(path: pathlib.Path) -> set[str]:
    """Every launchpad module `path` imports, anywhere in it: `from a import b` counts as
    importing a.b when b is a module, and as importing a itself otherwise."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                found.add(dotted if _is_module(dotted) else node.module)
    return {m for m in found if m == "launchpad" or m.startswith("launchpad.")}


def _sources_outside_courier() -> list[pathlib.Path]:
    """The code that uses courier as a user does: the rest of the package, Launchpad's
    `courier` package over ours, and the examples. (Courier's own tests, and the benchmarks
    that measure its transports against raw sockets, look inside it on purpose.)"""
    root = PACKAGE.parent
    return ([p for p in PACKAGE.rglob("*.py") if "courier" != p.relative_to(PACKAGE).parts[0]]
            + list((root / "courier").rglob("*.py")) + list((root / "examples").rglob("*.py")))


def test_nothing_outside_courier_imports_its_modules():
    """Courier's face is its package (courier/__init__): its modules are its own to move."""
    for path in _sources_outside_courier():
        inside = {m for m in _modules_imported(path) if m.startswith("launchpad.courier.")}
        assert not inside, f"{path} imports courier's modules {inside}: use launchpad.courier"


COURIER = PACKAGE / "courier"


def _courier_module(path: pathlib.Path) -> str:
    """launchpad.courier... of a file of courier's."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_courier_private_subpackages_are_imported_by_courier_alone():
    """Behind courier's face, its subpackages (`launchpad.courier._*`) are its own: nothing
    else of launchpad, Launchpad's courier package or the examples imports them. (Its tests
    and the benchmarks look inside on purpose.)"""
    for path in PACKAGE.rglob("*.py"):
        if COURIER in path.parents:
            continue
        private = {m for m in _all_imports(path) if m.startswith("launchpad.courier._")}
        assert not private, f"{path.relative_to(PACKAGE)} imports courier's private {private}"
    for path in _sources_outside_courier():
        private = {m for m in _all_imports(path) if m.startswith("launchpad.courier._")}
        assert not private, f"{path} imports courier's private {private}"


def test_grpc_is_imported_by_couriers_grpc_subpackage_alone():
    """gRPC is one transport: courier's status codes are its own and are mapped to gRPC's at
    its edge (courier/_grpc/), the only part of launchpad that imports grpc, anywhere in a
    module."""
    grpc_package = COURIER / "_grpc"
    users = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
             if grpc_package not in path.parents
             and any(m == "grpc" or m.startswith("grpc.") for m in _all_imports(path))}
    assert not users, f"{users} import grpc outside courier/_grpc/"


def _courier_import_graph() -> dict[str, set[str]]:
    """Each module of courier -> the modules of courier it imports, anywhere in it (module
    level, in functions, under TYPE_CHECKING), packages' __init__ as their module."""
    return {_courier_module(path): {m for m in _modules_imported(path)
                                    if m.startswith("launchpad.courier")}
            for path in COURIER.rglob("*.py")}


def test_courier_modules_import_no_cycle():
    """Courier's modules import one way: no module imports, through others, one that
    imports it (the face's package __init__, which gathers the face, imports them all, and
    none imports it)."""
    graph = _courier_import_graph()
    assert not any("launchpad.courier" in imports for module, imports in graph.items()
                   if module != "launchpad.courier"), "a module of courier imports its face"
    graph.pop("launchpad.courier")
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph.get(module, ())):
            if state.get(imported) == 1:
                cycle = path[path.index(imported):] + [imported]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if imported in graph and imported not in state:
                visit(imported, path + [imported])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_no_module_of_the_package_imports_the_package_itself():
    """A module of launchpad imports the modules it uses, never `launchpad` (whose
    __init__ loads the whole public API, and whose import from inside it is a cycle)."""
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "__init__.py":
            continue
        assert "launchpad" not in _modules_imported(path), f"{path} imports launchpad itself"


def _is_exception_class(node: ast.ClassDef, known: set[str]) -> bool:
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        builtin = getattr(builtins, name, None)
        if name in known or (isinstance(builtin, type) and issubclass(builtin, BaseException)):
            return True
    return False


def test_errors_are_defined_in_the_errors_modules():
    """Each layer defines its errors once, in its errors.py, where a reader looks for them."""
    known = {node.name for path in PACKAGE.rglob("errors.py")
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.ClassDef)}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "errors.py":
            continue
        defined = [node.name for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.ClassDef) and _is_exception_class(node, known)]
        assert not defined, f"{path.relative_to(PACKAGE)} defines errors {defined}"


# --- launch/: rooms that import one way ---

_ENGINES = ("local", "slurm", "ray", "kubernetes")
# What each room of launch/ may import of launch/ (and, in all of them, itself).
_MAY_IMPORT = {
    "runtime": (),
    "node_process": ("runtime",),
    "dashboard": ("runtime",),
    **{engine: ("runtime", "node_process") for engine in _ENGINES},
}


def test_the_rooms_of_launch_import_one_way():
    """Engine folders build on runtime/ and node_process/ and never on each other (adding
    an engine is one folder and one row); runtime/ imports no launcher, and nothing in a
    room imports the top of launch/ (lp.launch, the table of launchers, Launchpad's paths)."""
    wrong = []
    for room, allowed in _MAY_IMPORT.items():
        for path in (PACKAGE / "launch" / room).rglob("*.py"):
            for module in _modules_imported(path):
                parts = module.split(".")
                into = parts[2] if len(parts) > 2 else ""
                if parts[:2] == ["launchpad", "launch"] and into != room and into not in allowed:
                    wrong.append(f"{path.relative_to(PACKAGE)} imports {module} ({room}/ "
                                 f"may import {', '.join(allowed) or 'nothing else of launch/'})")
    assert not wrong, "\n".join(wrong)


def test_launch_has_few_modules_at_its_top():
    top = sorted(p.name for p in (PACKAGE / "launch").glob("*.py"))
    assert len(top) <= 12, top


def test_lp_launch_is_short_and_branches_on_no_launch_type():
    """`lp.launch` finds its launcher in one table and asks it; what differs between launch
    types is said by each launcher, never by a test of the launch type in `launch()`."""
    tree = ast.parse((PACKAGE / "launch" / "launch.py").read_text())
    launch = next(node for node in tree.body
                  if isinstance(node, ast.FunctionDef) and node.name == "launch")
    assert launch.end_lineno - launch.lineno + 1 <= 60
    compared = [ast.unparse(node) for node in ast.walk(launch) if isinstance(node, ast.Compare)]
    named = [node.value for node in ast.walk(launch)
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and node.value.lower() in {t.value for t in lp.LaunchType}]
    assert not compared and not named, (compared, named)


def test_no_attribute_of_a_controller_is_assigned_outside_its_class():
    """A controller is built whole by its launch; what changes while it runs changes through
    its methods (set_pending, ...), never by another module writing it."""
    written = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                       else [])
            for target in targets:
                owner = target.value if isinstance(target, ast.Attribute) else None
                name = (owner.attr if isinstance(owner, ast.Attribute)
                        else getattr(owner, "id", ""))
                if name.lstrip("_").endswith("controller"):
                    written.append(f"{path.relative_to(PACKAGE)}:{node.lineno} "
                                   f"{ast.unparse(target)}")
    assert not written, "\n".join(written)


# --- no cycles, no engine names above the engines, no interfaces found by name ---

def _runtime_imports(path: pathlib.Path) -> set[str]:
    """The launchpad modules `path` imports when it runs (anywhere in it, but not under
    `if TYPE_CHECKING:`), as `_modules_imported` names them."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                found.add(dotted if _is_module(dotted) else node.module)
    return {m for m in found if m.startswith("launchpad.")}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_of_the_package_imports_itself_back():
    """No import cycle, lazy imports included: each layer and module builds on what is below
    it (a cycle hidden in a function, or behind a module name in a string, is one too)."""
    graph = {_module_name(p): _runtime_imports(p) - {_module_name(p)}
             for p in PACKAGE.rglob("*.py")}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = path[path.index(module):] + [module]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if module in done or module not in graph:
            return
        for imported in sorted(graph[module]):
            visit(imported, path + [module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


_ENGINE_NAMES = ("slurm", "ray", "kubernetes")


def test_no_engine_is_named_above_the_engines():
    """An engine is its folder and its row of launch/launchers.py: lp.launch, its options,
    lp.attach, `python -m launchpad.launch` and the package's face name none."""
    for name in ("launch/launch.py", "launch/options.py", "launch/__main__.py",
                 "launch/attach.py", "__init__.py"):
        text = (PACKAGE / name).read_text().lower()
        named = [engine for engine in _ENGINE_NAMES
                 if re.search(rf"(?<![a-z]){engine}(?![a-z])", text)]
        assert not named, f"{name} names {named}"


def test_no_interface_is_found_by_a_name_in_a_string():
    """Optional methods and attributes are declared (a Protocol, a base class with its
    defaults), never looked up as getattr(obj, "name", default): a typo there is silent."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr"
                    and len(node.args) == 3 and isinstance(node.args[1], ast.Constant)
                    and not node.args[1].value.startswith("__")):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(node)}")
    assert not found, "\n".join(found)


def test_the_controllers_parts_are_its_own():
    """The controller is built of its parts (runtime/controller/): the rest of launchpad
    holds a `Controller`, never its registry, supervisor or stop."""
    package = PACKAGE / "launch" / "runtime" / "controller"
    for path in PACKAGE.rglob("*.py"):
        if package in path.parents:
            continue
        parts = {m for m in _modules_imported(path)
                 if m.startswith("launchpad.launch.runtime.controller.")}
        assert not parts, f"{path.relative_to(PACKAGE)} imports the controller's {parts}"
