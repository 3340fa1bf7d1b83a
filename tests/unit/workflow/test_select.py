"""Durable selection in replay: the commands the published SDK sends (byte for byte, its own
replayer as the reference), the verdict replayed from ``SelectionResolved``, handles, and what is
refused. Histories recorded on the dev server by both workers are walked at every cut in
``tests/interop/test_authoring_select.py``."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

from sync_worker import payloads
from sync_worker import workflow as our_workflow
from sync_worker.errors import LocalActivityExecutionAborted, NonDeterministicReplayError
from tests._sdk_missing import SDK_MISSING
from tests.unit.workflow._helpers import ev, started

sdk_workflow = pytest.importorskip("durable_workflow.workflow", reason=SDK_MISSING)


def _race(wf: Any) -> type:
    @wf.defn(name="unit.select.race")
    class Race:
        def run(self, ctx: Any) -> Any:
            first = yield ctx.select({
                "a": ctx.schedule_activity("work", ["a"]),
                "pair": [ctx.schedule_activity("work", ["b"]), ctx.start_timer(5)],
                "t": ctx.start_timer(30),
            })
            second = yield ctx.select([ctx.start_child_workflow("kid", [1]), ctx.start_timer(9)])
            return {"first": [first.key, first.kind, first.value, first.identity],
                    "second": [second.key, second.kind]}

    return Race


OURS, THEIRS = _race(our_workflow), _race(sdk_workflow)


def _member(kind: str, sequence: int, payload: Dict[str, Any]) -> Dict[str, Any]:
    return ev(kind, sequence=sequence, **payload)


def _history(upto: int) -> List[Dict[str, Any]]:
    """The race recorded as the dev server records it, cut after ``upto`` steps of the story."""
    first = [c.to_wire("q") for c in our_workflow.replay(OURS, [started()], []).commands]
    scheduled = [
        _member("ActivityScheduled", 1, {**first[0], "activity_execution_id": "act-1"}),
        _member("ActivityScheduled", 2, {**first[1], "activity_execution_id": "act-2"}),
        _member("TimerScheduled", 3, {**first[2], "timer_id": "timer-3"}),
        _member("TimerScheduled", 4, {**first[3], "timer_id": "timer-4"}),
    ]
    for event in scheduled:
        event["payload"].pop("type")
        event["payload"].pop("arguments", None)
    done = {**scheduled[0]["payload"], "result": payloads.encode("did a"), "payload_codec": "avro"}
    events = [started(), *scheduled, {"id": "e-done", "event_type": "ActivityCompleted", "payload": done},
              ev("SelectionResolved", selection_group_id="select-calls:1:4", selection_group_base_sequence=1,
                 selection_group_size=4, member_key="a", member_index=0, member_base_sequence=1, member_size=1,
                 operation_kind="activity", operation_identity="act-1", outcome="completed",
                 resolution_event_id="e-done", resolution_event_type="ActivityCompleted")]
    return events[:upto]


def _ours(history: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [c.to_wire("q") for c in our_workflow.replay(OURS, history, [], run_id="r").commands]


def _theirs(history: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    outcome = sdk_workflow.replay(THEIRS, history, [], run_id="r", payload_codec="avro")
    return list(sdk_workflow.commands_to_server_commands(outcome.commands, "q"))


@pytest.mark.parametrize("upto", [1, 6, 7])
def test_the_same_commands_as_the_published_sdk(upto: int) -> None:
    history = _history(upto)
    assert json.dumps(_ours(history), sort_keys=True) == json.dumps(_theirs(history), sort_keys=True)


def test_members_carry_the_sdk_tags() -> None:
    first = _ours([started()])
    assert [c["type"] for c in first] == ["schedule_activity", "schedule_activity", "start_timer", "start_timer"]
    outer = first[1]["parallel_group_path"][0]
    assert outer == {"parallel_group_id": "select-calls:1:4", "parallel_group_kind": "mixed",
                     "parallel_group_mode": "select", "parallel_group_base_sequence": 1, "parallel_group_size": 4,
                     "parallel_group_index": 1, "selection_member_key": "pair", "selection_member_index": 1,
                     "selection_member_base_sequence": 2, "selection_member_size": 2,
                     "selection_member_kind": "group"}
    assert first[1]["parallel_group_path"][1]["parallel_group_id"] == "parallel-calls:2:2"
    assert first[0]["parallel_group_mode"] == "select" and first[0]["selection_member_key"] == "a"


def test_the_verdict_resumes_the_run_and_a_wrong_one_is_refused() -> None:
    history = _history(7)
    commands = _ours(history)
    assert [c["type"] for c in commands] == ["start_child_workflow", "start_timer"]
    assert commands[0]["parallel_group_id"] == "select-calls:5:2"
    wrong = json.loads(json.dumps(history))
    wrong[-1]["payload"]["member_key"] = "t"
    with pytest.raises(NonDeterministicReplayError, match="SelectionResolved"):
        our_workflow.replay(OURS, wrong, [])
    unrelated = json.loads(json.dumps(history))
    unrelated[-1]["payload"]["resolution_event_id"] = "e-other"
    with pytest.raises(NonDeterministicReplayError, match="terminal"):
        our_workflow.replay(OURS, unrelated, [])


def test_members_already_started_are_never_sent_again() -> None:
    assert _ours(_history(6)) == []  # started, no verdict yet: waiting for history


def test_what_a_selection_refuses() -> None:
    @our_workflow.defn(name="unit.select.refused")
    class Refused:
        def __init__(self) -> None:
            self.kind = "condition"

        def run(self, ctx: Any) -> Any:
            if self.kind == "condition":
                return (yield ctx.select({"c": ctx.wait_condition(lambda: True)}))
            return (yield ctx.select({"l": ctx.local_activity("work", [])}))

    failed = our_workflow.replay(Refused, [started()], []).commands[0].to_wire("q")
    assert failed["type"] == "fail_workflow" and "condition waits is not supported" in failed["message"]
    ctx = our_workflow.WorkflowContext(run_id="r")
    for bad in ({}, {True: ctx.start_timer(1)}, {"": ctx.start_timer(1)}, {-1: ctx.start_timer(1)}):
        with pytest.raises((TypeError, ValueError)):
            ctx.select(bad)

    @our_workflow.defn(name="unit.select.local")
    class Local:
        def run(self, ctx: Any) -> Any:
            return (yield ctx.select({"l": ctx.local_activity("work", [])}))

    with pytest.raises(LocalActivityExecutionAborted, match="local groups require"):
        our_workflow.replay(Local, [started()], [])
