"""Acme 0.4.0 against today's Reverb and JAX: a test-only shim, put on PYTHONPATH by the
acceptance suite (`make test-acme`) so that every process of it, nodes included, has it.

Acme 0.4.0 was written for Reverb 0.7 and JAX 0.3; its code is run unchanged, so what those
libraries have since dropped is put back here, when (and only if) they are imported:
- Reverb 0.14's `Client.trajectory_writer` no longer takes `get_signature_timeout_ms`;
- JAX 0.4 dropped `jax.xla` and `jax.pxla` as attributes, `jax.numpy.DeviceArray`,
  `ShardedDeviceArray` and `jax.tree_multimap`.
Nothing of `launchpad` is shimmed: the suite judges it as it is.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import sys
import types


def _patch_reverb_client(module: types.ModuleType) -> None:
    trajectory_writer = module.Client.trajectory_writer

    @functools.wraps(trajectory_writer)
    def without_signature_timeout(self, *args, get_signature_timeout_ms=None, **kwargs):
        del get_signature_timeout_ms  # Reverb 0.14 fetches no signature here
        return trajectory_writer(self, *args, **kwargs)

    module.Client.trajectory_writer = without_signature_timeout


def _patch_jax(module: types.ModuleType) -> None:
    if not hasattr(module, "tree_multimap"):
        module.tree_multimap = module.tree_util.tree_map
    if not hasattr(module, "xla"):
        module.xla = types.SimpleNamespace(Device=module.Device, DeviceArray=module.Array)
    if not hasattr(module, "pxla"):
        module.pxla = importlib.import_module("jax.interpreters.pxla")


def _add_array_aliases(module: types.ModuleType) -> None:
    """`DeviceArray` and `ShardedDeviceArray` are both `jax.Array` now."""
    array = importlib.import_module("jax").Array
    for name in ("DeviceArray", "ShardedDeviceArray"):
        if not hasattr(module, name):
            setattr(module, name, array)


_PATCHES = {"reverb.client": _patch_reverb_client, "jax": _patch_jax,
            "jax.numpy": _add_array_aliases, "jax.interpreters.pxla": _add_array_aliases}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds the shimmed modules with the other finders and patches each once it has run."""

    def find_spec(self, name, path, target=None):
        if name not in _PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, _PATCHES[name])
                return spec
        return None


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, patch):
        self._loader = loader
        self._patch = patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module)


sys.meta_path.insert(0, _PatchOnImport())
