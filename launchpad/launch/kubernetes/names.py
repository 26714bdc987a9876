"""What a Kubernetes launch's objects are called, and the labels that find them.

Every object of launch L is `lp-L[-part]` (a DNS-1035 label) and carries the program's and
the launch's labels; its own name (the program's, or a node's) is an annotation, unchanged.
"""

from __future__ import annotations

import hashlib
import re
import secrets

PROGRAM_LABEL = "launchpad.dev/program"
LAUNCH_LABEL = "launchpad.dev/launch"
ROLE_LABEL = "launchpad.dev/role"  # "controller", "node", "specs", "question", "answer"
NODE_LABEL = "launchpad.dev/node"  # a node's object name: what its Service selects
NAME_ANNOTATION = "launchpad.dev/name"  # the program's or node's own name, unchanged
# On the controller's Job of a launch whose program may change while it runs (relay.py).
CHANGES_ANNOTATION = "launchpad.dev/changes"


def controller_name(launch_id: str) -> str:
    """The name of launch `launch_id`'s controller Job and Service."""
    return object_name(launch_id, "controller")


def dns_label(text: str) -> str:
    """`text` as lower-case letters, digits and single '-'s."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-")


def new_launch_id(program_name: str) -> str:
    return f"{dns_label(program_name)[:24].strip('-') or 'program'}-{secrets.token_hex(3)}"


def object_name(launch_id: str, part: str) -> str:
    """`lp-<launch id>[-<part>]`, a DNS-1035 label (<= 63 characters; long ones end in a hash
    of the whole, so they stay distinct)."""
    name = f"lp-{launch_id}-{part}" if part else f"lp-{launch_id}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:54].rstrip('-')}-{digest}"


def label_value(text: str) -> str:
    """`text` as a label value: <= 63 of [A-Za-z0-9._-], starting and ending alphanumeric."""
    value = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value) or "program"
