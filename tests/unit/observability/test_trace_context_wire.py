"""The trace-context carrier (``observability_context``): our rules against the published SDK's, and
what the dev server keeps and hands back when asked (``DevServer(trace_context=True)``), over real
sockets. Off by default, the dev server answers as the real server does: no capability, nothing kept.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator

import pytest
from durable_workflow import telemetry_carrier as sdk

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from sync_worker.protocol import trace_context as tc
from tests.unit.devserver._raw import Raw
from tests.unit.devserver._tasks import WAIT, WITH_UPDATE, ok, register

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
CONTEXT = {"schema": tc.CONTEXT_SCHEMA, "version": 1, "carrier": {"traceparent": TRACEPARENT}}


def test_our_capability_and_limits_are_the_sdks() -> None:
    assert tc.CAPABILITY == sdk.CAPABILITY and tc.HEADER_LIMITS == sdk.LIMITS and tc.CONTEXT_SCHEMA == sdk.SCHEMA
    info = {"worker_protocol": {"server_capabilities": {"observability_context": dict(tc.CAPABILITY)}}}
    assert sdk.supported(info) and tc.advertised(info["worker_protocol"]["server_capabilities"])
    bent = {**tc.CAPABILITY, "version": "1"}  # the SDK compares types too
    assert not tc.advertised({"observability_context": bent})


@pytest.mark.parametrize("value", [
    CONTEXT,
    {**CONTEXT, "carrier": {"traceparent": TRACEPARENT, "tracestate": "a=b", "baggage": "k=v"}},
    {**CONTEXT, "carrier": {"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"}},
    {**CONTEXT, "carrier": {"traceparent": TRACEPARENT.upper()}},
    {**CONTEXT, "carrier": {"traceparent": TRACEPARENT, "x-other": "1"}},
    {**CONTEXT, "carrier": {"traceparent": TRACEPARENT, "tracestate": "x" * 513}},
    {**CONTEXT, "version": 2},
    {**CONTEXT, "extra": 1},
    {"schema": tc.CONTEXT_SCHEMA, "version": 1, "carrier": {}},
    "00-abc",
])
def test_we_accept_exactly_what_the_sdk_keeps(value: Any) -> None:
    kept, _diagnostic = sdk.normalize(value, ["k"])  # the SDK keeps only allow-listed baggage keys
    ours = tc.carrier_of(value)
    assert (ours is not None) == (kept is not None), (value, kept)
    if kept is not None:
        assert {"schema": tc.CONTEXT_SCHEMA, "version": 1, "carrier": ours} == kept


def test_parse_traceparent() -> None:
    assert tc.parse_traceparent(TRACEPARENT) == {"trace_id": 0x4BF92F3577B34DA6A3CE929D0E0E4736,
                                                 "span_id": 0x00F067AA0BA902B7, "flags": 1}
    for bad in ("", "01-" + TRACEPARENT[3:], TRACEPARENT + "-x", "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
                TRACEPARENT[:-19] + "0" * 16 + "-01", None, 7):
        assert tc.parse_traceparent(bad) is None, bad


def test_links_fit_the_advertised_budget() -> None:
    link = {"kind": "command", "command_id": "sig-1", "context": CONTEXT}
    body = tc.links_body("task-1", "run-1", "default", [link] * 100)
    assert body is not None and 0 < len(body["links"]) <= tc.MAX_LINKS
    assert tc._size(body) <= tc.MAX_CONTEXT_BYTES
    assert tc.links_body("task-1", "run-1", "default", []) is None
    kept, diagnostic = sdk.links(body, task_id="task-1", run_id="run-1", namespace="default")
    assert kept and diagnostic is None, diagnostic


@pytest.fixture(params=[True, False], ids=["trace-context", "as-the-real-server"])
def raw(request: Any) -> Iterator[Raw]:
    with DevServer(workflow_task_lease_seconds=30, trace_context=request.param) as server:
        raw = Raw(server.url)
        raw.enabled = request.param  # type: ignore[attr-defined]
        register(raw, WITH_UPDATE)
        yield raw


def _start(raw: Raw, workflow_id: str, context: Any = CONTEXT) -> Dict[str, Any]:
    return dict(raw.ok("POST", "/workflows", {"workflow_id": workflow_id, "workflow_type": "t", "task_queue": "q",
                                              "input": envelope([]), "observability_context": context}))


def test_the_capability_is_advertised_only_when_asked(raw: Raw) -> None:
    caps = raw.ok("GET", "/cluster/info")["worker_protocol"]["server_capabilities"]
    assert ("observability_context" in caps) is raw.enabled  # type: ignore[attr-defined]
    if raw.enabled:  # type: ignore[attr-defined]
        assert caps["observability_context"] == sdk.CAPABILITY


def test_a_start_carrier_comes_back_on_every_task_of_the_run(raw: Raw) -> None:
    _start(raw, "wf-1")
    task = raw.poll()
    assert task.get("observability_context") == (CONTEXT if raw.enabled else None)  # type: ignore[attr-defined]
    ok(raw, task, [{"type": "schedule_activity", "activity_type": "act", "arguments": envelope([]),
                    "queue": "q"}])
    activity = raw.poll(kind="activity")
    assert activity.get("observability_context") == (CONTEXT if raw.enabled else None)  # type: ignore[attr-defined]


def test_a_signal_carrier_comes_back_as_a_link_on_the_task_that_applies_it(raw: Raw) -> None:
    _start(raw, "wf-2")
    ok(raw, raw.poll(), [WAIT])
    other = {**CONTEXT, "carrier": {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}}
    sent = raw.ok("POST", "/workflows/wf-2/signal/payload", {"input": envelope([1]), "observability_context": other})
    task = raw.poll()
    links = task.get("observability_links")
    if not raw.enabled:  # type: ignore[attr-defined]
        assert links is None
        return
    assert links["links"] == [{"kind": "command", "command_id": sent["signal_id"], "context": other}]
    kept, diagnostic = sdk.links(links, task_id=task["task_id"], run_id=task["run_id"], namespace="default")
    assert kept and diagnostic is None


def test_a_child_commands_carrier_becomes_the_child_runs(raw: Raw) -> None:
    _start(raw, "wf-3")
    task = raw.poll()
    child = {**CONTEXT, "carrier": {"traceparent": "00-" + "3" * 32 + "-" + "4" * 16 + "-01"}}
    ok(raw, task, [{"type": "start_child_workflow", "workflow_type": "t", "workflow_id": "wf-3-child",
                    "arguments": envelope([]), "queue": "q", "observability_context": child}])
    children = [t for t in (raw.poll(), raw.poll(timeout=1)) if t and t["workflow_id"] != "wf-3"]
    assert len(children) == 1
    assert children[0].get("observability_context") == (child if raw.enabled else None)  # type: ignore


@pytest.mark.parametrize("bad", [
    {"schema": "nope", "version": 1, "carrier": {"traceparent": TRACEPARENT}},
    {**CONTEXT, "carrier": {"traceparent": "not-a-traceparent"}},
    "text",
])
def test_a_malformed_carrier_is_a_422_naming_the_field_either_way(raw: Raw, bad: Any) -> None:
    resp = raw.call("POST", "/workflows", {"workflow_id": "wf-bad", "workflow_type": "t", "task_queue": "q",
                                           "input": envelope([]), "observability_context": bad})
    assert resp.status_code == 422, resp.text
    assert "observability_context" in resp.json()["errors"]
    assert raw.call("GET", "/workflows/wf-bad").status_code == 404
