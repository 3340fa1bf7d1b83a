"""Workflow streams from workflow code: one SDK-authored source, both workers, one dev server.

``tests/interop/_authoring_streams.py`` appends to a stream around an activity, closes it, and
errors a second one. On the published SDK's worker and, import swapped, on ours: the same
directives reach the dev server (``devserver/workflow_streams.py``: identity and idempotency keys
checked as the real server checks them), the history holds plain ``SideEffectRecorded`` events,
and our client's stream calls read the same items, offsets and states. Each history replays
byte-equal cold and sticky at every cut.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest

from sync_worker.client import Client
from sync_worker.devserver import DevServer
from tests._sticky_equivalence import every_cut, task_boundaries, walk
from tests.interop import _authoring_streams as sdk_module
from tests.interop._authoring_harness import history, run_on_ours, run_on_sdk, shape, swapped

Outcome = Tuple[Any, Dict[str, Any], List[Dict[str, Any]]]
_FIELDS = {"SideEffectRecorded": ("sequence", "result"), "ActivityScheduled": ("sequence", "activity_type"),
           "ActivityCompleted": ("sequence", "result"), "WorkflowCompleted": ("output",)}


def _scenario(client: Client, queue: str) -> Outcome:
    handle = client.start_workflow("interop.streams.tokens", "hello durable world", task_queue=queue)
    result = client.get_result(handle.workflow_id, timeout=60, poll_interval=0.1)
    run_id = client.describe_workflow(handle.workflow_id).run_id or ""
    tokens = list(client.iter_workflow_stream(handle.workflow_id, run_id, "tokens", wait_seconds=2))
    page = client.subscribe_workflow_stream(handle.workflow_id, run_id, "alerts")
    seen = {
        "streams": [(s.stream_name, s.status, s.last_offset, s.total_items, s.error_reason, s.retention_seconds)
                    for s in client.list_workflow_streams(handle.workflow_id, run_id)],
        "tokens": [(i.offset, i.payload, i.item_type, i.content_type, i.origin, i.idempotency_key) for i in tokens],
        "alerts": ([(i.offset, i.payload) for i in page.items], page.next_offset, page.terminal),
        "run_id": run_id,
    }
    return result, seen, history(client, handle.workflow_id)


@pytest.fixture(scope="module")
def runs(dev_server_session: DevServer) -> Dict[str, Outcome]:
    return {"sdk": run_on_sdk(dev_server_session, sdk_module, _scenario),
            "ours": run_on_ours(dev_server_session, swapped(sdk_module), _scenario)}


def _keys_out(seen: Dict[str, Any]) -> Dict[str, Any]:
    """The idempotency keys name each run's own task ids: checked for their form, then left out."""
    tokens = []
    for offset, payload, item_type, content_type, origin, key in seen["tokens"]:
        prefix, identity, ordinal, index = key.split(":")
        assert prefix == "dw-stream" and identity.startswith("wft-"), key
        tokens.append((offset, payload, item_type, content_type, origin, int(ordinal), int(index)))
    return {**seen, "tokens": tokens, "run_id": None}


def test_same_items_states_and_history_on_both_workers(runs: Dict[str, Outcome]) -> None:
    (sdk_result, sdk_seen, sdk_events), (our_result, our_seen, our_events) = runs["sdk"], runs["ours"]
    assert sdk_result == our_result == "HELLO DURABLE WORLD"
    expected = _keys_out(sdk_seen)
    assert expected["tokens"] == [
        (0, {"token": "hello"}, None, None, "workflow_command", 0, 0),
        (1, {"token": "durable"}, None, None, "workflow_command", 0, 1),
        (2, {"token": "world"}, None, None, "workflow_command", 0, 2),
        (3, {"token": "HELLO DURABLE WORLD"}, "summary", "application/json", "workflow_command", 1, 0)]
    assert expected["streams"] == [("alerts", "errored", 0, 1, "sensor lost", 3600),
                                   ("tokens", "closed", 3, 4, None, 120)]
    assert expected["alerts"] == ([(0, "overheated")], 1, True)
    assert _keys_out(our_seen) == expected
    assert shape(our_events, _FIELDS) == shape(sdk_events, _FIELDS)
    effects = [e["payload"] for e in our_events if e["event_type"] == "SideEffectRecorded"]
    assert len(effects) == 5 and not any("workflow_stream" in p for p in effects)  # the directive is not history


@pytest.mark.parametrize("who", ["sdk", "ours"])
def test_each_history_replays_byte_equal_cold_and_sticky_at_every_cut(runs: Dict[str, Outcome], who: str) -> None:
    _, _, events = runs[who]
    cls = swapped(sdk_module).Tokens
    every_cut(cls, ["hello durable world"], events, "avro")
    # each task's end (the last one: just before its terminal event), fed to one kept state
    done = next(i for i, e in enumerate(events) if e["event_type"] == "WorkflowCompleted")
    cuts = [cut for cut in task_boundaries(events)[1:] if cut < done] + [done]
    tasks = walk(cls, ["hello durable world"], events, "avro", cuts)
    assert tasks.resumed > 0 and tasks.declined == [], (cuts, tasks)
