"""Code pickled by value keeps where it came from, so a node's traceback shows the user's
file, line and source line wherever the node runs, as it does in the launching process.

cloudpickle pickles a script's own functions and classes (those of `__main__`, and of modules
registered by value) whole, and names their code "<dynamic-code>" (for payloads that do not
depend on where code was defined): a node's traceback then has neither its file nor its
lines. `dumps` pickles them with their file names, and sends the lines of each such file
along: the lines of the functions pickled, each other line of the file left empty (a node
spec stays small: a Kubernetes launch holds every spec in one ConfigMap). The node's process
registers them with `linecache` as it unpickles, as a module's loader would (never re-read
from a disk that may lack the file, or hold another version of it). A file whose lines sent
would pass `MAX_SOURCE_BYTES` travels without them: its name still does.
"""

from __future__ import annotations

import io
import linecache
import types
from typing import Any

import cloudpickle

MAX_SOURCE_BYTES = 256 << 10


class _Sourced:
    """What `dumps` pickles: `node`, then the lines of the files its by-value code is from."""

    def __init__(self, node: Any):
        self.node = node


class _Lines:
    """Where, after the node, the lines of its files are pickled (they are known by then)."""


class _Pickler(cloudpickle.Pickler):
    def __init__(self, file: io.BytesIO):
        super().__init__(file)
        self._lines: dict[str, set[int]] = {}  # file -> the line numbers of its code sent
        self._kept: list[types.CodeType] = []  # (alive while pickling: the memo keys by id)

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is types.CodeType and not obj.co_filename.startswith("<"):
            numbers = [line for _, _, line in obj.co_lines() if line] or [obj.co_firstlineno]
            self._lines.setdefault(obj.co_filename, set()).update(
                range(obj.co_firstlineno, max(numbers) + 1))
            anonymous = obj.replace(co_filename="<dynamic-code>")  # cloudpickle's own, below
            self._kept.append(anonymous)
            return _named, (anonymous, obj.co_filename)
        if type(obj) is _Sourced:
            return _registered, (obj.node, _Lines())
        if type(obj) is _Lines:
            return dict, (sorted(_lines_of(self._lines).items()),)
        return super().reducer_override(obj)


def dumps(node: Any) -> bytes:
    """cloudpickle of `node`, its by-value code with its file names and their lines (see the
    module doc); `cloudpickle.loads` of it gives `node`."""
    buffer = io.BytesIO()
    _Pickler(buffer).dump(_Sourced(node))
    return buffer.getvalue()


def _lines_of(wanted: dict[str, set[int]]) -> dict[str, list[str]]:
    """Each file's lines this process can read, those not `wanted` left empty (see the
    module doc)."""
    found = {}
    for name, numbers in wanted.items():
        lines = [line if number in numbers else "\n"
                 for number, line in enumerate(linecache.getlines(name), start=1)]
        if any(line != "\n" for line in lines) and sum(map(len, lines)) <= MAX_SOURCE_BYTES:
            found[name] = lines
    return found


def _named(code: types.CodeType, filename: str) -> types.CodeType:
    """`code` as defined in `filename` (in the node's process)."""
    return code.replace(co_filename=filename)


def _registered(node: Any, sources: dict[str, list[str]]) -> Any:
    """`node`, once the lines of its code's files are known to `linecache` (in the node's
    process); a file this process has cached already keeps its lines."""
    for name, lines in sources.items():
        linecache.cache.setdefault(name, (sum(map(len, lines)), None, lines, name))
    return node
