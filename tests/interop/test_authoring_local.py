"""Local activities (``ctx.local_activity``): one SDK-authored source, both workers, one dev server.

``tests/interop/_authoring_local.py`` runs unchanged on the published SDK's worker and, import
swapped, on ours: same results, same history (one ``ActivityScheduled`` + terminal pair with
``execution_mode: local`` per call, the same attempts, the same bounded failure message), and a
cold query replay sees the message the first execution saw (seed 000). Each history -- the SDK's
and ours -- replays byte-equal from cold and from the sticky cache at every cut.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest

from sync_worker import payloads
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from tests._local_runner import RecordedLocalRunner
from tests._sticky_equivalence import cold, every_cut, task_boundaries, walk
from tests.interop import _authoring_local as sdk_module
from tests.interop._authoring_harness import history, run_on_ours, run_on_sdk, shape, swapped

Outcome = Tuple[Any, List[str], List[Dict[str, Any]]]

_ATTEMPT_FIELDS = ("attempt_number", "outcome", "message", "exception_type", "non_retryable", "timeout_kind",
                   "retry_reason", "backoff_seconds")
_FIELDS = {
    "ActivityScheduled": ("sequence", "activity_type", "execution_mode", "arguments", "attempts"),
    "ActivityCompleted": ("sequence", "activity_type", "execution_mode", "result"),
    "ActivityFailed": ("sequence", "activity_type", "execution_mode", "message", "exception_type", "non_retryable"),
    "TimerScheduled": ("sequence", "delay_seconds"),
    "WorkflowCompleted": ("output",),
}


def _scenario(client: Client, queue: str) -> Outcome:
    handle = client.start_workflow("interop.local.checkout", "order-1", task_queue=queue)
    result = client.get_result(handle.workflow_id, timeout=60, poll_interval=0.1)
    seen = client.query_workflow(handle.workflow_id, "failures")["result"]  # a cold replay on the worker
    return result, seen, history(client, handle.workflow_id)


@pytest.fixture(scope="module")
def runs(dev_server_session: DevServer) -> Dict[str, Outcome]:
    return {"sdk": run_on_sdk(dev_server_session, sdk_module, _scenario),
            "ours": run_on_ours(dev_server_session, swapped(sdk_module), _scenario)}


def _without_ids(events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    out = []
    for event in events:
        payload = dict(event.get("payload") or {})
        if isinstance(payload.get("attempts"), list):
            payload["attempts"] = [{key: attempt[key] for key in _ATTEMPT_FIELDS if key in attempt}
                                   for attempt in payload["attempts"]]
        out.append({**event, "payload": payload})
    return out


def test_same_results_and_history_on_both_workers(runs: Dict[str, Outcome]) -> None:
    (sdk_result, sdk_seen, sdk_events), (our_result, our_seen, our_events) = runs["sdk"], runs["ours"]
    assert sdk_result["retried"] == "ok after 3"  # the published SDK's own answer is the reference
    assert our_result == sdk_result
    # the 70,000-byte failure was bounded to the 63,488-byte message cap before the workflow saw it,
    # and a cold (query) replay sees the very same text
    assert sdk_result["failure_sizes"][0] == 63488 and sdk_result["failure_ends"][0].endswith(
        '{"omitted_fields":{"message":70007}}]')
    assert our_seen == sdk_seen and [len(text.encode()) for text in our_seen] == our_result["failure_sizes"]
    assert shape(_without_ids(our_events), _FIELDS) == shape(_without_ids(sdk_events), _FIELDS)
    scheduled = [e["payload"] for e in our_events if e["event_type"] == "ActivityScheduled"
                 and e["payload"].get("execution_mode") == "local"]
    assert [len(p["attempts"]) for p in scheduled] == [1, 3, 2, 1, 1]  # retries exactly up to max_attempts
    assert [a["outcome"] for a in scheduled[1]["attempts"]] == ["failed", "failed", "completed"]
    assert [a.get("backoff_seconds") for a in scheduled[1]["attempts"]] == [0, 1, None]


@pytest.mark.parametrize("who", ["sdk", "ours"])
def test_each_history_replays_byte_equal_cold_and_sticky_at_every_cut(runs: Dict[str, Outcome], who: str) -> None:
    result, _, events = runs[who]
    cls = swapped(sdk_module).Checkout
    local = lambda: RecordedLocalRunner(events)  # noqa: E731
    final = cold(cls, events, ["order-1"], "avro", local)
    assert final is not None and "complete_workflow" in final
    every_cut(cls, ["order-1"], events, "avro", local)
    # between the real tasks a kept state never declines: the local outcomes the last task sent are
    # matched with their recorded pairs (the cut after the terminal event is a cold start by design)
    cuts = [cut for cut in task_boundaries(events)[1:] if cut < len(events)]
    tasks = walk(cls, ["order-1"], events, "avro", cuts, local)
    assert tasks.declined == [] and tasks.resumed == len(cuts) - 1 > 0, (cuts, tasks)
    # replaying the whole history (no runner: nothing may run again) reaches the recorded result
    from sync_worker.workflow import replay
    done = replay(cls, events, ["order-1"], run_id="r")
    assert payloads.decode_envelope(done.commands[-1].to_wire("q")["result"]) == result
