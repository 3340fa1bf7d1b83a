"""``ctx.message_stream(name)``: first run, replay, waits and cursors (ours, and against the published SDK).

Histories are shaped like the dev server records them: each appended message is a
``SignalReceived`` under the reserved signal name whose one argument is the message body.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import pytest

from sync_worker import payloads
from sync_worker import workflow as our_workflow
from sync_worker.workflow import WorkflowContext, WorkflowRegistry, execute_workflow_task, replay
from sync_worker.workflow.streams import CURSOR_SCHEMA, MESSAGE_SCHEMA, sdk_stream_wait_fingerprint
from tests._sdk_missing import SDK_MISSING

from ._helpers import ev, started

RESERVED = "__durable_workflow_message_stream"
STREAM = "orders"


def message(position: int, *values: Any, message_id: Optional[str] = None, stream: str = STREAM,
            envelope: Any = None) -> Dict[str, Any]:
    body = {"schema": MESSAGE_SCHEMA, "stream_name": stream, "message_id": message_id or f"m-{position}",
            "position": position, "payload_envelope": envelope or payloads.envelope(list(values))}
    return ev("SignalReceived", signal_name=RESERVED, arguments=payloads.envelope([body]), payload_codec="avro")


def checkpoint(through: int, stream: str = STREAM) -> Dict[str, Any]:
    body = {"schema": CURSOR_SCHEMA, "stream_name": stream, "through_position": through}
    return ev("SignalReceived", signal_name=RESERVED, arguments=payloads.envelope([body]), payload_codec="avro")


def opened(sequence: int, cursor: int, stream: str = STREAM) -> Dict[str, Any]:
    return ev("ConditionWaitOpened", sequence=sequence, condition_wait_id=f"w{sequence}",
              condition_key=f"message-stream:{stream}:{cursor}",
              condition_definition_fingerprint=sdk_stream_wait_fingerprint())


def satisfied(sequence: int) -> Dict[str, Any]:
    return ev("ConditionWaitSatisfied", sequence=sequence, condition_wait_id=f"w{sequence}")


def _classes(wf: Any) -> Dict[str, type]:
    """The same workflow source for either SDK's ``workflow`` module."""

    @wf.defn(name="x.stream-two")
    class TwoMessages:
        def run(self, ctx: Any) -> Any:
            stream = ctx.message_stream(STREAM)
            got = []
            for _ in range(2):
                item = yield from stream.receive_one()
                got.append([item.message_id, item.position, item.arguments])
            return got

    @wf.defn(name="x.stream-batch")
    class Batch:
        def run(self, ctx: Any) -> Any:
            batch = yield from ctx.message_stream(STREAM).receive(3)
            echoed = yield ctx.schedule_activity("echo", [len(batch)])
            last = yield from ctx.message_stream(STREAM).receive_one()
            return {"batch": [m.position for m in batch], "echoed": echoed, "last": last.arguments}

    @wf.defn(name="x.stream-two-names")
    class TwoStreams:
        def run(self, ctx: Any) -> Any:
            first = yield from ctx.message_stream("b-stream").receive_one()
            second = yield from ctx.message_stream("a-stream").receive_one()
            return [first.arguments, second.arguments]

    return {"two": TwoMessages, "batch": Batch, "names": TwoStreams}


OURS = _classes(our_workflow)
STARTED = started()
FP = sdk_stream_wait_fingerprint()


def _replay(name: str, history: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], Any, Any]:
    result = replay(OURS[name], history, [], workflow_id="wf-s", run_id="run-s")
    return [c.to_wire("q") for c in result.commands], result.message_stream_cursors, result.message_stream_waits


def _open_wire(cursor: int, stream: str = STREAM) -> Dict[str, Any]:
    return {"type": "open_condition_wait", "condition_key": f"message-stream:{stream}:{cursor}",
            "condition_definition_fingerprint": FP}


def test_first_run_opens_a_keyed_wait_and_reports_it() -> None:
    commands, cursors, waits = _replay("two", [STARTED])
    assert commands == [_open_wire(0)]
    assert cursors == []
    assert waits == [{"stream_name": STREAM, "after_position": 0}]


