"""Launchpad: distributed programs of Python services, described as a graph.

    import launchpad as lp
    program = lp.Program("name")
    handle = program.add_node(lp.CourierNode(Server), label="server")
    program.add_node(lp.PyNode(client_main, handle), label="client")
    lp.launch(program, launch_type="local_mt").wait()

This module is the public API and nothing else: every name of Launchpad's (0.5.2 and its
last commit), and ours. It imports neither TensorFlow nor Reverb.
"""

from launchpad import context, courier, flags, lazy_loader
from launchpad.address import (
    AbstractAddressBuilder,
    Address,
    SimpleLocalAddressBuilder,
    get_port_from_address,
)
from launchpad.context import LaunchType, is_local_launch, is_local_launch_or_test
from launchpad.courier import TLS, GroupCallError, batched_handler, list_methods
from launchpad.flags import LAUNCH_TYPE
from launchpad.launch import launchers as _launchers
from launchpad.launch.attach import attach
from launchpad.launch.launch import launch
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.controllers import ProgramController, RemoteController
from launchpad.launch.runtime.errors import (
    LaunchError,
    NodeEndedError,
    NodeFailedError,
    NodeNotReadyError,
    NodeSerializationError,
    ProgramStoppedError,
    UnknownNodeError,
)
from launchpad.launch.runtime.resources import Resources
from launchpad.nodes.base import Handle, Node
from launchpad.nodes.cacher import CacherNode
from launchpad.nodes.colocation import MultiProcessingColocation, MultiThreadingColocation
from launchpad.nodes.courier.node import CourierClient, CourierHandle, CourierNode
from launchpad.nodes.dereference import Deferred
from launchpad.nodes.errors import ColocationError, StaleDataError
from launchpad.nodes.group import GroupHandle
from launchpad.nodes.python.local_multi_processing import PythonProcess
from launchpad.nodes.python.node import PyClassNode, PyNode
from launchpad.nodes.python.xm_docker import DockerConfig
from launchpad.nodes.replicated import ReplicatedNode
from launchpad.nodes.reverb.node import ReverbNode
from launchpad.program import Program, RestartPolicy, StatePolicy, make_program
from launchpad.render import render_program
from launchpad.stopping import (
    make_program_stopper,
    register_stop_handler,
    stop,
    stop_event,
    unregister_stop_handler,
    wait_for_stop,
)

__all__ = [
    # Graph
    "Program", "RestartPolicy", "StatePolicy", "make_program", "render_program",
    # Nodes and handles
    "Node", "Handle", "PyNode", "PyClassNode", "CourierNode", "CourierHandle", "CourierClient",
    "Deferred",
    "MultiThreadingColocation", "MultiProcessingColocation", "ColocationError", "ReverbNode",
    "CacherNode", "StaleDataError", "ReplicatedNode", "GroupHandle", "GroupCallError",
    # Courier
    "courier", "batched_handler", "list_methods", "TLS",
    # Launch
    "launch", "LaunchType", "LAUNCH_TYPE", "flags", "context", "lazy_loader", "is_local_launch",
    "is_local_launch_or_test", "Controller", "PythonProcess", "DockerConfig", "Resources",
    "attach", "RemoteController", "ProgramController",
    "LaunchError", "NodeEndedError", "NodeFailedError", "NodeNotReadyError",
    "NodeSerializationError", "ProgramStoppedError",
    "UnknownNodeError",
    # Stop
    "stop", "wait_for_stop", "stop_event", "register_stop_handler", "unregister_stop_handler",
    "make_program_stopper",
    # Addressing
    "Address", "get_port_from_address", "AbstractAddressBuilder", "SimpleLocalAddressBuilder",
    # Each engine's (its settings, its errors: launch/launchers.py), imported when first used
    *_launchers.exports(),
]


def __getattr__(name: str) -> object:
    """An engine's name (`lp.SlurmSettings`), from its row of the table of engines."""
    if name not in _launchers.exports():
        raise AttributeError(f"module 'launchpad' has no attribute {name!r}")
    engine, reference = _launchers.exports()[name]
    value = engine.load(reference)
    globals()[name] = value  # (found without this function from now on)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
