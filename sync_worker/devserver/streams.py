"""Durable message streams: ordered workflow input delivered as reserved-name signals."""

from __future__ import annotations

from typing import Any, Dict

from ..payloads import decode_envelope, envelope
from . import messages
from .engine import Engine
from .payload_checks import check_payload
from .util import TERMINAL_STATUSES, ApiError, new_id, require_str

STREAM_SIGNAL = "__durable_workflow_message_stream"
MESSAGE_SCHEMA = "durable-workflow.v2.message-stream.message"


def append(engine: Engine, namespace: str, workflow_id: str, stream_name: str, body: Dict[str, Any]) -> Dict[str, Any]:
    message_id = require_str(body, "message_id")
    arguments = body.get("input", body.get("arguments"))
    check_payload(arguments, "input", codec=body.get("payload_codec"))
    run = engine.require_run(namespace, workflow_id)
    dedupe_key = f"{namespace}\0stream_msg\0{workflow_id}\0{stream_name}\0{message_id}"
    stored = engine.store.get("kv", dedupe_key)
    if stored is not None:
        return {**stored["receipt"], "duplicate": True}
    if run["status"] in TERMINAL_STATUSES:
        raise ApiError(409, "run_not_active", f"workflow {workflow_id} is not active", workflow_id=workflow_id,
                       run_id=run["run_id"], control_plane={"operation": "message_stream"})
    position_key = f"{namespace}\0stream_pos\0{workflow_id}\0{stream_name}"
    counter = engine.store.get("kv", position_key)
    position = (int(counter["position"]) if counter else 0) + 1
    engine.store.put("kv", {"key": position_key, "namespace": namespace, "kind": "stream_pos", "position": position})
    values = decode_envelope(arguments) if arguments is not None else []
    message = {"schema": MESSAGE_SCHEMA, "stream_name": stream_name, "message_id": message_id,
               "position": position, "payload_envelope": envelope(values if isinstance(values, list) else [values])}
    signal_id = new_id("sig")
    engine.append(run, "SignalReceived", {
        "signal_name": STREAM_SIGNAL, "arguments": envelope([message]), "payload_codec": "avro",
        "signal_id": signal_id, "workflow_command_id": signal_id, "workflow_instance_id": workflow_id,
        "workflow_run_id": run["run_id"], "stream_name": stream_name, "message_id": message_id,
        "position": position})
    # a runtime signal: it takes the instance's next message sequence like any signal (the engine's
    # attemptRuntimeSignalWithArguments records it through the same signal command)
    run["unapplied_signals"].append({"signal_id": signal_id, "signal_name": STREAM_SIGNAL,
                                     "workflow_command_id": signal_id, "stream_name": stream_name,
                                     "message_sequence": messages.reserve_sequence(engine, run)})
    engine.wake(run)
    engine.save_run(run)
    receipt = {"workflow_id": workflow_id, "run_id": run["run_id"], "stream_name": stream_name,
               "message_id": message_id, "position": position, "outcome": "appended", "command_status": "accepted"}
    engine.store.put("kv", {"key": dedupe_key, "namespace": namespace, "kind": "stream_msg", "receipt": receipt})
    return receipt
