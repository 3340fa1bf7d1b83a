"""Condition waits, parallel groups and message streams on sticky runs, over real sockets.

Each test runs a workflow of one of these shapes on the dev server with a sticky worker
(threads, then gevent in the second run of the suite), checks the result and the cache's
metrics (the tasks were resumed, not replayed cold), then takes the run's real history and
checks that resuming equals a cold replay at every cut of it (``tests/_sticky_equivalence``).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker import activity, payloads, workflow
from sync_worker.client import Client
from sync_worker.worker import Worker
from sync_worker.workflow import replay
from tests._sticky_equivalence import every_cut

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for


@activity.defn(name="e2e.shapes.add")
def add(total: int, step: int) -> int:
    return total + step


@activity.defn(name="e2e.shapes.tagged")
def tagged(tag: str, step: int) -> str:
    if tag == "slow" and step % 2 == 0:
        time.sleep(0.1)  # even steps: the other member of the group completes first
    return f"{tag}{step}"


@workflow.defn(name="e2e.shapes.gate")
class Gate:
    """Each step waits until an "open" signal released it, then runs an activity."""

    def __init__(self) -> None:
        self.opened = 0

    @workflow.signal("open")
    def open_gate(self) -> None:
        self.opened += 1

    @workflow.query("opened")
    def count(self) -> int:
        return self.opened

    def run(self, ctx: Any, steps: int) -> Any:
        total = 0
        for step in range(steps):
            released = yield ctx.wait_condition(lambda step=step: self.opened > step, key=f"gate-{step}",
                                                timeout=300)
            assert released
            total = yield ctx.schedule_activity("e2e.shapes.add", [total, step])
        return {"total": total, "opened": self.opened}


@workflow.defn(name="e2e.shapes.pairs")
class Pairs:
    """A parallel group per step: two activities, then (odd steps) a nested group of two more."""

    def run(self, ctx: Any, steps: int) -> Any:
        out = []
        for step in range(steps):
            group = [ctx.schedule_activity("e2e.shapes.tagged", ["slow", step]),
                     ctx.schedule_activity("e2e.shapes.tagged", ["fast", step])]
            if step % 2:
                group.append([ctx.schedule_activity("e2e.shapes.tagged", ["slow", step + 1]),
                              ctx.schedule_activity("e2e.shapes.tagged", ["inner", step])])
            out.append((yield group))
        return out


_HELD: List[int] = []
_RELEASE = threading.Semaphore(0)


@activity.defn(name="e2e.shapes.hold")
def hold(round_: int) -> int:
    """Blocks until the test releases it, so the test decides what arrives meanwhile."""
    _HELD.append(round_)
    if not _RELEASE.acquire(timeout=30):
        raise RuntimeError("the test never released the hold activity")
    return round_


@workflow.defn(name="e2e.shapes.inbox")
class Inbox:
    """Consumes a message stream in batches; signals and updates change what it keeps."""

    def __init__(self) -> None:
        self.seen: List[Any] = []
        self.notes: List[str] = []

    @workflow.signal("note")
    def note(self, text: str) -> None:
        self.notes.append(text)

    @workflow.update("mark")
    def mark(self, text: str) -> int:
        self.notes.append(f"update:{text}")
        return len(self.seen)

    def run(self, ctx: Any, rounds: int) -> Any:
        stream = ctx.message_stream("inbox")
        stored = 0
        for round_ in range(rounds):
            yield ctx.schedule_activity("e2e.shapes.hold", [round_])
            batch = yield from stream.receive(3)
            self.seen.extend(message.arguments[0] for message in batch)
            stored = yield ctx.schedule_activity("e2e.shapes.add", [stored, len(batch)])
        return {"seen": self.seen, "stored": stored, "notes": self.notes}


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


def _worker(client: Client, queue: str) -> Worker:
    return make_worker(client, task_queue=queue, workflows=[Gate, Pairs, Inbox], activities=[add, tagged, hold],
                       poll_timeout=2.0, sticky_cache_capacity=16)


def _history(client: Client, workflow_id: str) -> List[Dict[str, Any]]:
    run_id = client.describe_workflow(workflow_id).run_id or ""
    return list(client.iter_history(workflow_id, run_id))


def _stream_messages_applied(client: Client, workflow_id: str) -> int:
    return sum(event.get("event_type") == "SignalApplied"
               and (event.get("payload") or {}).get("signal_name") == "__durable_workflow_message_stream"
               for event in _history(client, workflow_id))


def _opens(client: Client, workflow_id: str) -> int:
    return sum(event.get("event_type") == "ConditionWaitOpened" for event in _history(client, workflow_id))


def _check_history(client: Client, workflow_id: str, cls: type, args: List[Any], result: Any) -> List[Any]:
    """Cold replay of the run's history gives ``result``; resuming equals cold at every cut."""
    history = [event for event in _history(client, workflow_id) if event.get("event_type") != "WorkflowCompleted"]
    commands = replay(cls, history, args, workflow_id=workflow_id).commands
    assert payloads.decode_envelope(commands[-1].to_wire("q")["result"]) == result
    done = every_cut(cls, args, history)
    assert done.resumed >= len(history) // 2, done
    return history


