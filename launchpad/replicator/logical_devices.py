"""TF-Replicator's logical devices: each replica spans K devices, and the model says which of
its parts goes on which (model parallelism by hand, as the design document had it).

    repl = Replicator(devices=4, devices_per_replica=2)    # 2 replicas of 2 devices each
    with repl.scope():
        with repl.logical_device_for_variables(0):
            encoder = make_encoder()                        # on each replica's device 0
        with repl.logical_device_for_variables(1):
            decoder = make_decoder()                        # on each replica's device 1

    def step_fn(batch):                                     # inputs land on logical device 0
        with repl.logical_device(0):
            hidden = encoder(batch)
        with repl.logical_device(1):
            return decoder(hidden)

Replica r's logical device i is device r * K + i. The replicas are a MirroredStrategy over
their devices 0; a variable made for logical device i is mirrored over every replica's device
i instead (the strategy's own way to place a variable with another, `colocate_with`, given
those devices), so each replica reads its own copy there, the optimizer updates each copy
where it lives, and gradients are combined across replicas as for any mirrored variable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import tensorflow as tf


def _key(device: str) -> tuple[str, int]:
    """A device's type and index, whatever its name's spelling ('/gpu:0', '.../device:GPU:0')."""
    spec = tf.DeviceSpec.from_string(device)
    return (spec.device_type or "").upper(), spec.device_index or 0


class _Placed:
    """What a MirroredStrategy reads of `colocate_with` to mirror a new variable over other
    devices than its own (the devices of the variable it would be placed with)."""

    def __init__(self, devices: Sequence[str]):
        self._devices = tuple(devices)


class LogicalDevices:
    """The devices of each replica (`groups[r][i]`: replica r's logical device i)."""

    def __init__(self, groups: Sequence[Sequence[str]]):
        self.groups = [list(group) for group in groups]
        self._replica_of = {_key(group[0]): r for r, group in enumerate(self.groups)}

    @property
    def per_replica(self) -> int:
        return len(self.groups[0])

    def _checked(self, index: int) -> int:
        if isinstance(index, bool) or not isinstance(index, int) or \
                not 0 <= index < self.per_replica:
            raise ValueError(f"A replica has logical devices 0 to {self.per_replica - 1}, "
                             f"not {index!r}")
        return index

    @contextlib.contextmanager
    def ops_on(self, index: int) -> Iterator[None]:
        """Ops made in this context (in the step) run on this replica's device `index`."""
        index = self._checked(index)
        context = tf.distribute.get_replica_context()
        try:  # (not every replica context of every TF version says its devices)
            device = context.devices if context is not None else None
        except AttributeError:
            device = None
        while isinstance(device, (list, tuple)) and device:  # (nested, by TF version)
            device = device[0]
        replica = self._replica_of.get(_key(device)) if isinstance(device, str) else None
        if replica is None:
            raise RuntimeError("logical_device() works inside a step_fn run by "
                               "Replicator.run (once per replica), where ops are placed")
        with tf.device(self.groups[replica][index]):
            yield

    @contextlib.contextmanager
    def variables_on(self, index: int) -> Iterator[None]:
        """Variables made in this context (in `scope()`) live on every replica's device
        `index`: one copy each, mirrored."""
        placed = _Placed([group[self._checked(index)] for group in self.groups])

        def create(next_creator, **kwargs):
            kwargs["colocate_with"] = placed
            return next_creator(**kwargs)

        with tf.variable_creator_scope(create):
            yield
