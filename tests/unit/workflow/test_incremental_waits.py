"""Sticky resume of condition waits, parallel groups and message streams, and its fallbacks.

Histories here are built in the dev server's shapes (``ConditionWaitSatisfied`` recorded in
the preamble of the completion that moved on, a re-open of the same key recorded without
one, timeouts as ``TimerFired`` with the wait's id). Every test walks every cut and checks
each resumed task against a cold replay (``tests/_sticky_equivalence``); the fallback tests
also pin the cut where the kept state must decline, one per hazard the resumer guards.
"""

from __future__ import annotations

from typing import Any, Dict, List

from sync_worker import payloads, workflow
from sync_worker.workflow.incremental import resume, start
from sync_worker.workflow.streams import CURSOR_SCHEMA, MESSAGE_SCHEMA, sdk_stream_wait_fingerprint
from tests._sticky_equivalence import cold, every_cut, walk
from tests.unit.workflow._helpers import activity_done, blob, ev, started

RESERVED = "__durable_workflow_message_stream"


@workflow.defn(name="sticky-gate")
class Gate:
    """Each step waits until enough "open" signals arrived, then runs an activity."""

    def __init__(self) -> None:
        self.opened = 0

    @workflow.signal("open")
    def open_gate(self) -> None:
        self.opened += 1

    def run(self, ctx: Any, steps: int, need: int = 1) -> Any:
        total = 0
        for step in range(steps):
            ok = yield ctx.wait_condition(lambda step=step: self.opened >= need * (step + 1), key="gate", timeout=60)
            if not ok:
                return {"timed_out": step, "total": total}
            total += yield ctx.schedule_activity("add", [step])
        return {"total": total, "opened": self.opened}


@workflow.defn(name="sticky-counted")
class Counted:
    """Waits without a key: the predicate fingerprint is the wait's identity."""

    def __init__(self) -> None:
        self.count = 0

    @workflow.signal("inc")
    def inc(self) -> None:
        self.count += 1

    def run(self, ctx: Any, steps: int) -> Any:
        for step in range(steps):
            yield ctx.wait_condition(lambda step=step: self.count > step)
            yield ctx.schedule_activity("add", [step])
        return self.count


@workflow.defn(name="sticky-pairs")
class Pairs:
    def run(self, ctx: Any, steps: int) -> Any:
        out = []
        for step in range(steps):
            left, right = yield [ctx.schedule_activity("left", [step]), ctx.schedule_activity("right", [step])]
            out.append([left, right])
        return out


@workflow.defn(name="sticky-inbox")
class Inbox:
    def run(self, ctx: Any, wanted: int) -> Any:
        seen: List[Any] = []
        stream = ctx.message_stream("inbox")
        while len(seen) < wanted:
            batch = yield from stream.receive(2)
            seen.extend(message.arguments[0] for message in batch)
            yield ctx.schedule_activity("store", [len(seen)])
        return seen


def _open(sequence: int, key: str = "gate", **extra: Any) -> Dict[str, Any]:
    return ev("ConditionWaitOpened", sequence=sequence, condition_wait_id=f"w{sequence}", condition_key=key,
              timeout_seconds=60, **extra)


def _satisfied(sequence: int, key: str = "gate") -> Dict[str, Any]:
    return ev("ConditionWaitSatisfied", sequence=sequence, condition_wait_id=f"w{sequence}", condition_key=key)


def _signal(name: str) -> Dict[str, Any]:
    return ev("SignalReceived", signal_name=name, value=payloads.envelope([]))


def _gate_history(steps: int) -> List[Dict[str, Any]]:
    """One signal per wait, each released before the next task (the common shape)."""
    events = [started()]
    sequence = 0
    for step in range(steps):
        sequence += 1
        events += [_open(sequence), _signal("open"), _satisfied(sequence)]
        sequence += 1
        events += activity_done(sequence, "add", step)
    return events


def _cuts(history: List[Dict[str, Any]]) -> List[int]:
    return list(range(1, len(history) + 1))


# -- what now resumes ---------------------------------------------------------------------


def test_condition_waits_released_by_signals_resume_at_every_cut() -> None:
    history = _gate_history(6)
    done = every_cut(Gate, [6], history)
    assert done.declined == [] and done.restarted == 1 and done.resumed == len(history) - 1
    final = cold(Gate, history, [6])
    assert final is not None and "complete_workflow" in final


