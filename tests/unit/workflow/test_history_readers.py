"""The history readers' fast paths for decoded dicts agree with their Mapping paths."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Dict

import pytest

from sync_worker.errors import LocalActivityExecutionAborted
from sync_worker.workflow.history import event_payload, step_details
from sync_worker.workflow.scopes import refuse_scoped_history

GROUP = {"parallel_group_id": "g1", "parallel_group_kind": "all", "parallel_group_base_sequence": 3,
         "parallel_group_size": 2, "parallel_group_index": 1}


def test_event_payload_copies_a_dict_and_reads_any_mapping() -> None:
    inner = {"sequence": 4}
    event: Dict[str, Any] = {"payload": inner}
    copied = event_payload(event)
    copied["sequence"] = 5
    assert inner == {"sequence": 4} and copied is not inner
    assert event_payload({"payload": MappingProxyType({"sequence": 4})}) == {"sequence": 4}
    assert event_payload({"payload": ["not", "a", "mapping"]}) == {}


@pytest.mark.parametrize("wrap", [dict, MappingProxyType])
def test_step_details_group_path_from_flat_keys(wrap: Any) -> None:
    details = step_details(wrap({"activity_type": "a", "timer_kind": "", **GROUP}))
    assert details == {"activity_type": "a", "parallel_group_path": [GROUP]}


@pytest.mark.parametrize("missing", sorted(GROUP))
def test_step_details_no_group_path_when_a_group_key_is_missing(missing: str) -> None:
    payload = {key: value for key, value in GROUP.items() if key != missing}
    assert "parallel_group_path" not in step_details(payload)


def test_step_details_no_group_path_for_an_index_outside_the_group() -> None:
    assert "parallel_group_path" not in step_details({**GROUP, "parallel_group_index": 2})


@pytest.mark.parametrize("wrap", [dict, MappingProxyType])
@pytest.mark.parametrize("where", [None, "activity", "timer", "child_workflow"])
def test_scoped_history_refused_in_payload_or_snapshot(wrap: Any, where: Any) -> None:
    scoped = wrap({"cancellation_scope_id": "scope-1"})
    payload = scoped if where is None else wrap({"sequence": 1, where: scoped})
    with pytest.raises(LocalActivityExecutionAborted):
        refuse_scoped_history([{"event_type": "ActivityScheduled", "payload": payload}])


def test_root_scope_and_non_mapping_payloads_pass() -> None:
    refuse_scoped_history([
        {"event_type": "ActivityScheduled", "payload": {"cancellation_scope_id": "root", "activity": None}},
        {"event_type": "TimerScheduled", "payload": MappingProxyType({"timer": {"cancellation_scope_id": "root"}})},
        {"event_type": "WorkflowStarted", "payload": "not a mapping"},
    ])


@pytest.mark.parametrize("payload, details", [
    ({"sequence": 1, "activity_type": "a", "activity_execution_id": "x", "task_queue": "q", "result": None}, {
        "activity_type": "a"}),
    ({"sequence": 1, "activity_type": ""}, {}),
    ({"sequence": 1, "activity_type": 7}, {}),
    ({"sequence": 1, "activity_type": "", "activity_name": "b"}, {"activity_type": "b"}),
    ({"sequence": 1, "activity_type": "a", "activity_name": "b"}, {"activity_type": "a"}),
    ({"sequence": 1, "activity": {"type": "c"}}, {"activity_type": "c"}),
    ({"sequence": 1, "activity_type": "a", "local_activity": True}, {"activity_type": "a", "execution_mode": "local"}),
    ({"sequence": 2, "delay_seconds": 5, "timer_kind": "user"}, {"delay_seconds": 5, "timer_kind": "user"}),
    ({"sequence": 3, "workflow_type": "child", "parent_close_policy": "abandon"}, {
        "workflow_type": "child", "parent_close_policy": "abandon"}),
    ({"sequence": 4, "result": {"codec": "avro", "blob": ""}}, {}),
    ({}, {}),
])
@pytest.mark.parametrize("wrap", [dict, MappingProxyType])
def test_step_details_reads_only_what_a_payload_holds(wrap: Any, payload: Dict[str, Any],
                                                      details: Dict[str, Any]) -> None:
    assert step_details(wrap(payload)) == details


def test_digest_is_each_event_read_once() -> None:
    from sync_worker.workflow.history import digest

    started = {"event_type": "WorkflowStarted", "payload": {"workflow_type": "w"}}
    scheduled = {"type": "ActivityScheduled", "payload": {"sequence": "3"}}
    opaque = {"event_type": "", "payload": ["not", "a", "mapping"]}
    assert digest([started, scheduled, opaque]) == [
        (started, "WorkflowStarted", {"workflow_type": "w"}, None),
        (scheduled, "ActivityScheduled", {"sequence": "3"}, 3), (opaque, None, {}, None)]
    assert digest([started])[0][2] is started["payload"]  # read in place: the passes only read it
