"""Where the output of node processes goes: the terminal of a process launch.

    current_terminal  every line of every node on the launcher's stdout, prefixed with the
                      node's [label/index] (coloured when stdout is a terminal), and copied to
                      the node's log in the launch's folder (`launchpad logs` reads it); the
                      default
    output_to_files   one file per node, where Launchpad's was: <dir>/<label>/<index>, dir
                      being $LAUNCHPAD_LOGGING_DIR, else /tmp/launchpad_out (output_files.py:
                      emptied at launch, appended to on a restart, checked since /tmp is
                      shared); a cluster launch keeps them in its run folder instead
                      (<label>.<index>.log), on the filesystem its hosts share
    tmux_session      a tmux session with one window per node: its output, and its input (for
                      a debugger); the session stays open after the program ends for reading

`terminal=` of `lp.launch` picks one, else the LAUNCHPAD_LAUNCH_LOCAL_TERMINAL variable, else
current_terminal. Whatever the terminal, node processes are children of the launcher, so the
controller knows each one's exit status. `log_of(name)` is the file the controller's read_log
serves a node's output from (none under tmux_session).

`say` is the one way launchpad's own code speaks to whoever watches a process (its launcher,
a node, a host agent): a line on stderr.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import itertools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import TextIO

from absl import logging

from launchpad.launch.runtime import output_files, private_files
from launchpad.launch.runtime.line_pump import LinePump

Stdio = tuple[int, int, int]

CURRENT_TERMINAL = "current_terminal"
OUTPUT_TO_FILES = "output_to_files"
TMUX_SESSION = "tmux_session"
TERMINALS = (CURRENT_TERMINAL, OUTPUT_TO_FILES, TMUX_SESSION)
TERMINAL_VARIABLE = "LAUNCHPAD_LAUNCH_LOCAL_TERMINAL"
# Launchpad's terminals that open a window per node (on an X display), and its byobu one:
# what stands for them here.
_LAUNCHPADS = {"xterm": CURRENT_TERMINAL, "gnome-terminal": CURRENT_TERMINAL,
               "gnome-terminal-tabs": CURRENT_TERMINAL, "byobu_session": TMUX_SESSION}


def say(text: str, fresh_line: bool = False) -> None:
    """A line of launchpad's own, `launchpad: TEXT`, on stderr (stdout stays the program's),
    never a failure of its caller (a terminal gone: SIGHUP; a closed file). `fresh_line`:
    on a line of its own, past a ^C the terminal echoed."""
    with contextlib.suppress(OSError, ValueError):
        print(("\n" if fresh_line else "") + f"launchpad: {text}", file=sys.stderr, flush=True)


def choose(terminal: str | None) -> str:
    """The terminal to use: `terminal`, else $LAUNCHPAD_LAUNCH_LOCAL_TERMINAL, else the default."""
    chosen = terminal or os.environ.get(TERMINAL_VARIABLE) or CURRENT_TERMINAL
    if chosen in _LAUNCHPADS:
        logging.info("terminal %r (Launchpad's) opens no windows here: %r instead (a tmux "
                     "window per node: terminal='tmux_session')", chosen, _LAUNCHPADS[chosen])
        chosen = _LAUNCHPADS[chosen]
    if chosen not in TERMINALS:
        where = "terminal=" if terminal else f"${TERMINAL_VARIABLE}"
        raise ValueError(f"Unknown terminal {chosen!r} (from {where}); terminals of process "
                         f"launchers: {', '.join(TERMINALS)}")
    if chosen == TMUX_SESSION and shutil.which("tmux") is None:
        raise ValueError("terminal='tmux_session' needs tmux, which is not installed "
                         "(apt-get install tmux)")
    return chosen


class Terminal(abc.ABC):
    """Gives each node process its stdin, stdout and stderr."""

    # Whether node output shows where the launcher's own does: then a node leaves its
    # failure to the launcher to say (once, as wait()'s error), and `add_to_log` keeps it.
    shows_output = False

    @abc.abstractmethod
    def open(self, name: str) -> tuple[Stdio, bool]:
        """File descriptors for the process of node `name` (opened anew on each restart),
        and whether the caller closes them once the process holds its own copies."""

    @abc.abstractmethod
    def close(self) -> None:
        """Called once every node process has ended."""

    def log_of(self, name: str) -> str:
        """The file node `name`'s output is kept in while the program runs (the protocol's
        read_log reads it there).

        Raises:
          LookupError: this terminal keeps none (the message says where the output goes).
        """
        raise LookupError(f"the output of node {name} is kept in no file")

    def writing(self, name: str) -> bool:
        """Whether output of node `name`'s processes may still be on its way to its log."""
        return False

    def add_to_log(self, name: str, text: str) -> None:
        """Appends `text` to node `name`'s log and not to the screen: a failure the node left
        the launcher to show (see `shows_output`). Nothing where the node's output is not
        on the launcher's screen: the node wrote it there itself."""
        del name, text


@dataclasses.dataclass(frozen=True)
class NodeOutput:
    """Where the node processes of a launch write: its private folder (their specs, the logs
    its terminal keeps: a local launch's work folder, a Slurm run's folder), the terminal,
    and the folder whose logs stay after the program ends (None: none stay). A launcher's
    plan makes it before the controller, which is given it."""

    folder: str
    terminal: Terminal
    log_dir: str | None


