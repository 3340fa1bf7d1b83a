"""``GET /api/cluster/info``: the negotiation document (§1.3), advertising only what exists."""

from __future__ import annotations

import weakref
from typing import Any, Dict

from ..protocol.trace_context import CAPABILITY as TRACE_CONTEXT_CAPABILITY
from ..protocol.versions import (
    CONTROL_PLANE_VERSION,
    CONTROL_PLANE_VERSION_HEADER,
    MINIMUM_WORKER_PROTOCOL_VERSION,
    PROTOCOL_VERSION_HEADER,
    WORKER_PROTOCOL_VERSION,
    minor_of,
)
from . import sessions, update_validation
from .commands import SUPPORTED_COMMANDS
from .encoding import PreEncoded
from .engine import Engine
from .schedule_input import OVERLAP_POLICIES
from .util import iso

MINIMUM_WORKER_PROTOCOL_MINOR = minor_of(MINIMUM_WORKER_PROTOCOL_VERSION)
SERVER_VERSION = "sync-worker-devserver/1"
DEREGISTRATION_SCHEMA = "durable-workflow.v2.worker-deregistration.v1"


# One encoded capabilities block per engine: it depends on the configuration only.
_CAPABILITIES: weakref.WeakKeyDictionary[Engine, PreEncoded] = weakref.WeakKeyDictionary()


def server_capabilities(engine: Engine) -> Dict[str, Any]:
    """The worker-plane capabilities block (built and encoded once per engine; read-only)."""
    found = _CAPABILITIES.get(engine)
    if found is None:
        found = _CAPABILITIES[engine] = PreEncoded(_build_capabilities(engine))
    return found


def _build_capabilities(engine: Engine) -> Dict[str, Any]:
    capabilities: Dict[str, Any] = {
        "query_tasks": True,
        # Synchronous pre-accept update validation (devserver/update_validation.py).
        "update_validation_tasks": True,
        "synchronous_update_validation": update_validation.server_semantics(),
        # Poll responses carry only the new events for the worker that keeps the run (devserver/sticky.py).
        "sticky_execution": {"supported": True, "minimum_protocol_version": "1.18",
                             "implementation": "history_tail_after_sticky_completion"},
        "supported_workflow_task_commands": list(SUPPORTED_COMMANDS),
        "worker_sessions": sessions.semantics(),
        "long_poll_timeout": int(engine.config.long_poll_max_seconds),
        "workflow_memo_updates": {"supported": True, "command": "upsert_memo", "history_event": "MemoUpserted"},
        "worker_deregistration_fencing": {
            "supported": True, "schema": DEREGISTRATION_SCHEMA,
            "endpoint": "/worker/registrations/{workerId}/deregister",
            "receipt_retention_seconds": engine.config.receipt_retention_seconds,
        },
    }
    if engine.config.trace_context:  # opt-in: the real server does not advertise it (devserver/trace_context.py)
        capabilities["observability_context"] = dict(TRACE_CONTEXT_CAPABILITY)
    return capabilities


def control_plane_features() -> Dict[str, Any]:
    """The operator surface this server implements (anything absent here is refused)."""
    return {
        "namespaces": {"supported": True, "operations": ["list", "describe", "create", "update", "delete"],
                       "external_payload_storage": False},
        "schedules": {"supported": True, "spec": ["cron_expressions", "intervals", "timezone"],
                      "overlap_policies": list(OVERLAP_POLICIES), "jitter": True, "max_runs": True,
                      "operations": ["list", "describe", "create", "update", "pause", "resume", "trigger",
                                     "backfill", "delete", "history"], "catch_up": "none"},
        "workflow_update_request_id": {"supported": True, "repeat": "returns_original"},
        "task_queues": {"supported": True, "operations": ["list", "describe", "build_ids", "drain", "promote",
                                                          "resume"], "build_id_routing": False},
        "worker_records": {"supported": True, "operations": ["list", "describe", "deregister"]},
        "search_attributes": {"supported": True, "operations": ["list", "create", "delete"],
                              "enforced_on_upsert": False},
        "history_export": {"supported": True, "schema": "durable-workflow.v2.history-export",
                           "canonicalization": "json-recursive-ksort-v1", "checksum_algorithm": "sha256"},
        "workflow_repair": {"supported": True},
        "workflow_archive": {"supported": True},
        "system_maintenance": {"supported": True, "operations": ["repair", "repair_pass", "retention",
                                                                 "retention_pass", "activity_timeouts",
                                                                 "activity_timeouts_pass"]},
    }


def cluster_info(engine: Engine, namespace: str) -> Dict[str, Any]:
    return {
        "version": SERVER_VERSION,
        "server_version": SERVER_VERSION,
        "server_time": iso(engine.now()),
        "namespace": {"name": namespace},
        "control_plane": {
            "version": CONTROL_PLANE_VERSION,
            "header": CONTROL_PLANE_VERSION_HEADER,
            "request_contract": {
                "schema": "durable-workflow.v2.control-plane-request.contract",
                "version": 1,
                "operations": {"update": {"fields": {"wait_for": {"canonical_values": ["accepted", "completed"]}}}},
            },
            "features": control_plane_features(),
        },
        "worker_protocol": {
            "version": WORKER_PROTOCOL_VERSION,
            "minimum_version": f"1.{MINIMUM_WORKER_PROTOCOL_MINOR}",
            "header": PROTOCOL_VERSION_HEADER,
            "server_capabilities": server_capabilities(engine),
        },
        "auth_composition_contract": {
            "schema": "durable-workflow.v2.auth-composition.contract", "version": 1,
            "precedence": {"connection_values": ["flag", "env", "profile"], "profile_selection": ["flag", "env"]},
            "canonical_environment": {
                "server_url": "DURABLE_WORKFLOW_SERVER_URL", "namespace": "DURABLE_WORKFLOW_NAMESPACE",
                "auth_token": "DURABLE_WORKFLOW_AUTH_TOKEN", "tls_verify": "DURABLE_WORKFLOW_TLS_VERIFY",
                "profile": "DW_ENV"},
            "auth_material": {"token": {"status": "supported", "effective_config_value": "redacted"},
                              "mtls": {"status": "reserved"}, "signed_headers": {"status": "reserved"}},
            "effective_config": {"required_fields": ["server_url", "namespace", "profile", "auth", "tls", "identity"]},
            "redaction": {"never_echo": ["bearer_tokens", "private_keys", "raw_authorization_headers"]},
        },
        "limits": {"max_payload_bytes": engine.config.max_payload_bytes,
                   "max_request_bytes": engine.config.max_request_bytes},
    }
