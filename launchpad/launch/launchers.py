"""The table of engines: each engine's folder, and what it adds to launchpad, in one row.

An engine is one folder (local/, slurm/, ray/, kubernetes/) and one `Engine` row here,
which names, by module path, what the rest of the package builds from it:

    launchers     its launch types and the `Launcher` of each (runtime/launcher.py)
    settings      its keyword of `lp.launch` (`slurm=lp.SlurmSettings(...)`)
    exports       the names `import launchpad as lp` gives of it (`lp.SlurmSettings`)
    entry_points  what its hosts run: `python -m launchpad.launch --NAME PATH`

Nothing is imported before it is used, so `import launchpad`, and every node's process,
load no engine they do not use. `lp.launch`, its options, `lp.attach`, `__main__` and
`launchpad/__init__` read this table and name no engine (tests/test_imports.py).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from launchpad import flags as lp_flags
from launchpad.context import LaunchType

if TYPE_CHECKING:  # (a node's process reads the table's entry points, and no launcher)
    from launchpad.launch.runtime.launcher import Launcher


@dataclasses.dataclass(frozen=True)
class Settings:
    """An engine's keyword of `lp.launch`: `keyword=` takes an instance of `type`."""

    keyword: str
    type: str  # "module:Class" in the engine's package
    doc: str  # for lp.launch's docstring


@dataclasses.dataclass(frozen=True)
class EntryPoint:
    """`python -m launchpad.launch --NAME PATH` runs `function(PATH)`, whose result is the
    process's exit status."""

    function: str  # "module:function" in the engine's package
    help: str


@dataclasses.dataclass(frozen=True)
class Engine:
    """One row of the table (see the module doc)."""

    package: str  # "launchpad.launch.slurm"
    launchers: Mapping[str, str]  # launch type -> "module:Class" in the package
    settings: Settings | None = None
    exports: Mapping[str, str] = dataclasses.field(default_factory=dict)  # name -> "module:name"
    entry_points: Mapping[str, EntryPoint] = dataclasses.field(default_factory=dict)

    def load(self, reference: str) -> Any:
        """What `reference` ("module:name" in the package) names, its module imported."""
        module, _, name = reference.partition(":")
        return getattr(importlib.import_module(f"{self.package}.{module}"), name)


_ENGINES: list[Engine] = [
    Engine("launchpad.launch.local", {
        LaunchType.LOCAL_MULTI_THREADING.value: "mt:ThreadsLauncher",
        LaunchType.TEST_MULTI_THREADING.value: "test_mt:InTestThreadsLauncher",
        LaunchType.LOCAL_MULTI_PROCESSING.value: "mp:ProcessesLauncher",
        LaunchType.TEST_MULTI_PROCESSING.value: "test_mp:InTestProcessesLauncher",
    }),
    Engine(
        "launchpad.launch.slurm", {LaunchType.SLURM.value: "launcher:SlurmLauncher"},
        Settings("slurm", "settings:SlurmSettings",
                 'lp.SlurmSettings for launch_type="slurm" (partition, account, time limit, '
                 "...)."),
        exports={"SlurmSettings": "settings:SlurmSettings", "SlurmError": "errors:SlurmError"},
        entry_points={
            "hold": EntryPoint("job_holder:hold", "Slurm: the job's holder file (a private "
                                                  "file); holds the job for its controller"),
            "slurm-controller": EntryPoint("detached:run_controller",
                                           "Slurm: the launch's spec, run as the detached "
                                           "program's controller in its job's batch step"),
        }),
    Engine(
        "launchpad.launch.ray", {LaunchType.RAY.value: "launcher:RayLauncher"},
        Settings("ray", "settings:RaySettings",
                 'lp.RaySettings for launch_type="ray" (the cluster to join, runtime_env, '
                 "placement of groups)."),
        exports={"RaySettings": "settings:RaySettings"}),
    Engine(
        "launchpad.launch.kubernetes",
        {LaunchType.KUBERNETES.value: "launcher:KubernetesLauncher"},
        Settings("kubernetes", "settings:KubernetesSettings",
                 'lp.KubernetesSettings for launch_type="kubernetes" (the image, required; '
                 "namespace, service account, ...). Kubernetes launches are always detached: "
                 "the controller runs in the cluster."),
        exports={"KubernetesSettings": "settings:KubernetesSettings",
                 "KubernetesError": "errors:KubernetesError",
                 "kubernetes_manifests": "manifests:kubernetes_manifests"},
        entry_points={
            "pod-spec": EntryPoint("pod:run_node", "Kubernetes: the spec of a pod's node "
                                                   "(mounted, sealed)"),
            "kubernetes-controller": EntryPoint("controller_pod:run",
                                                "Kubernetes: the launch's spec (mounted, "
                                                "sealed), run as the program's controller"),
        }),
]

