"""`lp.render_program(program, path)`: a program's picture (`Program.to_dot()`) drawn by
Graphviz into a file, as SVG, PNG or PDF, the format given by the path's suffix.

`.dot` (or `.gv`) writes the DOT source itself and needs nothing installed. Drawing needs the
`graphviz` Python package (`pip install 'launchpad-next[graph]'`), imported here only when a
picture is drawn, and Graphviz's `dot` program (Debian: `apt-get install graphviz`).
"""

from __future__ import annotations

import os
import pathlib

from launchpad.program import Program

DRAWN = ("svg", "png", "pdf")
SOURCE = ("dot", "gv")


def render_program(program: Program, path: str | os.PathLike, *,
                   collapse_at: int | None = 3, legend: bool = True) -> pathlib.Path:
    """Writes the picture of `program` to `path`; returns the path.

    Args:
      program: the program to draw.
      path: where to write; its suffix (.svg, .png, .pdf, or .dot/.gv for the DOT source)
        says the format.
      collapse_at, legend: as for `Program.to_dot`.

    Raises:
      ValueError: the suffix names no format above.
      ImportError: the graphviz package is not installed.
      RuntimeError: Graphviz's `dot` program is not installed, or it failed.
    """
    if not isinstance(program, Program):
        raise TypeError(f"render_program draws an lp.Program, got {program!r}")
    path = pathlib.Path(path)
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in DRAWN + SOURCE:
        raise ValueError(f"Cannot draw a program into {str(path)!r}: the file's suffix must "
                         f"be one of {', '.join('.' + s for s in DRAWN + SOURCE)}")
    source = program.to_dot(collapse_at=collapse_at, legend=legend)
    path.write_bytes(source.encode() if suffix in SOURCE else _draw(source, suffix))
    return path


def _draw(source: str, file_format: str) -> bytes:
    """`source` laid out by Graphviz's dot, in `file_format`."""
    try:
        import graphviz
    except ImportError as e:
        raise ImportError("Drawing a program needs the graphviz package: pip install "
                          "'launchpad-next[graph]'") from e
    try:
        return graphviz.Source(source).pipe(format=file_format)
    except graphviz.ExecutableNotFound as e:
        raise RuntimeError("Drawing a program needs Graphviz's `dot` program, which is not "
                           "on PATH: install Graphviz (Debian and Ubuntu: apt-get install "
                           "graphviz)") from e
    except graphviz.CalledProcessError as e:
        error = (e.stderr or b"").decode(errors="replace").strip()
        raise RuntimeError(f"Graphviz's dot could not draw the program: {error}") from e
