"""The local channel between the nodes of a host and their host agent (host_agent.py).

A node under a host agent sends its heartbeats and its telemetry to the agent, not to the
controller: the agent sends them on, one `heartbeats` and one `reports` call per host and
period, so that the controller's load grows with hosts, not nodes::

    node (runner)                        host agent
      Relay.heartbeat(label, index, instance)   --datagram-->   Inbox: the runs heard from
      Relay.report(label, index, instance, sample)  -------->   Inbox: each run's last sample
                                                                every period: heartbeats(runs),
                                                                reports(samples) to the controller

The socket is a Unix datagram socket in a folder private to the user (0700,
private_files.py): no other user can send to it, so what arrives is unpickled. A node whose
agent is gone (its socket refuses) is told so by its heartbeat raising, and its runner then
ends it as it ends a node whose controller is gone.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import threading
from typing import Any

from launchpad import telemetry
from launchpad.launch.runtime.errors import AgentGoneError

SOCKET_ENV = "LAUNCHPAD_AGENT_SOCKET"  # where a node finds its agent (set by the agent)
_MAX_DATAGRAM = 1 << 20



class Relay:
    """A node's heartbeats and telemetry, sent to its host agent at `path`: the methods a
    runner calls on its controller for them, with the same arguments."""

    def __init__(self, path: str):
        self._path = path
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._lock = threading.Lock()

    def _send(self, message: tuple) -> None:
        data = pickle.dumps(message)
        try:
            with self._lock:
                self._socket.sendto(data, self._path)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            raise AgentGoneError(f"the host agent at {self._path} is gone ({e})") from e

    def heartbeat(self, label: str, index: int, instance: str, timeout: float) -> bool:
        """Says this run is alive (the agent passes it on); True, as the agent cannot know
        whether the controller gave it up (the launcher then ends it through the agent).

        Raises:
          AgentGoneError: the agent is gone.
        """
        self._send(("beat", label, index, instance))
        return True

    def report(self, label: str, index: int, instance: str, sample: telemetry.NodeSample,
               timeout: float) -> None:
        self._send(("report", label, index, instance, sample))


class Inbox:
    """The agent's end: a socket at `path`, and what its nodes have said since `take()`."""

    def __init__(self, path: str):
        self.path = path
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(path)
        self._lock = threading.Lock()
        self._beats: dict[tuple[str, int], str] = {}
        self._samples: dict[tuple[str, int], tuple[str, telemetry.NodeSample]] = {}
        threading.Thread(target=self._receive, name="lp-agent-inbox", daemon=True).start()

    def _receive(self) -> None:
        while True:
            try:
                data = self._socket.recv(_MAX_DATAGRAM)
            except OSError:
                return  # closed
            with contextlib.suppress(Exception):  # a malformed message is dropped
                self._keep(pickle.loads(data))

    def _keep(self, message: Any) -> None:
        kind, label, index, instance, *rest = message
        with self._lock:
            self._beats[(label, index)] = instance
            if kind == "report":
                self._samples[(label, index)] = (instance, rest[0])

    def take(self) -> tuple[list[tuple[str, int, str]], list[tuple]]:
        """The runs heard from, and each run's latest sample, since the last take()."""
        with self._lock:
            beats, self._beats = self._beats, {}
            samples, self._samples = self._samples, {}
        return ([(label, index, instance) for (label, index), instance in beats.items()],
                [(label, index, instance, sample)
                 for (label, index), (instance, sample) in samples.items()])

    def close(self) -> None:
        self._socket.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
