"""Signals and updates land where the history records them, whatever the timing (issue 21).

The shapes of the issue (batch drain, stop flag checked first, a wait true at once before a
recorded one, signals and updates racing a running task) on hand-built histories, then the
same shapes under random timings through a model of the server (``_message_sim``), cold and
through the sticky cache: every run ends with exactly the items its messages sent, in order,
and never strands.
"""

from __future__ import annotations

import os
import random
from typing import Any, Dict, List, Tuple

import pytest

from sync_worker import payloads, workflow
from sync_worker.workflow import replay
from sync_worker.workflow.messages import ResumeContext

from ._helpers import blob, ev, result_of, started
from ._message_sim import Simulation


@workflow.defn(name="t.batch")
class BatchDrain:
    """Drains everything queued into one activity per wake-up; returns every item sent."""

    def __init__(self) -> None:
        self.queue: List[Any] = []
        self.stop = False

    @workflow.signal("push")
    def push(self, item: Any) -> None:
        self.queue.append(item)

    @workflow.signal("stop")
    def finish(self) -> None:
        self.stop = True

    @workflow.update("add")
    def add(self, item: Any) -> int:
        self.queue.append(item)
        return len(self.queue)

    def run(self, ctx: Any) -> Any:
        sent: List[Any] = []
        while True:
            yield ctx.wait_condition(lambda: bool(self.queue) or self.stop)
            if self.queue:
                batch, self.queue = self.queue, []
                sent.extend((yield ctx.schedule_activity("echo", [batch])))
            elif self.stop:
                return sent


@workflow.defn(name="t.stop_first")
class StopFirst(BatchDrain):
    """Branches on which signals arrived: the stop flag is looked at first."""

    def run(self, ctx: Any) -> Any:
        sent: List[Any] = []
        while True:
            yield ctx.wait_condition(lambda: bool(self.queue) or self.stop, key="work")
            if self.stop:
                if self.queue:
                    sent.extend((yield ctx.schedule_activity("echo", [self.queue])))
                return sent
            batch, self.queue = self.queue, []
            sent.extend((yield ctx.schedule_activity("echo", [batch])))


@workflow.defn(name="t.one_by_one")
class OneByOne(BatchDrain):
    """One activity per item, with a timer between items."""

    def run(self, ctx: Any) -> Any:
        sent: List[Any] = []
        while True:
            yield ctx.wait_condition(lambda: bool(self.queue) or self.stop)
            if not self.queue:
                return sent
            item = self.queue.pop(0)
            sent.extend((yield ctx.schedule_activity("echo", [[item]])))
            yield ctx.sleep(1)


def _sig(signal_id: str, name: str, *args: Any) -> Dict[str, Any]:
    return ev("SignalReceived", signal_name=name, signal_id=signal_id, workflow_command_id=signal_id,
              arguments=blob(list(args)), payload_codec="avro")


def _applied(signal_id: str, name: str) -> Dict[str, Any]:
    return ev("SignalApplied", signal_id=signal_id, workflow_command_id=signal_id, signal_name=name)


def _commands(cls: type, history: List[Dict[str, Any]], resume: ResumeContext) -> List[Dict[str, Any]]:
    return [command.to_wire("q") for command in replay(cls, history, [], resume=resume).commands]


def _batches(cls: type, history: List[Dict[str, Any]], resume: ResumeContext) -> List[Any]:
    """The arguments of each activity the task schedules."""
    return [payloads.decode_envelope(c["arguments"]) for c in _commands(cls, history, resume)
            if c["type"] == "schedule_activity"]


PLAIN = ResumeContext("workflow_history")


def signal_task(signal_id: str) -> ResumeContext:
    return ResumeContext("workflow_signal", signal_id)


def test_a_signal_that_arrives_while_a_task_runs_is_not_put_into_that_tasks_batch() -> None:
    """push(1) wakes T1; push(2) arrives while T1 runs; T1 schedules echo([1])."""
    opened = ev("ConditionWaitOpened", sequence=1, condition_wait_id="w1")
    t1_saw = [started(), opened, _sig("s1", "push", 1)]
    assert _batches(BatchDrain, t1_saw, signal_task("s1")) == [[[1]]]
    history = [*t1_saw, _sig("s2", "push", 2), _applied("s1", "push"),
               ev("ConditionWaitSatisfied", condition_wait_id="w1", sequence=1, workflow_signal_id="s1"),
               ev("ActivityScheduled", sequence=2, activity_type="echo")]
    # T2 carries push(2): the run is blocked on echo([1]); the handler runs, nothing new is sent
    assert _commands(BatchDrain, history, signal_task("s2")) == []
    history += [_applied("s2", "push"), ev("ActivityCompleted", sequence=2, activity_type="echo", result=blob([1]))]
    # T3 (echo done): item 2 went in at echo([1])'s step, so it is the next batch, not lost in the first
    assert _batches(BatchDrain, history, PLAIN) == [[[2]]]
    # The published SDK's rules (which read no application record) bind push(2) to the wait T1
    # passed: the first batch becomes [1, 2], its recorded result [1], and item 2 is gone (the
    # run just waits again with an empty queue).
    legacy = [event for event in history if event["event_type"] != "SignalApplied"]
    assert [c["type"] for c in [command.to_wire("q") for command in replay(BatchDrain, legacy, []).commands]] == [
        "open_condition_wait"]


