"""`PythonProcess`: how the processes of one group start, under the process launchers
(Launchpad's path; `local_resources={'group': lp.PythonProcess(...)}`)."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any


@dataclasses.dataclass
class PythonProcess:
    """How the processes of one group start.

    Args:
      args: command-line arguments the node's code sees in `sys.argv[1:]`: a dict becomes
        flags (`--key=value`; a bool `--key` or `--nokey`, as absl reads them), a list is
        passed as it is.
      env: environment variables set for the node, e.g. `CUDA_VISIBLE_DEVICES` (numbers are
        passed as text).
      interpreter: the Python executable to run the node with (default: this one).
      interpreter_args: arguments for the interpreter itself (e.g. `['-X', 'importtime']`).
    """

    args: Mapping[str, Any] | Sequence[str] | None = None
    env: Mapping[str, Any] | None = None
    interpreter: str | None = None
    interpreter_args: Sequence[str] | None = None

    def __post_init__(self):
        env = {}
        for key, value in (self.env or {}).items():
            if (not isinstance(key, str) or isinstance(value, bool)
                    or not isinstance(value, (str, int, float))):
                raise TypeError(f"PythonProcess env must map names to text or numbers, got "
                                f"{key!r}: {value!r}")
            env[key] = str(value)
        self.env = env or self.env
        if isinstance(self.args, str):
            raise TypeError(f"PythonProcess args must be a dict or a list, got {self.args!r}")

    @property
    def absolute_interpreter_path(self) -> str:
        """The interpreter the group's nodes run with (Launchpad's name)."""
        return os.path.abspath(self.interpreter) if self.interpreter else sys.executable

    def argv(self) -> list[str]:
        if isinstance(self.args, Mapping):
            return [_flag(key, value) for key, value in self.args.items()]
        return [str(a) for a in self.args or ()]

    def needs_fresh_interpreter(self) -> bool:
        """Whether a fork of an already running interpreter cannot honour these settings:
        another interpreter, interpreter arguments, or variables read at interpreter start."""
        startup = ("PYTHON", "LD_", "MALLOC_")
        return bool(self.interpreter or self.interpreter_args
                    or any(k.startswith(startup) for k in self.env or {}))


def _flag(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return f"--{key}" if value else f"--no{key}"
    return f"--{key}={value}"
