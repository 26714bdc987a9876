"""The node runner: runs one node from its spec, wherever a launcher started it.

    python -m launchpad.launch --spec PATH      (--spec - reads the spec from stdin)

Launchers only decide where a runner starts - a thread of the launching process
(`run_in_thread`), a fork of the fork server, a fresh interpreter, a Slurm job step - and the
runner does the rest, the same everywhere::

    spec -> node context (the address to bind, the controller's client)
         -> node_started -> heartbeats (a thread) -> node.run()
         -> node_finished, or node_failed (reason, traceback, exception) -> exit 0 / 1

The node reports how it ended over the controller protocol (control.py); what its launcher
sees (a thread returning, an exit code, a step's state) is the fallback for a node that died
without a word. A stop watcher holds a call to the controller that returns when the program
stops: then the node's stop event is set and its stop handlers run. If the controller is gone
(the launching process was killed), stops answering heartbeats (a cut network), or has given
this run of the node up (it was declared lost and restarted elsewhere), the node is stopped the
same way, and its process exits once the grace period is over: nothing is orphaned.

Only what the node needs is imported here: the courier client and the node's own code.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
import threading
import time
import traceback
from typing import Any

import cloudpickle
from absl import flags
from absl import logging as absl_logging

from launchpad import address, context, control
from launchpad.launch.node_process import agent_relay, process_tree, reporting, slot_binding
from launchpad.launch.runtime import (
    errors,
    private_files,
    process,
    spec,
    state_store,
    terminals,
    traceback_text,
)
from launchpad.nodes import base, running

EXIT_NODE_RAISED = 1
EXIT_ORPHANED = 75  # EX_TEMPFAIL: the node outlived its program's controller


def new_instance() -> str:
    """A name for one run of a node (see control.py)."""
    return secrets.token_hex(8)


def report(node_context: context.NodeContext, instance: str,
           error: BaseException | None) -> bool:
    """Tells the controller how the node's run ended; False if the controller is gone (the
    launcher's own observation then decides)."""
    controller = node_context.controller
    try:
        if error is None:
            controller.node_finished(node_context.label, node_context.index, instance)
        else:
            controller.node_failed(node_context.label, node_context.index, instance,
                                   f"{type(error).__name__}: {error}",
                                   "".join(traceback.format_exception(error)), error)
    except Exception:  # noqa: BLE001 - gone
        return False
    return True


def run_in_thread(node: base.Node, node_context: context.NodeContext) -> BaseException | None:
    """Runs `node` on this thread of the launching process and reports how it ended."""
    instance = new_instance()
    node_context.controller.node_started(node_context.label, node_context.index, instance,
                                         node_context.host, os.getpid(), False)
    reporting.start(node_context, instance, own_process=False)
    error = running.run_in_context(node, node_context)
    report(node_context, instance, error)
    return error


def _endpoints(bind_host: str, controller_address: str) -> tuple[str, str]:
    """(the interface to bind, the address others reach this host at)."""
    if bind_host not in (spec.ROUTED, "0.0.0.0"):
        return bind_host, bind_host
    routed = address.routed_host(controller_address.rsplit(":", 1)[0])
    return (routed if bind_host == spec.ROUTED else bind_host), routed


def _make_context(node_spec: spec.NodeSpec) -> context.NodeContext:
    bind_host, host = _endpoints(node_spec.bind_host, node_spec.controller_address)
    return context.NodeContext(
        program_name=node_spec.program_name, label=node_spec.label, index=node_spec.index,
        controller_address=node_spec.controller_address, token=node_spec.token,
        process_starter=process.ChildProcessStarter(node_spec.termination_notice_secs,
                                                    in_worker=True),
        bind_host=bind_host, host=host, tls=node_spec.tls,
        termination_notice_secs=node_spec.termination_notice_secs,
        launch_type=node_spec.launch_type, one_host=node_spec.one_host,
        state=state_store.NodeState.of(node_spec.state, node_spec.name))