def make(terminal: str, program_name: str, folder: str, keep_logs: bool = False,
         nodes: Sequence[str] | None = None) -> Terminal:
    """The terminal; with `keep_logs`, current_terminal also keeps each node's log in
    `folder` (as cluster launches do: the nodes' own hosts keep nothing). output_to_files
    writes the files of `nodes` (their names) in Launchpad's place, made ready now; without
    `nodes` (a cluster launch) in the run folder, which every host of the launch shares.

    Raises:
      UnsafePathError: output_to_files' folder or a node's file is not safe (named).
      ValueError: output_to_files cannot make a folder of a group's label.
    """
    if terminal == OUTPUT_TO_FILES:
        return FilesTerminal(program_name, folder, nodes)
    if terminal == TMUX_SESSION:
        return TmuxTerminal(program_name, folder)
    return CurrentTerminal(sys.stdout, folder if keep_logs else None)


def log_path(folder: str, name: str) -> str:
    """`<folder>/<label>.<index>.log`: node `name`'s log."""
    return os.path.join(folder, f"{name.replace('/', '.')}.log")


class CurrentTerminal(Terminal):
    """Prefixes each line of each node with its name and writes it to `out` (and, given a
    `log_dir`, appends it unprefixed to the node's log there)."""

    _COLOURS = (32, 34, 35, 36, 33, 31)  # green, blue, magenta, cyan, yellow, red
    shows_output = True

    def __init__(self, out: TextIO, log_dir: str | None = None):
        self._out = out
        self._log_dir = log_dir
        colour = out.isatty() and "NO_COLOR" not in os.environ
        self._colour = colour
        self._colours = itertools.cycle(self._COLOURS)
        self._pump = LinePump(out)

    def open(self, name: str) -> tuple[Stdio, bool]:
        prefix = f"[{name}] "
        if self._colour:
            prefix = f"\x1b[1;{next(self._colours)}m[{name}]\x1b[0m "
        read_end, write_end = os.pipe()
        log = None if self._log_dir is None else os.open(
            log_path(self._log_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._pump.add(read_end, prefix, log, name)
        return (os.open(os.devnull, os.O_RDONLY), write_end, write_end), True

    def close(self) -> None:
        self._pump.close(timeout=5.0)

    def log_of(self, name: str) -> str:
        if self._log_dir is None:
            return super().log_of(name)
        return log_path(self._log_dir, name)

    def writing(self, name: str) -> bool:
        return self._pump.writing(name)

    def add_to_log(self, name: str, text: str) -> None:
        if self._log_dir is None:
            return
        with contextlib.suppress(OSError):  # a log that cannot be written loses only this
            log = os.open(log_path(self._log_dir, name), os.O_WRONLY | os.O_APPEND)
            try:
                os.write(log, (text.rstrip("\n") + "\n").encode(errors="replace"))
            finally:
                os.close(log)


class FilesTerminal(Terminal):
    """Writes each node's output to a file of its own, which a restart appends to: with
    `nodes`, Launchpad's `<logging dir>/<label>/<index>` (output_files.py), made ready at
    construction; without, `<folder>/<label>.<index>.log` (a cluster launch's run folder).
    `folder` is where they are, and stay after the program ends."""

    def __init__(self, program_name: str, folder: str, nodes: Sequence[str] | None = None):
        if nodes is None:
            self.folder = folder
            self._use = private_files.RUN_FILES
            say(f"output of the nodes of {program_name!r} goes to {folder}/")
        else:
            self.folder = output_files.prepare(nodes)
            self._use = output_files.USE
            say(f"Logs are being output to: {self.folder}. The logging directory can be "
                f"customized by setting the {output_files.LOGGING_DIR_VARIABLE} environment "
                f"variable.")
        self._launchpads = nodes is not None

    def open(self, name: str) -> tuple[Stdio, bool]:
        log = private_files.append_private(self.log_of(name), self._use)
        return (os.open(os.devnull, os.O_RDONLY), log, log), True

    def close(self) -> None:
        """The files stay."""

    def log_of(self, name: str) -> str:
        if self._launchpads:
            return output_files.path_of(self.folder, name)
        return log_path(self.folder, name)


class TmuxTerminal(Terminal):
    """One tmux window per node, in a session named after the program and launch.

    Each window runs an idle placeholder; the node process is the launcher's child and uses the
    window's terminal as its stdin, stdout and stderr, so its output shows there and a debugger
    can read from it. Attach with `tmux attach -t <session>`; the session outlives the program
    so its output can be read, until `tmux kill-session -t <session>`.
    """

    _PLACEHOLDER = ["sh", "-c", "trap '' INT; exec sleep infinity"]

    def __init__(self, program_name: str, folder: str):
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in program_name)
        self.session = f"launchpad-{safe}-{os.path.basename(folder).rsplit('-', 1)[-1]}"
        self._started = False
        self._lock = threading.Lock()
        say(f"nodes of {program_name!r} run in tmux session {self.session!r}: "
            f"tmux attach -t {self.session}")

    def open(self, name: str) -> tuple[Stdio, bool]:
        with self._lock:
            if not self._started:
                command = ["new-session", "-d", "-s", self.session, "-x", "200", "-y", "50"]
                self._started = True
            else:
                command = ["new-window", "-d", "-t", f"{self.session}:"]
            tty = _tmux(*command, "-n", name, "-P", "-F", "#{pane_tty}", *self._PLACEHOLDER)
        fd = os.open(tty, os.O_RDWR | os.O_NOCTTY)
        return (fd, fd, fd), True

    def close(self) -> None:
        """The session stays open, so the nodes' output can be read."""

    def log_of(self, name: str) -> str:
        raise LookupError(f"the output of node {name} goes to its window of tmux session "
                          f"{self.session!r} (tmux attach -t {self.session}), not to a file")


def _tmux(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}  # nested launches work too
    result = subprocess.run(["tmux", *args], capture_output=True, text=True, env=env,
                            timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"tmux {' '.join(args[:1])} failed: {result.stderr.strip()}")
    return result.stdout.strip()
