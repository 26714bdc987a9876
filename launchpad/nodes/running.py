"""How a node's code runs: inside its context, with its addresses registered and its state
kept (lp.StatePolicy), wherever a launcher put it (a thread, a process, a colocation)."""

from __future__ import annotations

import contextlib
import typing
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import portpicker

from launchpad import context
from launchpad.nodes import thread_interrupt
from launchpad.nodes.errors import Interrupted

if TYPE_CHECKING:
    from launchpad.nodes.base import Node


@typing.runtime_checkable
class Runnable(typing.Protocol):
    """An object a node built whose `run()` is the node's work (a PyClassNode's, a
    CourierNode's or a ReplicatedNode's trainer): without one, the node serves it until the
    program stops."""

    def run(self) -> Any:
        """The node's work; the node ends when it returns."""


@contextlib.contextmanager
def running_context() -> Iterator[context.NodeContext]:
    """The context a node's run sees: its own, or - for a node run outside any launch - the
    process's standalone one, entered for the run (so the node's code finds it)."""
    found = context.current_or_none()
    if found is not None:
        yield found
        return
    outside = context.outside()
    token = context.enter(outside)
    try:
        yield outside
    finally:
        context.leave(token)


def running_state() -> Any:
    """The saved states of the node running here (a NodeState of the launcher's), or None
    when its group keeps no state or no launched node runs here."""
    found = context.current_or_none()
    return found.state if found is not None else None


def run_keeping_state(run: Callable[[], Any]) -> None:
    """Runs a node's object's `run()`. When the node keeps state: a save that fails ends the
    run at once, as the node's failure (thread_interrupt.py); a run that raises saves the
    state first, its object still able to answer (for the restart, or a later resume)."""
    state = running_state()
    if state is None or not state.attached:
        run()
        return
    interrupt = thread_interrupt.ThreadInterrupt()
    state.when_save_fails(interrupt.fire)
    try:
        try:
            run()
        except Exception:
            state.save_after_failure(context.current().termination_notice_secs)
            raise
        finally:
            state.when_save_fails(None)
            interrupt.disarm()
    except Interrupted:
        raise state.failure from None
    if state.failure is not None:
        raise state.failure


def run_in_context(node: Node, node_context: context.NodeContext) -> BaseException | None:
    """Runs `node` on this thread inside `node_context`; returns what it raised, or None.

    The one place a node's code runs: in a runner (a thread or process a launcher started)
    and in a MultiThreadingColocation's threads. Whoever called it reports the outcome.

    First every address the node allocated (but those its servers register themselves) gets
    a free port of this host, registered with the program's controller, so that
    `Address.resolve()` works anywhere in the program once the node's code runs."""
    if node.launch_context.initialized:
        node_context.launch_config = node.launch_context.launch_config
    token = context.enter(node_context)
    try:
        if not node_context.standalone:
            for address in node.own_addresses():
                if not address.registered_by_node and not address.bound:
                    node_context.controller.register(
                        node.label, node.index, address.name,
                        node_context.endpoint(portpicker.pick_unused_port()))
        node.run()
    except BaseException as e:  # noqa: BLE001 - the caller reports it, whatever it is
        return e
    finally:
        context.leave(token)
    return None