# Launchpad's XManager launch types, which need Google's XManager and its cloud: what runs
# their programs here instead.
_XMANAGER = {
    LaunchType.LOCAL_DOCKER.value: "Launchpad's local_docker ran each node in a Docker "
                                   "container through XManager; here launch_type='local_mp' "
                                   "runs them as local processes",
    LaunchType.VERTEX_AI.value: "Launchpad's vertex_ai ran the program on Google Cloud "
                                "through XManager; here launch_type='kubernetes' runs it on a "
                                "cluster (GKE included), 'slurm' or 'ray' on those engines",
}


def register(engine: Engine) -> None:
    """Adds `engine`'s row (an engine outside the package: its folder is `engine.package`).

    Raises:
      ValueError: a launch type, keyword, export or entry point of it is taken.
    """
    taken = (set(_by_launch_type()) | set(settings()) | set(exports())
             | set(entry_points()) | set(_XMANAGER))
    given = ({*engine.launchers, *engine.exports, *engine.entry_points}
             | ({engine.settings.keyword} if engine.settings else set()))
    if taken & given:
        raise ValueError(f"Engine {engine.package}: {sorted(taken & given)} already taken")
    _ENGINES.append(engine)
    _launcher.cache_clear()


def unregister(engine: Engine) -> None:
    """Removes a row `register` added."""
    _ENGINES.remove(engine)
    _launcher.cache_clear()


def get(launch_type: LaunchType | str | None) -> Launcher:
    """The launcher of `launch_type` (a LaunchType or its value; None: --lp_launch_type).

    Raises:
      ValueError: no such launch type, or one that cannot run here (XManager's).
    """
    if not launch_type:
        launch_type = lp_flags.value("lp_launch_type") or lp_flags.DEFAULT_LAUNCH_TYPE
    value = launch_type.value if isinstance(launch_type, LaunchType) else str(launch_type)
    if value in _XMANAGER:
        raise ValueError(f"launch_type {value!r} cannot run here: {_XMANAGER[value]}")
    if value not in _by_launch_type():
        raise ValueError(f"Unknown launch_type {launch_type!r}; launch types: "
                         f"{', '.join(_by_launch_type())}")
    return _launcher(value)


def every() -> list[Launcher]:
    """Every launcher of the table (their modules imported)."""
    return [_launcher(launch_type) for launch_type in _by_launch_type()]


def settings() -> dict[str, tuple[Engine, Settings]]:
    """Each engine's keyword of `lp.launch`, with its row."""
    return {engine.settings.keyword: (engine, engine.settings) for engine in _ENGINES
            if engine.settings}


def settings_keyword(launcher: Launcher) -> str | None:
    """The keyword of `lp.launch` whose settings `launcher` reads, if its engine has one."""
    engine = _by_launch_type()[launcher.name]
    return engine.settings.keyword if engine.settings else None


def exports() -> dict[str, tuple[Engine, str]]:
    """The names `launchpad` exports of the engines: name -> (row, "module:name")."""
    return {name: (engine, reference) for engine in _ENGINES
            for name, reference in engine.exports.items()}


def entry_points() -> dict[str, tuple[Engine, EntryPoint]]:
    """What `python -m launchpad.launch --NAME` runs of the engines: NAME -> its row."""
    return {name: (engine, entry) for engine in _ENGINES
            for name, entry in engine.entry_points.items()}


def _by_launch_type() -> dict[str, Engine]:
    return {launch_type: engine for engine in _ENGINES for launch_type in engine.launchers}


@functools.cache
def _launcher(launch_type: str) -> Launcher:
    engine = _by_launch_type()[launch_type]
    return engine.load(engine.launchers[launch_type])()
