"""The protocol versions this package speaks (worker plane §1.2, control plane), and their headers.

One place for the client (which sends and checks them) and the dev server (which advertises and
enforces them).
"""

from __future__ import annotations

__all__ = [
    "CONTROL_PLANE_VERSION",
    "CONTROL_PLANE_VERSION_HEADER",
    "MINIMUM_WORKER_PROTOCOL_VERSION",
    "NAMESPACE_HEADER",
    "PROTOCOL_VERSION_HEADER",
    "WORKER_PROTOCOL_VERSION",
    "minor_of",
]

#: The worker protocol version we implement (the published SDK 2.12 speaks 1.20).
WORKER_PROTOCOL_VERSION = "1.20"
#: The oldest worker protocol we still accept.
MINIMUM_WORKER_PROTOCOL_VERSION = "1.19"
#: The control-plane version (``X-Durable-Workflow-Control-Plane-Version``).
CONTROL_PLANE_VERSION = "2"

PROTOCOL_VERSION_HEADER = "X-Durable-Workflow-Protocol-Version"
CONTROL_PLANE_VERSION_HEADER = "X-Durable-Workflow-Control-Plane-Version"
NAMESPACE_HEADER = "X-Namespace"


def minor_of(version: str) -> int:
    """``1.20`` -> 20 (the part a 1.x peer compares)."""
    return int(version.split(".")[1])