def test_condition_waits_released_by_signals_resume(client: Client) -> None:
    queue = unique_queue("sticky-gate")
    worker = _worker(client, queue)
    steps = 8
    handle = client.start_workflow("e2e.shapes.gate", steps, task_queue=queue)
    with RunningWorker(worker):
        for step in range(steps):
            wait_for(lambda step=step: _opens(client, handle.workflow_id) > step, timeout=30)
            client.signal_workflow(handle.workflow_id, "open")
        result = handle.result(timeout=60)
        metrics = worker.sticky_cache_metrics()
    assert result == {"total": sum(range(steps)), "opened": steps}
    # Two tasks a step (the signal, the activity) after the first: all of them resumed.
    assert metrics["hit"] >= 2 * steps - 1 and metrics["forced_cold_replay"] == 0, metrics
    history = _check_history(client, handle.workflow_id, Gate, [steps], result)
    assert sum(event["event_type"] == "ConditionWaitSatisfied" for event in history) == steps


def test_a_burst_of_signals_still_gives_the_cold_result(client: Client) -> None:
    # Signals sent at once race the tasks: some land while a task runs (a case where the
    # cache must fall back). Whatever happened, the run and every cut agree with cold replay.
    queue = unique_queue("sticky-burst")
    worker = _worker(client, queue)
    steps = 6
    handle = client.start_workflow("e2e.shapes.gate", steps, task_queue=queue)
    with RunningWorker(worker):
        wait_for(lambda: _opens(client, handle.workflow_id) > 0, timeout=30)
        for _ in range(steps):
            client.signal_workflow(handle.workflow_id, "open")
        result = handle.result(timeout=60)
        metrics = worker.sticky_cache_metrics()
    assert result == {"total": sum(range(steps)), "opened": steps}
    assert metrics["hit"] >= 1, metrics
    _check_history(client, handle.workflow_id, Gate, [steps], result)


def test_parallel_activity_groups_resume(client: Client) -> None:
    queue = unique_queue("sticky-pairs")
    worker = _worker(client, queue)
    steps = 6
    handle = client.start_workflow("e2e.shapes.pairs", steps, task_queue=queue)
    with RunningWorker(worker):
        result = handle.result(timeout=60)
        metrics = worker.sticky_cache_metrics()
    assert result == [[f"slow{step}", f"fast{step}"] + ([[f"slow{step + 1}", f"inner{step}"]] if step % 2 else [])
                      for step in range(steps)]
    assert metrics["hit"] >= steps and metrics["forced_cold_replay"] == 0, metrics
    history = _check_history(client, handle.workflow_id, Pairs, [steps], result)
    completed = [event["payload"] for event in history if event["event_type"] == "ActivityCompleted"]
    # Even steps: the second member completed first -- the group is put back in yielded order.
    assert any(payload.get("parallel_group_index") == 1 for payload in completed[::2]), completed


def test_message_streams_signals_and_updates_resume(client: Client) -> None:
    # Even rounds: three messages, a signal and an update arrive while the run waits on an
    # activity (the stream has them when the code asks: no wait). Odd rounds: the code waits on
    # the stream first, and one message releases it.
    queue = unique_queue("sticky-inbox")
    worker = _worker(client, queue)
    rounds = 4
    _HELD.clear()
    handle = client.start_workflow("e2e.shapes.inbox", rounds, task_queue=queue)
    notes: List[str] = []
    expected: List[str] = []
    with RunningWorker(worker):
        for round_ in range(rounds):
            wait_for(lambda round_=round_: len(_HELD) > round_, timeout=30)
            client.signal_workflow(handle.workflow_id, "note", args=[f"n{round_}"])
            answer = client.update_workflow(handle.workflow_id, "mark", args=[f"u{round_}"], wait_for="completed")
            assert answer["result"] == len(expected), answer
            notes += [f"n{round_}", f"update:u{round_}"]
            messages = [f"m{round_}.{index}" for index in range(3 if round_ % 2 == 0 else 1)]
            if round_ % 2 == 0:
                for index, text in enumerate(messages):
                    client.append_message_stream(handle.workflow_id, "inbox", text, message_id=f"msg-{round_}-{index}")
                # The server applies one message per workflow task: the stream has all three when
                # the code asks only once each has been applied (without this wait the code may
                # take a batch of two, a legal outcome that replays as recorded).
                applied = len(expected) + len(messages)
                wait_for(lambda applied=applied: _stream_messages_applied(client, handle.workflow_id) >= applied,
                         timeout=30)
                _RELEASE.release()
            else:
                opened = _opens(client, handle.workflow_id)
                _RELEASE.release()
                wait_for(lambda opened=opened: _opens(client, handle.workflow_id) > opened, timeout=30)
                client.append_message_stream(handle.workflow_id, "inbox", messages[0], message_id=f"msg-{round_}-0")
            expected += messages
            done = 2 * round_ + 2  # both activities of the round completed
            wait_for(lambda done=done: len(_history_of(client, handle.workflow_id, "ActivityCompleted")) >= done,
                     timeout=30)
        result = handle.result(timeout=60)
        metrics = worker.sticky_cache_metrics()
    assert result == {"seen": expected, "stored": len(expected), "notes": notes}, result
    assert metrics["hit"] >= 3 * rounds and metrics["forced_cold_replay"] == 0, metrics
    history = _check_history(client, handle.workflow_id, Inbox, [rounds], result)
    assert sum(event["event_type"] == "ConditionWaitOpened" for event in history) == rounds // 2


def _history_of(client: Client, workflow_id: str, kind: str) -> List[Dict[str, Any]]:
    return [event for event in _history(client, workflow_id) if event.get("event_type") == kind]
