"""The worker handshake nestjs-durable reads from Redis: descriptor, its hash, the heartbeat value.

A worker has no registration call. Per routing token it keeps two keys alive (SET ... EX 35,
refreshed every 10 s): ``<P>-worker-heartbeat:<token>:<instanceId>`` = ``{"ts", "status",
"descriptorHash"}`` and ``<P>-worker-descriptor:<token>:<instanceId>`` = the descriptor. The engine
SCANs the heartbeat keys to list live groups and re-reads a descriptor only when the hash changes.

The hash is the engine's: FNV-1a 64 over the UTF-16 code units of the compact JSON of a canonical
projection (set-like fields sorted and de-duplicated, absent optionals as ``null``), where each
code unit's low and then high byte are XORed in before one multiply -- JavaScript's ``charCodeAt``.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any, Dict, Iterable, List, Optional

__all__ = [
    "HEARTBEAT_INTERVAL_SECONDS",
    "HEARTBEAT_TTL_SECONDS",
    "V1_CAPABILITIES",
    "build_descriptor",
    "default_instance_id",
    "descriptor_hash",
    "routing_token",
]

HEARTBEAT_INTERVAL_SECONDS = 10.0
HEARTBEAT_TTL_SECONDS = 35

#: The protocol-v1 capability baseline every nestjs-durable worker SDK advertises.
V1_CAPABILITIES = (
    "saga", "signals", "search-attributes", "priority", "entities", "child-workflows", "singleton",
    "schedules", "continue-as-new", "queries", "cancellation",
)

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = 0xFFFFFFFFFFFFFFFF


def routing_token(name: str, partition: Optional[str] = None) -> str:
    """The queue token of a step name: ``:`` becomes ``-``; a partition adds ``@<partition>``."""
    token = name.replace(":", "-")
    if partition and partition != "default":
        token = f"{token}@{partition}"
    return token


def default_instance_id() -> str:
    host = socket.gethostname().replace(":", "-") or "host"
    return f"py-{host}-{os.getpid()}"


def build_descriptor(
    *,
    instance_id: str,
    steps: Iterable[str],
    sdk_version: str,
    started_at_ms: int,
    partition: Optional[str] = None,
    namespace: Optional[str] = None,
    workflows: Iterable[str] = (),
    registrations: Optional[List[Dict[str, Any]]] = None,
) -> Dict[str, Any]:
    """The worker descriptor, field order as the SDKs write it.

    ``registrations`` (one ``{name, version?, group?}`` per workflow this worker runs) is left out
    when there are none, so a step-only descriptor keeps its bytes and its hash.
    """
    descriptor: Dict[str, Any] = {
        "instanceId": instance_id,
        "runtime": "python",
        "sdk": {"name": "sync-worker", "version": sdk_version},
        "protocol": {"version": 1, "range": [1, 1]},
        "capabilities": list(V1_CAPABILITIES),
        "workflows": sorted(workflows),
        "steps": sorted(steps),
    }
    if registrations:
        descriptor["registrations"] = [dict(r) for r in registrations]
    if partition:
        descriptor["partition"] = partition
    if namespace and namespace != "default":
        descriptor["namespace"] = namespace
    descriptor["startedAt"] = started_at_ms
    return descriptor


def _set(values: Any) -> List[Any]:
    return sorted(set(values or []))


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _canonical_registrations(registrations: Iterable[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each announcement in a fixed key order (absent fields as null, ``requires`` as a set), then
    de-duplicated and sorted by its compact JSON: the order announcements come in never changes
    the hash (the published ``durable-worker`` 0.26.1 and the TypeScript SDK hash them so)."""
    entries: Dict[str, Dict[str, Any]] = {}
    for reg in registrations:
        requires = reg.get("requires")
        entry: Dict[str, Any] = {
            "name": reg.get("name"),
            "version": reg.get("version"),
            "group": reg.get("group"),
            "requires": sorted(set(requires)) if requires is not None else None,
            "origin": reg.get("origin"),
        }
        if reg.get("onError") is not None:
            routes = {_compact({"code": r.get("code"), "workflow": r.get("workflow")}):
                      {"code": r.get("code"), "workflow": r.get("workflow")} for r in reg["onError"]}
            entry["onError"] = [routes[k] for k in sorted(routes)]
        entries[_compact(entry)] = entry
    return [entries[k] for k in sorted(entries)]


def descriptor_hash(descriptor: Dict[str, Any]) -> str:
    """16 lowercase hex digits, equal to the engine's ``descriptorHash`` of the same descriptor.

    A descriptor with ``registrations`` hashes them too, as the published ``durable-worker``
    0.26.1 does (the engine 0.62.0 ignores the field; the hash is only an ETag to it).
    """
    protocol = descriptor.get("protocol") or {"version": 1, "range": [1, 1]}
    canonical: Dict[str, Any] = {
        "instanceId": descriptor.get("instanceId"),
        "runtime": descriptor.get("runtime"),
        "sdk": {"name": descriptor["sdk"]["name"], "version": descriptor["sdk"]["version"]},
        "protocol": {"version": protocol["version"], "range": [protocol["range"][0], protocol["range"][1]]},
        "capabilities": _set(descriptor.get("capabilities")),
        "workflows": _set(descriptor.get("workflows")),
        "steps": _set(descriptor.get("steps")),
    }
    if descriptor.get("registrations") is not None:
        canonical["registrations"] = _canonical_registrations(descriptor["registrations"])
    canonical.update({
        "partition": descriptor.get("partition"),
        "namespace": descriptor.get("namespace"),
        "startedAt": descriptor.get("startedAt"),
    })
    text = json.dumps(canonical, separators=(",", ":"), ensure_ascii=False)
    units = text.encode("utf-16-le", errors="surrogatepass")
    value = _FNV_OFFSET
    for i in range(0, len(units), 2):
        value ^= units[i]
        value ^= units[i + 1]
        value = (value * _FNV_PRIME) & _MASK
    return f"{value:016x}"


def heartbeat_value(descriptor_hash_hex: str, status: Dict[str, Any], now: Optional[float] = None) -> str:
    """The compact heartbeat key's value."""
    ts = int((time.time() if now is None else now) * 1000)
    return json.dumps({"ts": ts, "status": status, "descriptorHash": descriptor_hash_hex},
                      separators=(",", ":"))