class _Watch:
    """Ends this process when it outlives its program (see the module doc)."""

    def __init__(self, node_context: context.NodeContext, instance: str,
                 node_spec: spec.NodeSpec, relay: agent_relay.Relay | None):
        self._context = node_context
        self._instance = instance
        self._spec = node_spec
        self._beats_to = relay or node_context.controller  # a host agent passes them on
        self._ending = threading.Lock()

    def start(self) -> None:
        threading.Thread(target=self._watch_stop, name="lp-stop-watcher", daemon=True).start()
        if self._spec.heartbeat_secs > 0:
            threading.Thread(target=self._beat, name="lp-heartbeat", daemon=True).start()

    def _watch_stop(self) -> None:
        controller = self._context.controller
        with contextlib.suppress(Exception):  # an error means the controller is gone
            controller.wait_for_stop(self._context.label, self._context.index)
        stopped_at = time.monotonic()
        self._context.notify_stop()
        with contextlib.suppress(Exception):
            controller.wait_for_end()
        self._end(stopped_at, "its program has ended")

    def _beat(self) -> None:
        every = self._spec.heartbeat_secs
        lost_after = max(self._spec.liveness_timeout_secs, every)
        last_answer = time.monotonic()
        controller = self._beats_to
        while True:
            time.sleep(every)  # the heartbeat's period, not a wait for something to happen
            try:
                if not controller.heartbeat(self._context.label, self._context.index,
                                            self._instance, timeout=every):
                    why = "its controller has given this run of it up"
                    break
                last_answer = time.monotonic()
            except errors.AgentGoneError:
                why = "its host agent is gone"
                break
            except Exception:  # noqa: BLE001 - no answer: counts against the timeout
                if time.monotonic() - last_answer > lost_after:
                    why = f"its controller has not answered for {lost_after:g}s"
                    break
        stopped_at = time.monotonic()
        self._context.notify_stop()
        self._end(stopped_at, why)

    def _end(self, stopped_at: float, why: str) -> None:
        if not self._ending.acquire(blocking=False):
            return  # the other watcher ends the process
        grace = self._spec.termination_notice_secs
        time.sleep(max(0.0, grace - (time.monotonic() - stopped_at)))  # the grace period
        terminals.say(f"node {self._context.name}: {why}; exiting")
        exit_process(EXIT_ORPHANED)