def test_the_stop_flag_checked_first_never_strands_the_run() -> None:
    opened = ev("ConditionWaitOpened", sequence=1, condition_wait_id="w1", condition_key="work")
    history = [started(), opened, _sig("s1", "push", 1), _sig("s2", "stop"), _applied("s1", "push"),
               ev("ConditionWaitSatisfied", condition_wait_id="w1", sequence=1),
               ev("ActivityScheduled", sequence=2, activity_type="echo")]
    assert _commands(StopFirst, history, signal_task("s2")) == []
    history += [_applied("s2", "stop"), ev("ActivityCompleted", sequence=2, activity_type="echo", result=blob([1]))]
    assert result_of(_commands(StopFirst, history, PLAIN)) == [1]


def test_a_wait_true_at_once_does_not_take_over_a_later_recorded_wait() -> None:
    """push(1) before any task: the start task does not carry it, so the first wait opens; the
    task that carries it satisfies that wait; the second wait's open belongs to the second wait."""
    history = [started(), _sig("s1", "push", 1)]
    assert [c["type"] for c in _commands(BatchDrain, history, ResumeContext("workflow_start"))] == [
        "open_condition_wait"]
    history += [ev("ConditionWaitOpened", sequence=1, condition_wait_id="w1")]
    history += [_applied("s1", "push"), ev("ConditionWaitSatisfied", condition_wait_id="w1", sequence=1),
                ev("ActivityScheduled", sequence=2, activity_type="echo"),
                ev("ActivityCompleted", sequence=2, activity_type="echo", result=blob([1])),
                ev("ConditionWaitOpened", sequence=3, condition_wait_id="w2"),
                _sig("s2", "push", 2), _sig("s3", "stop")]
    assert _batches(BatchDrain, history, signal_task("s2")) == [[[2]]]
    history += [_applied("s2", "push"), ev("ConditionWaitSatisfied", condition_wait_id="w2", sequence=3),
                ev("ActivityScheduled", sequence=4, activity_type="echo"),
                ev("ActivityCompleted", sequence=4, activity_type="echo", result=blob([2]))]
    # stop's task: the run is blocked on echo([2]); stop lands there, so the next wait is true at once
    assert result_of(_commands(BatchDrain, history, signal_task("s3"))) == [1, 2]
    history += [_applied("s3", "stop"), ev("WorkflowCompleted")]
    assert result_of(_commands(BatchDrain, history[:-1], PLAIN)) == [1, 2]


def test_an_update_applied_while_blocked_counts_where_it_ran() -> None:
    opened = ev("ConditionWaitOpened", sequence=1, condition_wait_id="w1")
    history = [started(), opened,
               ev("UpdateAccepted", update_id="u1", update_name="add", arguments=blob([7])),
               ev("UpdateApplied", update_id="u1", update_name="add", arguments=blob([7]), sequence=2),
               ev("UpdateCompleted", update_id="u1", update_name="add", sequence=2)]
    # the wake after the update: the wait is satisfied by the update's item
    assert _batches(BatchDrain, history, PLAIN) == [[[7]]]


# -- random timings through a model of the server ------------------------------------------


def _arrivals(rng: random.Random, items: int, updates: bool) -> List[Tuple[str, str, List[Any]]]:
    out: List[Tuple[str, str, List[Any]]] = []
    for item in range(1, items + 1):
        kind = "update" if updates and rng.random() < 0.4 else "signal"
        out.append((kind, "add" if kind == "update" else "push", [item]))
    out.append(("signal", "stop", []))
    return out


SEEDS = [int(seed) for seed in os.environ.get("SW_MESSAGE_SEEDS", "").split(",") if seed] or list(range(60))


@pytest.mark.parametrize("shape", [BatchDrain, StopFirst, OneByOne], ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("sticky", [False, True], ids=["cold", "sticky"])
@pytest.mark.parametrize("updates", [False, True], ids=["signals", "signals+updates"])
def test_random_timings_deliver_every_item_exactly_once_in_order(shape: type, sticky: bool, updates: bool) -> None:
    for seed in SEEDS:
        rng = random.Random(seed)
        items = rng.randint(1, 8)
        sim = Simulation(shape, rng, sticky=sticky)
        try:
            result = sim.drive(_arrivals(rng, items, updates))
        except AssertionError as error:
            raise AssertionError(f"seed {seed} (SW_MESSAGE_SEEDS={seed}): {error}") from error
        assert result == list(range(1, items + 1)), f"seed {seed}: {result}"
        # a cold replay of the final history reaches the same result
        final = replay(shape, sim.events, [], resume=PLAIN)
        assert payloads.decode_envelope(final.commands[-1].to_wire("q")["result"]) == result, f"seed {seed}"
        # every update's handler saw the queue it was applied to (its result is the queue length)
        assert all(isinstance(value, int) and value >= 1 for value in sim.update_results.values()), sim.update_results
