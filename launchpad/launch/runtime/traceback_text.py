"""A node's traceback as a user reads it: their own frames, without launchpad's.

A node's failure passes through our code on its way to the user: the runner that ran it, the
node type that built its object, the courier client whose call failed, the server that found
no such method. Those frames tell the user nothing they can act on and bury the two that do:
where in their code it happened, and what went wrong. `shorten` takes a formatted traceback
(text: it travelled from the node's process, maybe from another host) and leaves out

- every frame in a file of the launchpad package (its source and caret lines with it),
- a chained section (a cause, or the exception being handled) left with no frame at all: a
  call's remote traceback that was only our server saying what the last line says again, and
- the caret lines (`~~~^^^`) under the source lines kept: a line each, on every frame under
  Python 3.13, that rarely says more than the source line.

Everything else stays as Python wrote it. `--lp_verbose_errors` (or
LAUNCHPAD_VERBOSE_ERRORS=1, which the flag sets for the launch's processes) keeps it all.
"""

from __future__ import annotations

import os
import re
import sys
import traceback

VERBOSE_VARIABLE = "LAUNCHPAD_VERBOSE_ERRORS"
HIDDEN_NOTE = "launchpad's frames hidden: --lp_verbose_errors shows them"

_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]launchpad[/\\]")
_FRAME = re.compile(r'^(?P<indent> *)File "(?P<file>[^"]+)", line \d+, in ')
_CARETS = re.compile(r"^ +[~^]+ *$")  # under a source line: where in it (Python 3.11+)
_CHAINS = ("The above exception was the direct cause of the following exception:",
           "During handling of the above exception, another exception occurred:")
HEADER = "Traceback (most recent call last):"


def verbose() -> bool:
    """Whether tracebacks are shown whole (the user asked for launchpad's frames too)."""
    return os.environ.get(VERBOSE_VARIABLE, "").lower() not in ("", "0", "false", "no")


def is_ours(path: str) -> bool:
    """Whether `path` is a file of the launchpad package (here, or installed on any host)."""
    return path.startswith(_PACKAGE + os.sep) or bool(_INSTALLED.search(path))


def print_exception(error: BaseException) -> None:
    """Prints `error`'s traceback, shortened, on stderr (where a node's own output goes)."""
    text, hidden = shorten("".join(traceback.format_exception(error)))
    print(headed(text, hidden), file=sys.stderr, flush=True)


def headed(text: str, hidden: bool, header: str = "Traceback") -> str:
    """`text` (a shortened traceback) under `header`: its own header line becomes
    'HEADER (most recent call last...):', saying when frames were hidden."""
    if text.startswith(HEADER + "\n"):
        note = f"; {HIDDEN_NOTE}" if hidden else ""
        return f"{header} (most recent call last{note}):\n{text[len(HEADER) + 1:]}"
    note = f" ({HIDDEN_NOTE})" if hidden else ""
    return f"{header}{note}:\n{text}"


def shorten(text: str) -> tuple[str, bool]:
    """`text` (a formatted traceback) without launchpad's frames (nor the caret lines under
    the source lines kept), and whether any frames were left out; `text` itself under
    `verbose()`."""
    if verbose():
        return text, False
    sections = _sections(text.rstrip("\n").split("\n"))
    joined: list[str] = []
    hidden = False
    for position, (chain, section) in enumerate(sections):
        lines, frames, dropped = _without_our_frames(section)
        hidden = hidden or dropped > 0
        if frames == 0 and dropped > 0 and position < len(sections) - 1:
            continue  # only our frames, on the way to what the next section says
        joined += (["", chain, ""] if joined else []) + lines
    return "\n".join(joined), hidden


def _sections(lines: list[str]) -> list[tuple[str, list[str]]]:
    """The chained exceptions of a traceback, cause first, each with the line that chained
    it to the one before ('' for the first)."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in lines:
        if line.strip() in _CHAINS and not line.startswith(" "):
            while sections[-1][1] and not sections[-1][1][-1].strip():
                sections[-1][1].pop()
            sections.append((line.strip(), []))
        elif line.strip() or sections[-1][1]:
            sections[-1][1].append(line)
    return [(chain, section) for chain, section in sections if section]


def _without_our_frames(lines: list[str]) -> tuple[list[str], int, int]:
    """`lines` without our frames (each frame's File line and the lines indented under it),
    and without a header line left with no frame under it; with the counts of frames kept
    and left out."""
    kept: list[str] = []
    frames = dropped = 0
    skipping_under: int | None = None  # the indent of the frame being left out
    for line in lines:
        if skipping_under is not None:
            if len(line) - len(line.lstrip(" ")) > skipping_under and line.strip():
                continue
            skipping_under = None
        if _CARETS.match(line):
            continue
        match = _FRAME.match(line)
        if match and is_ours(match["file"]):
            dropped += 1
            skipping_under = len(match["indent"])
            continue
        frames += bool(match)
        kept.append(line)
    out = [line for position, line in enumerate(kept)
           if line.strip() != HEADER or _frame_follows(kept, position)]
    return out, frames, dropped


def _frame_follows(lines: list[str], position: int) -> bool:
    return position + 1 < len(lines) and bool(_FRAME.match(lines[position + 1]))