def test_first_message_advances_the_cursor_and_opens_the_next_wait() -> None:
    commands, cursors, waits = _replay("two", [STARTED, opened(1, 0), message(1, {"n": 1})])
    assert commands == [_open_wire(1)]
    assert cursors == [{"stream_name": STREAM, "through_position": 1}]
    assert waits == [{"stream_name": STREAM, "after_position": 1}]


def test_an_open_wait_without_a_message_is_reopened_with_the_same_key() -> None:
    history = [STARTED, opened(1, 0), message(1, "a"), satisfied(1), opened(2, 1)]
    commands, cursors, waits = _replay("two", history)
    assert commands == [_open_wire(1)]
    assert (cursors, waits) == ([{"stream_name": STREAM, "through_position": 1}],
                                [{"stream_name": STREAM, "after_position": 1}])


def test_second_message_completes_with_both_messages_and_no_wait() -> None:
    base = [STARTED, opened(1, 0), message(1, "a"), satisfied(1), opened(2, 1), message(2, "b", "c")]
    for history in (base, [*base, satisfied(2)]):
        commands, cursors, waits = _replay("two", history)
        assert commands[-1]["type"] == "complete_workflow"
        assert payloads.decode_envelope(commands[-1]["result"]) == [["m-1", 1, ["a"]], ["m-2", 2, ["b", "c"]]]
        assert cursors == [{"stream_name": STREAM, "through_position": 2}]
        assert waits == []


def test_queued_messages_are_taken_in_position_order_up_to_max_items() -> None:
    # four messages arrived before the first task ran, out of order; receive(3) takes 1..3 at once
    history = [STARTED, message(2, "two"), message(1, "one"), message(4, "four"), message(3, "three")]
    commands, cursors, waits = _replay("batch", history)
    assert commands == [{"type": "schedule_activity", "activity_type": "echo",
                         "arguments": payloads.envelope([3]), "queue": "q"}]
    assert (cursors, waits) == ([{"stream_name": STREAM, "through_position": 3}], [])
    done = [*history, ev("ActivityScheduled", sequence=1, activity_type="echo"),
            ev("ActivityCompleted", sequence=1, result=payloads.encode(3), payload_codec="avro")]
    commands, cursors, _ = _replay("batch", done)
    assert payloads.decode_envelope(commands[-1]["result"]) == {"batch": [1, 2, 3], "echoed": 3, "last": ["four"]}
    assert cursors == [{"stream_name": STREAM, "through_position": 4}]


def test_duplicates_stale_positions_and_malformed_deliveries_are_ignored() -> None:
    bad_envelope = {"codec": "avro", "blob": "not base64!"}
    history = [STARTED, opened(1, 0), message(1, "a"), message(1, "again", message_id="m-x"),
               message(5, "dup-id", message_id="m-1"), message(2, "bad", envelope=bad_envelope),
               message(0, "position zero"), message(2, "other", stream="elsewhere")]
    commands, cursors, waits = _replay("two", history)
    assert commands == [_open_wire(1)]  # only m-1 counted: the second receive still waits
    assert cursors == [{"stream_name": STREAM, "through_position": 1}]
    assert waits == [{"stream_name": STREAM, "after_position": 1}]


def test_cursor_checkpoint_seeds_the_cursor_before_the_first_wait() -> None:
    commands, cursors, waits = _replay("two", [STARTED, checkpoint(5)])
    assert commands == [_open_wire(5)]
    assert cursors == [{"stream_name": STREAM, "through_position": 5}]
    assert waits == [{"stream_name": STREAM, "after_position": 5}]
    # a message at or below the checkpoint was already consumed by the previous run
    history = [STARTED, checkpoint(5), opened(1, 5), message(5, "old"), message(6, "new")]
    commands, cursors, _ = _replay("two", history)
    assert commands == [_open_wire(6)]
    assert cursors == [{"stream_name": STREAM, "through_position": 6}]


def test_reports_are_sorted_by_stream_name() -> None:
    history = [STARTED, opened(1, 0, "b-stream"), message(1, "b", stream="b-stream")]
    commands, cursors, waits = _replay("names", history)
    assert commands == [_open_wire(0, "a-stream")]
    assert cursors == [{"stream_name": "b-stream", "through_position": 1}]
    assert waits == [{"stream_name": "a-stream", "after_position": 0}]
    history += [satisfied(1), opened(2, 0, "a-stream"), message(1, "a", stream="a-stream")]
    commands, cursors, waits = _replay("names", history)
    assert payloads.decode_envelope(commands[-1]["result"]) == [["b"], ["a"]]
    assert cursors == [{"stream_name": "a-stream", "through_position": 1},
                       {"stream_name": "b-stream", "through_position": 1}]
    assert waits == []


