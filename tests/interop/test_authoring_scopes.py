"""Cancellation scopes and the cancellation surface: one SDK-authored source, both workers.

``tests/interop/_authoring_scopes.py`` on the published SDK's worker and, import swapped, on ours:
the same flags, shield and context, the same refusal of ``ctx.cancellation_scope`` (2.12 keeps
scope authoring a disabled candidate), and nothing written to the history when an uncaught scope
refuses the task (the run stays open on both). Each history replays byte-equal cold and sticky.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Tuple

import pytest

from sync_worker.client import Client
from sync_worker.devserver import DevServer
from tests._sticky_equivalence import every_cut
from tests.interop import _authoring_scopes as sdk_module
from tests.interop._authoring_harness import history, run_on_ours, run_on_sdk, shape, swapped

Outcome = Tuple[Any, List[Dict[str, Any]], List[Dict[str, Any]], str]
_FIELDS = {"ActivityScheduled": ("sequence", "activity_type", "arguments"), "WorkflowCompleted": ("output",)}


def _scenario(client: Client, queue: str) -> Outcome:
    handle = client.start_workflow("interop.scopes.shielded", task_queue=queue)
    result = client.get_result(handle.workflow_id, timeout=60, poll_interval=0.1)
    refused = client.start_workflow("interop.scopes.scoped", task_queue=queue)
    time.sleep(3.0)  # several task attempts: the SDK abandons each, ours fails each
    status = client.describe_workflow(refused.workflow_id).status
    return result, history(client, handle.workflow_id), history(client, refused.workflow_id), str(status)


@pytest.fixture(scope="module")
def runs(dev_server_session: DevServer) -> Dict[str, Outcome]:
    return {"sdk": run_on_sdk(dev_server_session, sdk_module, _scenario),
            "ours": run_on_ours(dev_server_session, swapped(sdk_module), _scenario)}


def test_same_cancellation_surface_and_refusal_on_both_workers(runs: Dict[str, Outcome]) -> None:
    sdk_result, sdk_events, sdk_refused, sdk_status = runs["sdk"]
    our_result, our_events, our_refused, our_status = runs["ours"]
    assert sdk_result == {"requested": False, "context": None, "cleanup": "cleaned inner",
                          "refused": ["LocalActivityExecutionAborted",
                                      "cancellation_scope_execution_not_supported: candidate authoring is disabled"],
                          "after": "cleaned after"}
    assert our_result == sdk_result
    assert shape(our_events, _FIELDS) == shape(sdk_events, _FIELDS)
    # an uncaught scope: nothing recorded past the start, the run still open on both workers
    assert [e["event_type"] for e in our_refused] == [e["event_type"] for e in sdk_refused] == \
        ["StartAccepted", "WorkflowStarted"]
    assert our_status == sdk_status == "running"


@pytest.mark.parametrize("who", ["sdk", "ours"])
def test_each_history_replays_byte_equal_cold_and_sticky_at_every_cut(runs: Dict[str, Outcome], who: str) -> None:
    _, events, _, _ = runs[who]
    walked = every_cut(swapped(sdk_module).Shielded, [], events, "avro")
    assert walked.resumed > 0
