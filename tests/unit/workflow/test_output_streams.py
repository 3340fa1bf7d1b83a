"""Workflow streams from workflow code: the directives the published SDK sends (byte for byte, its
own replayer as the reference), the identity and ordinals across a sticky resume, and the SDK's
argument checks."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import pytest

from sync_worker import workflow as our_workflow
from sync_worker.workflow.incremental import resume, start
from tests._sdk_missing import SDK_MISSING
from tests.unit.workflow._helpers import activity_done, blob, ev, started

sdk_workflow = pytest.importorskip("durable_workflow.workflow", reason=SDK_MISSING)


def _writer(wf: Any) -> type:
    @wf.defn(name="unit.streams.writer")
    class Writer:
        def run(self, ctx: Any) -> Any:
            item = wf.WorkflowStreamAppendItem
            yield ctx.append_workflow_stream("out", [item(payload={"n": 1}), item(payload_reference="s3://b/k",
                                                                                   item_type="ref")])
            value = yield ctx.schedule_activity("work", [])
            yield ctx.append_workflow_stream("out", [item(payload=value, content_type="text/plain")],
                                             max_pending_items=5)
            yield ctx.close_workflow_stream("out", retention_seconds=60)
            yield ctx.error_workflow_stream("other", "broken")
            return value

    return Writer


OURS, THEIRS = _writer(our_workflow), _writer(sdk_workflow)


def _history(upto: int) -> List[Dict[str, Any]]:
    events = [started(), ev("SideEffectRecorded", sequence=1, result=blob(None), payload_codec="avro"),
              *activity_done(2, "work", "done")]
    return events[:upto]


def _ours(history: List[Dict[str, Any]], identity: Optional[str]) -> str:
    result = our_workflow.replay(OURS, history, [], run_id="run-1", command_identity=identity)
    return json.dumps([c.to_wire("q") for c in result.commands], sort_keys=True)


def _theirs(history: List[Dict[str, Any]], identity: Optional[str]) -> str:
    outcome = sdk_workflow.replay(THEIRS, history, [], run_id="run-1", workflow_command_id=identity,
                                  payload_codec="avro")
    return json.dumps(list(sdk_workflow.commands_to_server_commands(outcome.commands, "q")), sort_keys=True)


@pytest.mark.parametrize("upto", [1, 2, 4])
@pytest.mark.parametrize("identity", ["wft-1", None])
def test_the_same_directives_as_the_published_sdk(upto: int, identity: Optional[str]) -> None:
    assert _ours(_history(upto), identity) == _theirs(_history(upto), identity)


def test_directive_shape() -> None:
    first = json.loads(_ours(_history(1), "wft-1"))[0]
    assert first["type"] == "record_side_effect"
    assert first["workflow_stream"]["command_identity"] == "wft-1"
    assert [i["idempotency_key"] for i in first["workflow_stream"]["items"]] == ["dw-stream:wft-1:0:0",
                                                                                 "dw-stream:wft-1:0:1"]
    last = [c for c in json.loads(_ours(_history(4), "wft-3")) if c["type"] == "record_side_effect"]
    assert [(c["workflow_stream"]["operation"], c["workflow_stream"]["command_ordinal"]) for c in last] == [
        ("append", 1), ("close", 2), ("error", 3)]  # ordinals count the replayed append too
    assert last[0]["workflow_stream"]["items"][0]["idempotency_key"] == "dw-stream:wft-3:1:0"


def test_a_sticky_resume_uses_the_new_tasks_identity() -> None:
    history = _history(4)
    _, state = start(OURS, history[:2], [], run_id="run-1", command_identity="wft-1")
    assert state is not None
    resumed = resume(state, history[2:], command_identity="wft-3")
    assert resumed is not None
    sticky = json.dumps([c.to_wire("q") for c in resumed[0].commands], sort_keys=True)
    assert sticky == _ours(history, "wft-3")


def test_the_sdk_argument_checks() -> None:
    ctx = our_workflow.WorkflowContext(run_id="r")
    item = our_workflow.WorkflowStreamAppendItem
    with pytest.raises(ValueError):
        ctx.append_workflow_stream("", [item(payload=1)])
    with pytest.raises(ValueError):
        ctx.append_workflow_stream("s", [])
    with pytest.raises(TypeError):
        ctx.append_workflow_stream("s", [{"payload": 1}])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        ctx.append_workflow_stream("s", [item(payload=1)], max_pending_items=0)
    with pytest.raises(ValueError):
        ctx.close_workflow_stream("s", retention_seconds=0)
    with pytest.raises(ValueError):
        ctx.error_workflow_stream("s", "")
    assert ctx.command_identity == "r"  # no task identity: the run id, as the SDK falls back
