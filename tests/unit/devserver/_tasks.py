"""Helpers for the message-task tests: a registered worker with a command contract, and event views."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from sync_worker.payloads import envelope
from tests.unit.devserver._raw import Raw

#: The command contracts of the four ServerParity workflows (only what decides the cursor event), with
#: the ``update_validators`` field every Python worker sends (a contract without it leaves the server
#: unable to tell whether an update is validated: ``update_validator_contract_missing``).
SIGNALS_ONLY = {"signals": ["payload"], "queries": [], "updates": [], "update_validators": []}  # parity.v1.signals
WITH_QUERY = {"signals": ["payload"], "queries": ["state"], "updates": [], "update_validators": []}  # state-queries
WITH_UPDATE = {"signals": ["payload"], "queries": [], "updates": ["set_payload"],
               "update_validators": []}  # parity.v1.updates

WAIT = {"type": "open_condition_wait", "condition_key": "payload:0", "condition_definition_fingerprint": "sha256:f0"}


def register(raw: Raw, contract: Optional[Dict[str, Any]], worker_id: str = "w1", workflow_type: str = "t") -> None:
    body: Dict[str, Any] = {"worker_id": worker_id, "task_queue": "q", "supported_workflow_types": [workflow_type],
                            "supported_activity_types": ["act"]}
    if contract is not None:
        body["workflow_command_contracts"] = {workflow_type: contract}
    raw.ok("POST", "/worker/register", body, plane="worker")


def signal(raw: Raw, workflow_id: str, value: Any, name: str = "payload") -> Dict[str, Any]:
    return dict(raw.ok("POST", f"/workflows/{workflow_id}/signal/{name}", {"input": envelope([value])}))


def update(raw: Raw, workflow_id: str, value: Any, name: str = "set_payload") -> Dict[str, Any]:
    return dict(raw.ok("POST", f"/workflows/{workflow_id}/update/{name}",
                       {"input": envelope([value]), "wait_for": "accepted"}))


def ok(raw: Raw, task: Dict[str, Any], commands: List[Dict[str, Any]]) -> None:
    resp = raw.complete(task, commands)
    assert resp.status_code == 200, resp.text


def payloads(raw: Raw, workflow_id: str, kind: str) -> List[Dict[str, Any]]:
    return [e["payload"] for e in raw.history(workflow_id) if e["event_type"] == kind]


def complete_update(task: Dict[str, Any], result: Any = "ok") -> List[Dict[str, Any]]:
    return [{"type": "complete_update", "update_id": task["workflow_update_id"], "result": envelope(result)}]
