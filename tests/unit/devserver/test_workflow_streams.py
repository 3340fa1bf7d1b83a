"""Workflow streams on the dev server (``devserver/workflow_streams.py``), over raw HTTP.

The directive on ``record_side_effect`` is checked as the real server's
``WorkflowStreamCommandProcessor`` checks it (the task's identity, the derived idempotency keys:
else 422 and nothing recorded) and stripped from history; the read routes answer as its
``WorkflowStreamController`` (offsets from 0, ``next_offset``, ``terminal``, a bounded long poll,
404 for an unknown stream or run, 422 for bad arguments), client appends deduplicate by
idempotency key, a closed stream refuses appends (409), a full one 429.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import decode_envelope, encode, envelope
from tests.unit.devserver._raw import Raw
from tests.unit.devserver._tasks import ok, register

NONE = encode(None)  # a side effect's result: a bare blob


@pytest.fixture
def raw() -> Iterator[Raw]:
    with DevServer(workflow_task_lease_seconds=30, tick_seconds=0.02) as srv:
        client = Raw(srv.url)
        register(client, None)
        yield client


def _append(identity: str, ordinal: int, values: List[Any], stream: str = "out") -> Dict[str, Any]:
    items = [{"payload": envelope(value), "payload_codec": "avro",
              "idempotency_key": f"dw-stream:{identity}:{ordinal}:{index}"} for index, value in enumerate(values)]
    return {"type": "record_side_effect", "result": NONE, "workflow_stream": {
        "operation": "append", "stream_name": stream, "command_identity": identity, "command_ordinal": ordinal,
        "items": items}}


def _base(raw: Raw, workflow_id: str) -> str:
    run_id = raw.ok("GET", f"/workflows/{workflow_id}")["run_id"]
    return f"/workflows/{workflow_id}/runs/{run_id}/streams"


def test_a_directive_is_checked_applied_and_not_history(raw: Raw) -> None:
    raw.start("w1")
    task = raw.poll()
    wrong_identity = raw.complete(task, [_append("wft-other", 0, ["a"])])
    assert wrong_identity.status_code == 422 and "command_identity" in wrong_identity.text
    bad_key = _append(task["task_id"], 0, ["a"])
    bad_key["workflow_stream"]["items"][0]["idempotency_key"] = "mine"
    assert raw.complete(task, [bad_key]).status_code == 422
    not_a_side_effect = {"type": "upsert_memo", "memo": {}, "workflow_stream": bad_key["workflow_stream"]}
    assert raw.complete(task, [not_a_side_effect]).status_code == 422
    assert [e["event_type"] for e in raw.history("w1")][-1] == "WorkflowStarted"  # nothing recorded
    assert raw.call("GET", _base(raw, "w1") + "/out").json()["reason"] == "stream_not_found"
    ok(raw, task, [_append(task["task_id"], 0, ["a", "b"]), {
        "type": "record_side_effect", "result": NONE, "workflow_stream": {
            "operation": "close", "stream_name": "out", "command_identity": task["task_id"], "command_ordinal": 1}},
        {"type": "complete_workflow", "result": envelope("done")}])
    effects = [e["payload"] for e in raw.history("w1") if e["event_type"] == "SideEffectRecorded"]
    assert len(effects) == 2 and all("workflow_stream" not in p for p in effects)
    page = raw.ok("GET", _base(raw, "w1") + "/out/items")
    assert [(i["offset"], decode_envelope(i["payload"]), i["origin"], i["origin_reference"]) for i in page["items"]] \
        == [(0, "a", "workflow_command", task["task_id"]), (1, "b", "workflow_command", task["task_id"])]
    assert (page["next_offset"], page["terminal"], page["stream"]["status"]) == (2, True, "closed")
    assert page["stream"]["retention_seconds"] == 3600 and page["stream"]["pending_items"] == 0
    listed = raw.ok("GET", _base(raw, "w1"))
    assert (listed["count"], listed["streams"][0]["stream_name"]) == (1, "out")


def test_client_appends_dedupe_refuse_when_closed_or_full_and_reads_long_poll(raw: Raw) -> None:
    raw.start("w2")
    base = _base(raw, "w2") + "/feed"
    item = {"payload": envelope(1), "payload_codec": "avro", "idempotency_key": "k1"}
    first = raw.ok("POST", base + "/items", {"items": [item]})
    again = raw.ok("POST", base + "/items", {"items": [item, {"payload": envelope(2)}]})
    assert (first["accepted_offsets"], first["accepted"], first["deduped"]) == ([0], 1, 0)
    assert (again["accepted_offsets"], again["accepted"], again["deduped"]) == ([0, 1], 1, 1)
    full = raw.call("POST", base + "/items", {"items": [{"payload": envelope(3)}], "max_pending_items": 2})
    assert (full.status_code, full.json()["reason"], full.json()["pending_items"]) == (429, "stream_full", 2)
    assert raw.ok("GET", base + "/items?from=2")["items"] == []
    arrived = threading.Timer(0.5, lambda: raw.ok("POST", base + "/items", {"items": [{"payload": envelope(9)}]}))
    began = time.monotonic()
    arrived.start()
    page = raw.ok("GET", base + "/items?from=2&wait_seconds=5")
    assert [decode_envelope(i["payload"]) for i in page["items"]] == [9] and time.monotonic() - began < 4
    assert raw.ok("POST", base + "/close", {"error_reason": "stop"})["stream"]["status"] == "errored"
    assert raw.ok("POST", base + "/close", {})["stream"]["status"] == "errored"  # idempotent
    closed = raw.call("POST", base + "/items", {"items": [{"payload": envelope(4)}]})
    assert (closed.status_code, closed.json()["reason"]) == (409, "stream_errored")
    for query in ("max_items=0", "max_items=501", "wait_seconds=61", "from=-1", "from=x"):
        bad = raw.call("GET", base + "/items?" + query)
        assert bad.status_code == 422, query
    assert raw.call("GET", "/workflows/w2/runs/nope/streams").status_code == 404
    assert raw.call("GET", _base(raw, "w2") + "/bad%20name").json()["reason"] == "invalid_stream_name"


def test_directive_and_item_refusals_are_typed(raw: Raw) -> None:
    raw.start("w3")
    task = raw.poll()
    identity = task["task_id"]
    for directive in ({"operation": "close", "stream_name": "never", "command_identity": identity,
                       "command_ordinal": 0},
                      {"operation": "append", "stream_name": "bad name", "command_identity": identity,
                       "command_ordinal": 0, "items": [{"idempotency_key": f"dw-stream:{identity}:0:0"}]},
                      {"operation": "rewind", "stream_name": "s", "command_identity": identity, "command_ordinal": 0},
                      {"operation": "append", "stream_name": "s", "command_identity": identity,
                       "command_ordinal": -1, "items": [{}]}):
        refused = raw.complete(task, [{"type": "record_side_effect", "result": NONE, "workflow_stream": directive}])
        assert refused.status_code == 422, (directive, refused.text)
    assert [e["event_type"] for e in raw.history("w3")][-1] == "WorkflowStarted"
    bad = raw.call("POST", _base(raw, "w3") + "/s/items", {"items": [{"idempotency_key": {"a": 1}}]})
    assert (bad.status_code, bad.json()["reason"]) == (422, "validation_failed")
