"""Server compatibility checks a worker makes from ``/api/cluster/info`` before registering.

Pure: cluster-info dict in, list of problems out. The rules are the contract's (protocol §1.2):
control plane "2" with the v1 request contract, a worker protocol of the same major and a
minor at least the requested one, the v1 auth-composition contract, and a complete
fenced-deregistration capability object when fencing is advertised.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

_VERSION = re.compile(r"^(\d+)\.(\d+)$")

_CANONICAL_ENVIRONMENT = {
    "server_url": "DURABLE_WORKFLOW_SERVER_URL",
    "namespace": "DURABLE_WORKFLOW_NAMESPACE",
    "auth_token": "DURABLE_WORKFLOW_AUTH_TOKEN",
    "tls_verify": "DURABLE_WORKFLOW_TLS_VERIFY",
    "profile": "DW_ENV",
}
_REQUIRED_EFFECTIVE_FIELDS = {"server_url", "namespace", "profile", "auth", "tls", "identity"}
_NEVER_ECHO = {"bearer_tokens", "private_keys", "raw_authorization_headers"}
FENCING_SCHEMA = "durable-workflow.v2.worker-deregistration.v1"
FENCING_ENDPOINT = "/worker/registrations/{workerId}/deregister"


def _parse_version(value: object) -> Optional[Tuple[int, int]]:
    match = _VERSION.match(str(value)) if value is not None else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def protocol_compatible(requested: str, advertised: object) -> bool:
    """Same major, and the server's minor at least the requested one."""
    want, have = _parse_version(requested), _parse_version(advertised)
    if want is None or have is None:
        return str(requested) == str(advertised)
    return want[0] == have[0] and have[1] >= want[1]


def compatibility_problems(info: Dict[str, Any], requested_protocol: str) -> List[str]:
    """Every reason the server in ``info`` cannot serve this worker (empty when compatible)."""
    problems: List[str] = []
    if requested_protocol not in ("1.19", "1.20"):
        problems.append(f"requested worker protocol {requested_protocol!r} is not 1.19 or 1.20")
    control = info.get("control_plane")
    if not isinstance(control, dict) or str(control.get("version")) != "2":
        problems.append("control_plane.version is not '2'")
    else:
        contract = control.get("request_contract")
        if not isinstance(contract, dict) or contract.get(
            "schema"
        ) != "durable-workflow.v2.control-plane-request.contract" or str(contract.get("version")) != "1":
            problems.append("control_plane.request_contract is not the v1 control-plane request contract")
    protocol = info.get("worker_protocol")
    if not isinstance(protocol, dict):
        problems.append("worker_protocol is missing")
    elif not protocol_compatible(requested_protocol, protocol.get("version")):
        problems.append(
            f"server worker protocol {protocol.get('version')!r} cannot serve requested {requested_protocol!r}"
        )
    problems.extend(_auth_problems(info.get("auth_composition_contract")))
    capabilities = protocol.get("server_capabilities") if isinstance(protocol, dict) else None
    if isinstance(capabilities, dict):
        fencing = capabilities.get("worker_deregistration_fencing")
        if isinstance(fencing, dict) and fencing.get("supported") is True:
            retention = fencing.get("receipt_retention_seconds")
            if (
                fencing.get("schema") != FENCING_SCHEMA
                or fencing.get("endpoint") != FENCING_ENDPOINT
                or type(retention) is not int
                or retention <= 0
            ):
                problems.append("worker_deregistration_fencing is advertised but incomplete")
    return problems


def _auth_problems(contract: object) -> List[str]:
    if not isinstance(contract, dict):
        return ["auth_composition_contract is missing"]
    problems: List[str] = []
    if contract.get("schema") != "durable-workflow.v2.auth-composition.contract" or str(
        contract.get("version")
    ) != "1":
        problems.append("auth_composition_contract is not the v1 contract")
    precedence = contract.get("precedence")
    if not isinstance(precedence, dict) or not all(
        isinstance(precedence.get(key), list) for key in ("connection_values", "profile_selection")
    ):
        problems.append("auth_composition_contract.precedence is malformed")
    environment = contract.get("canonical_environment")
    if not isinstance(environment, dict) or any(
        environment.get(key) != value for key, value in _CANONICAL_ENVIRONMENT.items()
    ):
        problems.append("auth_composition_contract.canonical_environment does not match")
    material = contract.get("auth_material")
    if not isinstance(material, dict) or material.get("token") != {
        "status": "supported", "effective_config_value": "redacted"
    }:
        problems.append("auth_composition_contract.auth_material.token is not supported/redacted")
    effective = contract.get("effective_config")
    required = effective.get("required_fields") if isinstance(effective, dict) else None
    if not isinstance(required, list) or not set(required) >= _REQUIRED_EFFECTIVE_FIELDS:
        problems.append("auth_composition_contract.effective_config.required_fields is incomplete")
    redaction = contract.get("redaction")
    never = redaction.get("never_echo") if isinstance(redaction, dict) else None
    if not isinstance(never, list) or not set(never) >= _NEVER_ECHO:
        problems.append("auth_composition_contract.redaction.never_echo is incomplete")
    return problems


def fencing_supported(capabilities: Dict[str, Any]) -> bool:
    fencing = capabilities.get("worker_deregistration_fencing")
    return isinstance(fencing, dict) and fencing.get("supported") is True


def update_wait_for_values(info: Dict[str, Any]) -> Optional[List[str]]:
    """The update ``wait_for`` values the server accepts, when it says."""
    try:
        values = info["control_plane"]["request_contract"]["operations"]["update"]["fields"]["wait_for"][
            "canonical_values"]
    except (KeyError, TypeError):
        return None
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return list(values)
    return None
