"""The program's picture on the dashboard: its DOT source drawn as SVG by Graphviz's `dot`.

Drawn once, when the page first asks: a program does not change while it runs. `dot` is run
as it is (Debian's graphviz), so the picture needs no Python package; without it on the PATH
(or when it fails) the page shows the DOT source as text, which lists the nodes and the
edges between them.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import threading

from absl import logging

from launchpad.program import Program

_DOT_TIMEOUT_SECS = 30.0


@dataclasses.dataclass(frozen=True)
class Picture:
    """`svg`: the drawing (None where none could be made); `text`: the program as text."""

    svg: bytes | None
    text: str


class Graph:
    """The picture of `program`, drawn when first asked (thread-safe)."""

    def __init__(self, program: Program):
        self._program = program
        self._lock = threading.Lock()
        self._picture: Picture | None = None

    def picture(self) -> Picture:
        with self._lock:
            if self._picture is None:
                self._picture = _draw(self._program)
            return self._picture


def _stderr_of(error: Exception) -> str:
    """The end of what dot wrote to stderr before it failed ("" if it did not run)."""
    if isinstance(error, subprocess.CalledProcessError) and error.stderr:
        return error.stderr.decode(errors="replace")[-500:]
    return ""


def _draw(program: Program) -> Picture:
    source = program.to_dot()
    dot = shutil.which("dot")
    if dot is None:
        return Picture(None, source)
    try:
        drawn = subprocess.run([dot, "-Tsvg"], input=source.encode(), capture_output=True,
                               timeout=_DOT_TIMEOUT_SECS, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        logging.warning("The dashboard could not draw program %s with dot: %s %s",
                        program.name, e, _stderr_of(e))
        return Picture(None, source)
    return Picture(drawn.stdout, source)
