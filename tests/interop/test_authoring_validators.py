"""Update validators: one SDK-authored source, both workers, one dev server.

``tests/interop/_authoring_validators.py`` on the published SDK's worker (which refused to start
against the dev server before it advertised synchronous validation) and, import swapped, on ours:
the same verdicts for the same requests (a ``@handler.validator`` that raises, an
``@workflow.update_validator`` that returns ``False``, a retried rejected request id), the caller
gets ``UpdateRejected`` -- from our client and from the published SDK's own -- and an accepted
update proceeds. A rejection leaves nothing the workflow replays (no ``UpdateAccepted``): only the
server's ``UpdateRejected`` record. Both histories replay byte-equal cold and sticky at every cut.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Dict, List, Tuple

import pytest

from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.errors import UpdateRejected
from tests._sticky_equivalence import every_cut
from tests.interop import _authoring_validators as sdk_module
from tests.interop._authoring_harness import history, run_on_ours, run_on_sdk, shape, swapped

Outcome = Tuple[List[Any], Any, List[Dict[str, Any]], Any]
_REQUESTS = (("add", ["pen", 2], "r1"), ("add", ["pen", 1], "r2"), ("add", ["ink", 0], "r3"),
             ("discount", ["bad"], "r4"), ("discount", ["ok10"], "r5"), ("add", ["ink", 0], "r3"),
             ("checkout", [], "r6"))
_FIELDS = {"WorkflowStarted": ("declared_updates", "declared_update_validators"),
           "UpdateAccepted": ("update_name", "arguments"), "UpdateApplied": ("update_name", "arguments"),
           "UpdateRejected": ("update_name", "arguments", "validation_errors"),
           "UpdateCompleted": ("update_name", "result"), "WorkflowCompleted": ("output",)}


def _sdk_client_verdict(url: str, workflow_id: str) -> Tuple[str, str, Any]:
    """The published SDK's own client, on a rejected update: its ``UpdateRejected``."""
    from durable_workflow import Client as SdkClient
    from durable_workflow.errors import UpdateRejected as SdkUpdateRejected

    async def ask() -> Tuple[str, str, Any]:
        client = SdkClient(url)
        try:
            await client.update_workflow(workflow_id, "add", args=["pen", 5], request_id="sdk-client-1")
        except SdkUpdateRejected as rejected:
            return type(rejected).__name__, str(rejected), rejected.body.get("update_status")
        finally:
            await client.aclose()
        raise AssertionError("the SDK client accepted a rejected update")

    return asyncio.run(ask())


def _scenario(client: Client, queue: str) -> Outcome:
    handle = client.start_workflow("interop.validators.cart", task_queue=queue)
    # Both workers get the same order: the first workflow task has opened the wait before the first
    # update lands (otherwise a fast first task records ConditionWaitOpened before UpdateAccepted and a
    # slow one after it -- both legitimate, but the shapes would then differ by timing, not by worker).
    deadline = time.monotonic() + 30
    while not any(e["event_type"] == "ConditionWaitOpened" for e in history(client, handle.workflow_id)):
        assert time.monotonic() < deadline, "the cart workflow never opened its wait"
        time.sleep(0.01)
    verdicts: List[Any] = []
    for name, args, request_id in _REQUESTS:
        if name == "checkout":
            sdk_verdict = _sdk_client_verdict(client.base_url, handle.workflow_id)
        try:
            answer = client.update_workflow(handle.workflow_id, name, args=args, wait_for="completed",
                                            request_id=request_id)
            verdicts.append(("completed", answer.get("result")))
        except UpdateRejected as rejected:
            verdicts.append(("rejected", str(rejected), rejected.exception_type, rejected.status))
    result = client.get_result(handle.workflow_id, timeout=30, poll_interval=0.1)
    return verdicts, result, history(client, handle.workflow_id), sdk_verdict


@pytest.fixture(scope="module")
def runs(dev_server_session: DevServer) -> Dict[str, Outcome]:
    return {"sdk": run_on_sdk(dev_server_session, sdk_module, _scenario),
            "ours": run_on_ours(dev_server_session, swapped(sdk_module), _scenario)}


def test_same_verdicts_and_history_on_both_workers(runs: Dict[str, Outcome]) -> None:
    sdk_verdicts, sdk_result, sdk_events, sdk_client = runs["sdk"]
    our_verdicts, our_result, our_events, our_client = runs["ours"]
    assert sdk_verdicts == [
        ("completed", 2),
        ("rejected", "'pen is already in the cart'", "KeyError", 422),
        ("rejected", "quantity must be positive, got 0", "ValueError", 422),
        ("rejected", "update validator 'discount' returned false", "ValueError", 422),
        ("completed", "OK10"),
        ("rejected", "quantity must be positive, got 0", "ValueError", 422),  # the retried request id
        ("completed", ["pen", "pen"]),
    ]
    assert our_verdicts == sdk_verdicts
    assert our_result == sdk_result == {"items": ["pen", "pen"], "shipped": "shipped 2"}
    assert our_client == sdk_client == ("UpdateRejected", "'pen is already in the cart'", "rejected")
    assert shape(our_events, _FIELDS) == shape(sdk_events, _FIELDS)
    kinds = [e["event_type"] for e in our_events]
    # four rejected requests (the retry of r3 is the same one), none of them accepted
    assert kinds.count("UpdateRejected") == 4 and kinds.count("UpdateAccepted") == 3


@pytest.mark.parametrize("who", ["sdk", "ours"])
def test_each_history_replays_byte_equal_cold_and_sticky_at_every_cut(runs: Dict[str, Outcome], who: str) -> None:
    _, _, events, _ = runs[who]
    walked = every_cut(swapped(sdk_module).Cart, [], events, "avro")
    assert walked.resumed > 0
