"""The gRPC transport: its client, its server, what they share on the wire, TLS credentials.

This is the only part of courier that imports grpc (tests/test_imports.py): courier's status
codes (_status.py) are mapped to and from gRPC's here (grpc_wire.py).
"""

import os

# gRPC's core logs routine connection events (e.g. GOAWAY at every server stop) at INFO to
# stderr; keep only errors unless the user asked for more. Must precede the first grpc import.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