def quiet_tensorflow_notes() -> None:
    """TensorFlow's C++ start-up notes (cpu_feature_guard's, oneDNN's) are INFO lines, one
    block per process that imports it: quiet unless the user sets the level (0 shows them
    again). Set before TensorFlow is imported (it reads the level once)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


def run_process(node_spec: spec.NodeSpec) -> int:
    """Runs the node of `node_spec` as this process; returns the exit code for it."""
    for entry in reversed(node_spec.sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    os.environ.update(node_spec.env)
    slot_binding.bind()  # its share of the host's CPUs and GPUs, under a host agent
    agent = os.environ.pop(agent_relay.SOCKET_ENV, "")
    relay = agent_relay.Relay(agent) if agent else None
    quiet_tensorflow_notes()
    if node_spec.argv:
        sys.argv[:] = node_spec.argv
    process_tree.adopt_orphans()  # what the node starts is found, and ended, at its exit
    _wait_for_controller(node_spec)
    node_context = _make_context(node_spec)
    context.add_process_context(node_context)
    instance = new_instance()
    child = bool(node_spec.report_path)  # a colocated child reports to its parent node
    if not child:
        try:
            node_context.controller.node_started(node_spec.label, node_spec.index, instance,
                                                 node_context.host, os.getpid(),
                                                 node_spec.heartbeat_secs > 0)
        except Exception as e:  # noqa: BLE001 - nobody to run for
            terminals.say(f"node {node_spec.name}: cannot reach its controller at "
                          f"{node_spec.controller_address} ({type(e).__name__}: {e}); exiting")
            return EXIT_ORPHANED
    _Watch(node_context, instance, node_spec, relay).start()
    if not child:
        reporting.start(node_context, instance, own_process=True, sink=relay)
    _stop_on_signals(node_context, node_spec.stop_signals)
    try:
        node: Any = cloudpickle.loads(node_spec.node)
        _start_absl(node_spec.argv)
    except BaseException as e:  # noqa: BLE001 - a node that cannot load has failed
        error: BaseException | None = e
    else:
        error = running.run_in_context(node, node_context)
    if node_context.stop_event.is_set():
        # The node returned on the stop: its stop handlers may still run (e.g. saving, or
        # telling another node), and must finish before the process ends.
        node_context.handlers_done.wait(node_spec.termination_notice_secs)
    told = False
    if child and error is not None:
        spec.write_report(node_spec.report_path, error)  # its parent node says it
    elif not child:
        told = report(node_context, instance, error)
    if error is None:
        return 0
    if node_context.stop_event.is_set():
        # Most likely a consequence of the stop (a node it called has ended): one line, the
        # launcher logs it as a failure during the stop; the report has the traceback.
        terminals.say(f"node {node_spec.name} raised while its program stopped: "
                      f"{type(error).__name__}: {error}")
    elif not child and not (told and node_spec.failure_shown_by_launcher):
        traceback_text.print_exception(error)
    return EXIT_NODE_RAISED


def run_standalone(path: str) -> int:
    """Runs the node pickled at `path` (a private file) outside any launch; its exit code."""
    try:
        node: Any = cloudpickle.loads(private_files.read_private(path))
        node.run()
    except BaseException as e:  # noqa: BLE001 - the exit code and traceback tell the parent
        traceback.print_exception(e)
        return EXIT_NODE_RAISED
    return 0


def _wait_for_controller(node_spec: spec.NodeSpec) -> None:
    """Waits up to `controller_wait_secs` for the controller to answer: a pod may start before
    its controller's pod (and before its Service's name resolves). Another host's server
    coming up sends no event, so this asks again, less and less often, until the deadline;
    then the node goes on and fails to reach it, named (see run_process)."""
    deadline = time.monotonic() + node_spec.controller_wait_secs
    host = node_spec.controller_address.rsplit(":", 1)[0]
    pause = 0.1
    while time.monotonic() < deadline:
        try:
            address.routed_host(host)  # the name resolves
            control.client_for(node_spec.controller_address, node_spec.token,
                               node_spec.tls).ping(timeout=max(1.0, pause))
            return
        except Exception as e:  # noqa: BLE001 - not up yet: asked again until the deadline
            if pause == 0.1:  # said once, so that the pod's log tells why it idles
                terminals.say(f"node {node_spec.name}: waiting up to "
                              f"{node_spec.controller_wait_secs:g}s for its controller at "
                              f"{node_spec.controller_address} ({type(e).__name__}: {e})")
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 2.0)


def _stop_on_signals(node_context: context.NodeContext, stop_signals: dict[str, str]) -> None:
    """Each signal the engine sends before it ends the node (e.g. Slurm's time-limit warning)
    stops the whole program, gracefully, saying why."""
    for name, why in stop_signals.items():
        reason = f"{why} (node {node_context.name} got {name})"

        def on_signal(*_: Any, reason: str = reason) -> None:
            threading.Thread(target=node_context.controller.request_stop, args=(reason,),
                             daemon=True).start()
        signal.signal(signal.Signals[name], on_signal)


def _start_absl(argv: list[str]) -> None:
    """What `absl.app.run` does for a script, done for the node, as Launchpad's node processes
    did: its absl flags are parsed from its arguments (its code is imported by now, so its
    flags are defined; others are left alone), and absl logging goes to stderr at the flags'
    verbosity, INFO by default, so a node's `logging.info` shows as under local_mt."""
    if not flags.FLAGS.is_parsed():
        flags.FLAGS(argv or [sys.argv[0]], known_only=True)
        if flags.FLAGS["verbosity"].using_default_value:
            flags.FLAGS.verbosity = 0  # INFO, as app.run sets it
    absl_logging.use_absl_handler()


def exit_process(code: int) -> None:
    """Ends the process now: a node is done when its code returns, whatever threads it left
    (the same as under local_mt), and whatever processes it started end with it
    (process_tree.py); output is flushed first."""
    process_tree.end_descendants()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def read_spec(source: str) -> spec.NodeSpec:
    """The spec from a private file, or from stdin when `source` is '-'. (A Kubernetes pod's
    node reads its own from the pod's volumes: kubernetes/pod.py.)"""
    if source == "-":
        return spec.decode(sys.stdin.buffer.read())
    return spec.read_spec_file(source)

