"""What runs in and around a node's process on its host.

The runner (`runner.py`) runs one node in its process: its context, its heartbeats and
telemetry (`reporting.py`, or through its host agent: `agent_relay.py`), its CPU slots
(`slot_binding.py`) and its child processes (`process_tree.py`). The fork server
(`fork_server.py`, `fork_heap.py`) makes node processes in milliseconds; the host agent
(`host_agent.py`) starts and watches the nodes of one host of a cluster job.

It imports the runtime only; launchers use it.
"""
