"""Launchpad: distributed programs of Python services, described as a graph.

    import launchpad as lp
    program = lp.Program("name")
    handle = program.add_node(lp.CourierNode(Server), label="server")
    program.add_node(lp.PyNode(client_main, handle), label="client")
    lp.launch(program, launch_type="local_mt").wait()

This module is the public API and nothing else. It imports neither TensorFlow nor Reverb.
"""

from launchpad import courier
from launchpad.address import Address, get_port_from_address
from launchpad.courier import TLS, batched_handler, list_methods
from launchpad.launch.attach import attach
from launchpad.launch.controller import Controller
from launchpad.launch.docker import DockerConfig
from launchpad.launch.errors import (
    KubernetesError,
    LaunchError,
    NodeEndedError,
    NodeFailedError,
    NodeNotReadyError,
    ProgramStoppedError,
    SlurmError,
    UnknownNodeError,
)
from launchpad.launch.kubernetes_manifests import kubernetes_manifests
from launchpad.launch.kubernetes_settings import KubernetesSettings
from launchpad.launch.launch import LaunchType, launch
from launchpad.launch.process import PythonProcess
from launchpad.launch.ray_settings import RaySettings
from launchpad.launch.remote import RemoteController
from launchpad.launch.resources import Resources
from launchpad.launch.slurm_settings import SlurmSettings
from launchpad.nodes.base import Deferred, Handle, Node
from launchpad.nodes.cacher import CacherNode, StaleDataError
from launchpad.nodes.colocation import (
    ColocationError,
    MultiProcessingColocation,
    MultiThreadingColocation,
)
from launchpad.nodes.courier import CourierNode
from launchpad.nodes.python import PyClassNode, PyNode
from launchpad.nodes.replicated import ReplicatedNode
from launchpad.nodes.reverb import ReverbNode
from launchpad.program import Program, RestartPolicy, make_program
from launchpad.render import render_program
from launchpad.stopping import (
    register_stop_handler,
    stop,
    stop_event,
    unregister_stop_handler,
    wait_for_stop,
)

__all__ = [
    # Graph
    "Program", "RestartPolicy", "make_program", "render_program",
    # Nodes and handles
    "Node", "Handle", "PyNode", "PyClassNode", "CourierNode", "Deferred",
    "MultiThreadingColocation", "MultiProcessingColocation", "ColocationError", "ReverbNode",
    "CacherNode", "StaleDataError", "ReplicatedNode",
    # Courier
    "courier", "batched_handler", "list_methods", "TLS",
    # Launch
    "launch", "LaunchType", "Controller", "PythonProcess", "DockerConfig", "Resources",
    "SlurmSettings", "SlurmError", "RaySettings", "KubernetesSettings", "KubernetesError",
    "kubernetes_manifests", "attach", "RemoteController",
    "LaunchError", "NodeEndedError", "NodeFailedError", "NodeNotReadyError", "ProgramStoppedError",
    "UnknownNodeError",
    # Stop
    "stop", "wait_for_stop", "stop_event", "register_stop_handler", "unregister_stop_handler",
    # Addressing
    "Address", "get_port_from_address",
]