def test_a_changed_stream_wait_key_is_non_deterministic() -> None:
    history = [STARTED, ev("ConditionWaitOpened", sequence=1, condition_wait_id="w1",
                           condition_key="message-stream:orders:7", condition_definition_fingerprint=FP)]
    with pytest.raises(our_workflow.NonDeterministicReplayError, match="condition_key_changed"):
        _replay("two", history)


def test_execute_workflow_task_carries_cursors_and_waits() -> None:
    registry = WorkflowRegistry([OURS["two"]])
    task = {"task_id": "t1", "workflow_type": "x.stream-two", "workflow_id": "wf-s", "run_id": "run-s",
            "payload_codec": "avro", "arguments": payloads.envelope([])}
    outcome = execute_workflow_task(registry, task, [STARTED, opened(1, 0), message(1, "a")], task_queue="q")
    assert outcome.failure is None
    assert outcome.commands == [_open_wire(1)]
    assert outcome.message_stream_cursors == [{"stream_name": STREAM, "through_position": 1}]
    assert outcome.message_stream_waits == [{"stream_name": STREAM, "after_position": 1}]
    assert our_workflow.WorkflowTaskOutcome([]).message_stream_cursors == []  # old constructor calls still work


@pytest.mark.parametrize("name", ["", "x" * 129, "has space", "slash/name", 7])
def test_invalid_stream_names_are_refused(name: Any) -> None:
    with pytest.raises(ValueError):
        WorkflowContext(run_id="r").message_stream(name)


@pytest.mark.parametrize("max_items", [0, 101, True, 1.5])
def test_max_items_is_bounded(max_items: Any) -> None:
    receiver = WorkflowContext(run_id="r").message_stream("ok.name:1-x").receive(max_items)
    with pytest.raises(ValueError, match="max_items"):
        next(receiver)


def test_reserved_signal_name_cannot_be_registered() -> None:
    with pytest.raises(ValueError, match="reserved"):
        our_workflow.signal(RESERVED)


# -- the published SDK replays the same histories to the same commands, cursors and waits ----------------
HISTORIES: List[Tuple[str, str, List[Dict[str, Any]]]] = [
    ("two", "fresh", [STARTED]),
    ("two", "first message", [STARTED, opened(1, 0), message(1, {"n": 1})]),
    ("two", "re-open", [STARTED, opened(1, 0), message(1, "a"), satisfied(1), opened(2, 1)]),
    ("two", "complete", [STARTED, opened(1, 0), message(1, "a"), satisfied(1), opened(2, 1), message(2, "b")]),
    ("two", "junk", [STARTED, opened(1, 0), message(1, "a"), message(1, "again", message_id="m-x"),
                     message(5, "dup-id", message_id="m-1"), message(0, "zero")]),
    ("two", "checkpoint", [STARTED, checkpoint(5), opened(1, 5), message(5, "old"), message(6, "new")]),
    ("batch", "queued", [STARTED, message(2, "two"), message(1, "one"), message(4, "four"), message(3, "three")]),
    ("batch", "during activity", [STARTED, opened(1, 0), message(1, "one"), satisfied(1),
                                  ev("ActivityScheduled", sequence=2, activity_type="echo"), message(2, "two")]),
    ("names", "two streams", [STARTED, opened(1, 0, "b-stream"), message(1, "b", stream="b-stream")]),
]


@pytest.mark.parametrize(("name", "label", "history"), HISTORIES, ids=[f"{n}-{label}" for n, label, _ in HISTORIES])
def test_same_outcome_as_the_published_sdk(name: str, label: str, history: List[Dict[str, Any]]) -> None:
    sdk_workflow = pytest.importorskip("durable_workflow.workflow", reason=SDK_MISSING)
    theirs = _classes(sdk_workflow)[name]
    outcome = sdk_workflow.replay(theirs, history, [], workflow_id="wf-s", run_id="run-s", payload_codec="avro")
    expected = (list(sdk_workflow.commands_to_server_commands(outcome.commands, "q")),
                outcome.message_stream_cursors, outcome.message_stream_waits)
    assert _replay(name, history) == expected