def test_a_wait_reopened_after_input_that_does_not_satisfy_it_resumes() -> None:
    # need=2: the first signal wakes the run, the predicate is still false, the wait re-opens
    # under the same key (the dev server records no ConditionWaitSatisfied for a re-open).
    history = [started()]
    sequence = 0
    for step in range(3):
        first, second = sequence + 1, sequence + 2
        history += [_open(first), _signal("open"), _open(second), _signal("open"), _satisfied(second)]
        sequence = second + 1
        history += activity_done(sequence, "add", step)
    done = every_cut(Gate, [3, 2], history)
    assert done.declined == [] and done.resumed == len(history) - 1


def test_a_wait_that_times_out_resumes() -> None:
    history = [started(), _open(1), _signal("open"), _satisfied(1), *activity_done(2, "add", 0), _open(3),
               ev("TimerFired", sequence=3, condition_wait_id="w3", timer_kind="condition_timeout")]
    done = every_cut(Gate, [2], history)
    assert done.declined == [] and done.resumed == len(history) - 1
    result, _ = start(Gate, history, [2])
    assert payloads.decode_envelope(result.commands[-1].to_wire("q")["result"]) == {"timed_out": 1, "total": 0}


def test_parallel_groups_completing_in_any_order_resume() -> None:
    history = [started()]
    sequence = 0
    for step in range(4):
        base = sequence + 1
        members = []
        for index, kind in enumerate(("left", "right")):
            group = {"parallel_group_id": f"parallel-activities:{base}:2", "parallel_group_kind": "activity",
                     "parallel_group_base_sequence": base, "parallel_group_size": 2, "parallel_group_index": index}
            members.append((base + index, kind, group))
        history += [ev("ActivityScheduled", sequence=seq, activity_type=kind, **group) for seq, kind, group in members]
        order = members if step % 2 == 0 else list(reversed(members))  # odd steps: the right one first
        history += [ev("ActivityCompleted", sequence=seq, activity_type=kind, result=blob(f"{kind}{step}"),
                       payload_codec="avro", **group) for seq, kind, group in order]
        sequence = base + 1
    done = every_cut(Pairs, [4], history)
    assert done.declined == [] and done.resumed == len(history) - 1
    result, _ = start(Pairs, history, [4])
    assert payloads.decode_envelope(result.commands[-1].to_wire("q")["result"]) == [
        [f"left{step}", f"right{step}"] for step in range(4)]


def _message(position: int, value: Any) -> Dict[str, Any]:
    body = {"schema": MESSAGE_SCHEMA, "stream_name": "inbox", "message_id": f"m-{position}", "position": position,
            "payload_envelope": payloads.envelope([value])}
    return ev("SignalReceived", signal_name=RESERVED, arguments=payloads.envelope([body]), payload_codec="avro")


def _stream_open(sequence: int, cursor: int) -> Dict[str, Any]:
    return ev("ConditionWaitOpened", sequence=sequence, condition_wait_id=f"w{sequence}",
              condition_key=f"message-stream:inbox:{cursor}",
              condition_definition_fingerprint=sdk_stream_wait_fingerprint())


def _stream_history() -> List[Dict[str, Any]]:
    history = [started(), _stream_open(1, 0), _message(1, "a"),
               ev("ConditionWaitSatisfied", sequence=1, condition_wait_id="w1"),
               ev("MessageCursorAdvanced", stream_name="inbox", through_position=1), *activity_done(2, "store", 1),
               _stream_open(3, 1), _message(2, "b"), _message(3, "c"),
               ev("ConditionWaitSatisfied", sequence=3, condition_wait_id="w3"), *activity_done(4, "store", 3),
               _stream_open(5, 3), _message(4, "d"), ev("ConditionWaitSatisfied", sequence=5, condition_wait_id="w5"),
               *activity_done(6, "store", 4)]
    return history


def test_message_streams_resume_with_their_cursors() -> None:
    history = _stream_history()
    # Cursors and open waits are compared at every cut too. At task boundaries -- what a
    # worker sees -- every task resumes, the one that takes two messages at once included.
    boundaries = walk(Inbox, [4], history, "avro", [2, 3, 8, 10, 13, len(history)])
    assert boundaries.declined == [] and boundaries.resumed == 5
    # Cut between the two messages, the kept run took one; the second one then belongs to a
    # wait the code already passed (a cold read applies both there): it must fall back, once.
    done = every_cut(Inbox, [4], history)
    assert done.declined == [10], done


# -- where it must fall back to a cold replay ----------------------------------------------------


def test_a_receiver_rebound_by_a_later_reopen_falls_back() -> None:
    # Two signals were recorded before the task ran; that task applied both, found the wait
    # still false and re-opened it. A cold read binds the second signal to the re-open (the
    # server's model: the first one woke the task), so the kept state cannot continue.
    history = [started(), _open(1), _signal("open"), _signal("open"), _open(2), _signal("open"), _satisfied(2),
               *activity_done(3, "add", 0)]
    done = walk(Gate, [1, 3], history, "avro", _cuts(history))
    assert done.declined == [5], done


def test_an_immediately_true_wait_meeting_a_later_recorded_open_falls_back() -> None:
    # The first wait was true at once (nothing recorded); the second opened live. A cold replay
    # of the longer history matches the first yield with that open (same predicate
    # fingerprint, no key): the kept state's decision no longer holds.
    result, _ = start(Counted, [started(), _signal("inc"), *activity_done(1, "add", 0)], [2])
    wait_wire = result.commands[0].to_wire("q")
    assert wait_wire["type"] == "open_condition_wait"
    history = [started(), _signal("inc"), *activity_done(1, "add", 0),
               ev("ConditionWaitOpened", sequence=2, condition_wait_id="w2",
                  condition_definition_fingerprint=wait_wire["condition_definition_fingerprint"]),
               _signal("inc"), ev("ConditionWaitSatisfied", sequence=2, condition_wait_id="w2"),
               *activity_done(3, "add", 1)]
    done = walk(Counted, [2], history, "avro", _cuts(history))
    # 5: the open arrives. 6: the cold-started state matched that open at the first yield, so
    # the signal after it is input for a wait the code already passed.
    assert done.declined == [5, 6], done


def test_input_for_a_wait_the_code_already_passed_falls_back() -> None:
    # A second signal arrived while the task that found the wait satisfied was running: a cold
    # read applies it at that wait (before the activity), the kept run is already past it.
    history = [started(), _open(1), _signal("open"), _signal("open"), _satisfied(1), *activity_done(2, "add", 0),
               _open(3), _signal("open"), _satisfied(3), *activity_done(4, "add", 1)]
    prefix = history[:3]
    _, state = start(Gate, prefix, [2])
    assert state is not None
    assert resume(state, history[3:7]) is None
    done = walk(Gate, [2], history, "avro", [3, 7, len(history)])
    # 12: the cold replay at 7 applied both signals at the first wait, so the second wait was
    # true at once; now a recorded open meets it (same key): the immediately-true hazard.
    assert done.declined == [7, 12], done


def test_a_wait_later_recorded_as_timed_out_falls_back() -> None:
    # The predicate's input changed in a way the kept decision cannot absorb: the run went on
    # as satisfied, and the history now says the wait timed out (a cold replay resolves False).
    history = [started(), _open(1), _signal("open")]
    _, state = start(Gate, history, [2])
    assert state is not None
    later = [ev("ConditionWaitTimedOut", sequence=1, condition_wait_id="w1"), *activity_done(2, "add", 0)]
    assert resume(state, later) is None
    # Cold, the wait resolves False and the workflow returns: the recorded activity is then a
    # non-determinism failure the worker reports -- the kept state must not hide it.
    assert cold(Gate, history + later, [2]) is None


def test_a_stream_cursor_checkpoint_falls_back() -> None:
    history = _stream_history()[:2]
    _, state = start(Inbox, history, [2])
    assert state is not None
    body = {"schema": CURSOR_SCHEMA, "stream_name": "inbox", "through_position": 1}
    checkpoint = ev("SignalReceived", signal_name=RESERVED, arguments=payloads.envelope([body]), payload_codec="avro")
    assert resume(state, [checkpoint, _message(1, "a")]) is None
    # Cold, the checkpoint moves the cursor before the workflow starts: the recorded wait's
    # key no longer matches, a non-determinism failure the kept state must not hide.
    assert cold(Inbox, [*history, checkpoint, _message(1, "a")], [2]) is None


def test_an_open_reusing_a_sequence_falls_back() -> None:
    history = [started(), _open(1), _signal("open"), _satisfied(1)]
    _, state = start(Gate, history[:3], [2])
    assert state is not None
    reused = ev("ConditionWaitOpened", sequence=1, condition_wait_id="w1-again", condition_key="gate")
    assert resume(state, [_satisfied(1), *activity_done(2, "add", 0), reused]) is None
