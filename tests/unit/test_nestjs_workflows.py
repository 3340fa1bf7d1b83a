"""The pure nestjs-durable workflow core: a turn (task with history) in, a wire decision out.

A small model of the engine (``Engine`` below: it applies a decision's commands the way
``WorkflowEngine.applyCommands`` / ``remoteHistory`` do in core 0.62.0 and builds the next turn's
history) drives workflows to the end, so replay is checked over every turn, in random shapes.
"""

from __future__ import annotations

import json
import random
from typing import Any, Callable, Dict, List, Optional

import pytest

from sync_worker.errors import InvalidWorkflowDefinition
from sync_worker.nestjs import NondeterminismError, StepFailed, WorkflowContext, WorkflowWorker
from sync_worker.nestjs.bounds import encode_decision
from sync_worker.nestjs.descriptor import build_descriptor, descriptor_hash
from sync_worker.nestjs.workflows import is_workflow_task


def turn(workflow: str, history: Optional[List[Dict[str, Any]]] = None, data: Any = None,
         **extra: Any) -> Dict[str, Any]:
    return {"taskId": "run-1:wf:0001", "runId": "run-1", "workflow": workflow, "workflowVersion": "1",
            "input": data, "history": history or [], "group": "py-workflows", "attempt": 1, **extra}


class Engine:
    """Applies decisions as the engine does and answers the commands it dispatched."""

    def __init__(self, worker: WorkflowWorker, workflow: str, data: Any = None,
                 steps: Optional[Callable[[str, Any], Any]] = None) -> None:
        self.worker, self.workflow, self.data = worker, workflow, data
        self.steps = steps or (lambda name, value: {"step": name, "input": value})
        self.history: Dict[int, Dict[str, Any]] = {}
        self.decisions: List[Dict[str, Any]] = []

    def run(self, max_turns: int = 50) -> Dict[str, Any]:
        for n in range(max_turns):
            history = [self.history[seq] for seq in sorted(self.history)]
            decision = self.worker.process_task(dict(turn(self.workflow, history, self.data), taskId=f"t{n}"))
            json.loads(encode_decision(decision))  # always JSON
            self.decisions.append(decision)
            for command in decision["commands"]:
                self.apply(command)
            if decision["status"] != "continue":
                return decision
        raise AssertionError("the workflow did not finish")

    def apply(self, command: Dict[str, Any]) -> None:
        seq, kind = command["seq"], command["kind"]
        if kind == "recordStep":
            entry = {"seq": seq, "kind": "step", "name": command["name"]}
            entry.update({"error": command["error"]} if "error" in command else {"output": command["output"]})
            self.history[seq] = entry
        elif kind == "call" and seq not in self.history:
            try:
                self.history[seq] = {"seq": seq, "kind": "call", "name": command["name"],
                                     "output": self.steps(command["name"], command["input"])}
            except StepFailed as failure:
                self.history[seq] = {"seq": seq, "kind": "call", "name": command["name"], "error": failure.error}
        elif kind == "sleep":
            self.history[seq] = {"seq": seq, "kind": "timer", "name": f"sleep:{seq}"}
        elif kind == "waitSignal":
            self.history[seq] = {"seq": seq, "kind": "signal", "output": {"signal": command["signal"]}}
        elif kind == "startChild":
            self.history[seq] = {"seq": seq, "kind": "child", "output": {"child": command["workflow"]}}


def test_a_first_turn_records_now_and_dispatches_the_step() -> None:
    workflows = WorkflowWorker(group="py-workflows")

    @workflows.workflow("pipeline")
    def pipeline(ctx: WorkflowContext, base_id: str) -> Any:
        started = ctx.now()
        rows = ctx.step("ingestion", {"key": f"/{base_id}/data.csv"})
        return {"rows": rows, "startedAt": started}

    decision = workflows.process_task(turn("pipeline", data="b1"))
    assert decision["taskId"] == "run-1:wf:0001" and decision["runId"] == "run-1"
    assert decision["status"] == "continue"
    record, call = decision["commands"]
    assert record["kind"] == "recordStep" and record["seq"] == 0 and record["name"] == "now#0"
    assert isinstance(record["output"], int) and record["startedAt"] <= record["finishedAt"]
    assert call == {"kind": "call", "seq": 1, "name": "ingestion", "group": "default",
                    "input": {"key": "/b1/data.csv"}}
    history = [{"seq": 0, "kind": "step", "name": "now#0", "output": 1234},
               {"seq": 1, "kind": "call", "name": "ingestion", "output": 7}]
    assert workflows.process_task(turn("pipeline", history, "b1")) == {
        "taskId": "run-1:wf:0001", "runId": "run-1", "status": "completed", "commands": [],
        "output": {"rows": 7, "startedAt": 1234}}


def test_the_step_partition_is_the_call_s_then_the_worker_s() -> None:
    workflows = WorkflowWorker(group="py-workflows", partition="eu")

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        ctx.step("a", None, group="us")
        ctx.step("b")

    first = workflows.process_task(turn("wf"))["commands"][0]
    assert first["group"] == "us"
    second = workflows.process_task(turn("wf", [{"seq": 0, "kind": "call", "name": "a", "output": 1}]))
    assert second["commands"][0]["group"] == "eu"


def test_side_effect_runs_once_over_every_turn() -> None:
    workflows = WorkflowWorker()
    calls: List[int] = []

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        token = ctx.side_effect(lambda: calls.append(1) or f"token-{len(calls)}")
        ctx.sleep(10)
        ctx.step("x")
        return token

    engine = Engine(workflows, "wf")
    decision = engine.run()
    assert decision["status"] == "completed" and decision["output"] == "token-1"
    assert len(engine.decisions) == 3 and calls == [1]


def test_a_failing_side_effect_is_recorded_and_raises_step_failed_on_replay_too() -> None:
    workflows = WorkflowWorker()
    calls: List[int] = []

    def boom() -> None:
        calls.append(1)
        raise ValueError("no entropy")

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        try:
            ctx.side_effect(boom)
        except StepFailed as failure:
            ctx.sleep(1)
            return failure.message

    engine = Engine(workflows, "wf")
    assert engine.run()["output"] == "no entropy"
    assert calls == [1]
    assert engine.history[0]["error"]["message"] == "no entropy"


def test_a_failed_step_raises_step_failed_with_the_engine_s_error() -> None:
    workflows = WorkflowWorker()

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        try:
            ctx.step("pay", {"amount": 5})
        except StepFailed as failure:
            return {"message": failure.message, "code": failure.code, "details": failure.details}

    error = {"message": "card declined", "code": "card_declined", "retryable": False, "details": {"amount": 5}}
    decision = workflows.process_task(turn("wf", [{"seq": 0, "kind": "call", "name": "pay", "error": error}]))
    assert decision["output"] == {"message": "card declined", "code": "card_declined", "details": {"amount": 5}}


def test_an_uncaught_step_failure_fails_the_run_with_that_error() -> None:
    workflows = WorkflowWorker()

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        return ctx.step("pay")

    error = {"message": "card declined", "code": "card_declined", "retryable": False}
    decision = workflows.process_task(turn("wf", [{"seq": 0, "kind": "call", "name": "pay", "error": error}]))
    assert decision["status"] == "failed" and decision["error"] == error


def test_suspension_is_not_swallowed_by_except_exception() -> None:
    workflows = WorkflowWorker()

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        try:
            ctx.step("slow")
        except Exception:  # a broad handler in workflow code must not eat the suspension
            return "swallowed"
        return "done"

    assert workflows.process_task(turn("wf"))["status"] == "continue"


@pytest.mark.parametrize("entry", [
    {"seq": 0, "kind": "timer", "name": "sleep:0"},  # another kind at seq 0
    {"seq": 0, "kind": "call", "name": "refund", "output": 1},  # another step at seq 0
])
def test_a_changed_workflow_fails_as_non_determinism(entry: Dict[str, Any]) -> None:
    workflows = WorkflowWorker()

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        try:
            return ctx.step("charge")
        except NondeterminismError:  # even caught, the turn fails the run
            return "hidden"

    decision = workflows.process_task(turn("wf", [entry]))
    assert decision["status"] == "failed" and decision["commands"] == []
    assert decision["error"]["code"] == "non_determinism" and "seq 0" in decision["error"]["message"]


def test_history_the_code_never_reaches_is_non_determinism() -> None:
    workflows = WorkflowWorker()

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        return ctx.step("a")  # version 1 also slept afterwards

    history = [{"seq": 0, "kind": "call", "name": "a", "output": 1}, {"seq": 1, "kind": "timer", "name": "sleep:1"}]
    decision = workflows.process_task(turn("wf", history))
    assert decision["status"] == "failed" and decision["error"]["code"] == "non_determinism"


def test_signal_child_and_sleep_commands() -> None:
    workflows = WorkflowWorker()

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        ctx.sleep(500)
        approved = ctx.wait_signal("approve")
        child = ctx.start_child("child", {"n": 1})
        return [approved, child]

    assert workflows.process_task(turn("wf"))["commands"] == [{"kind": "sleep", "seq": 0, "ms": 500}]
    history = [{"seq": 0, "kind": "timer", "name": "sleep:0"}]
    assert workflows.process_task(turn("wf", history))["commands"] == [{"kind": "waitSignal", "seq": 1,
                                                                        "signal": "approve"}]
    pending = workflows.process_task(turn("wf", history, pendingSignals=[{"seq": 1, "signal": "approve",
                                                                          "payload": "yes"}]))
    assert pending["commands"] == [{"kind": "startChild", "seq": 2, "workflow": "child", "input": {"n": 1}}]
    history += [{"seq": 1, "kind": "signal", "output": "yes"}, {"seq": 2, "kind": "child", "output": 2}]
    assert workflows.process_task(turn("wf", history))["output"] == ["yes", 2]
    failed_child = [*history[:2], {"seq": 2, "kind": "child", "error": {"message": "child broke"}}]
    assert workflows.process_task(turn("wf", failed_child))["error"] == {"message": "child broke"}


def test_a_cancelled_run_ends_the_turn_at_the_next_operation() -> None:
    workflows = WorkflowWorker()

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        ctx.now()
        ctx.step("x")

    decision = workflows.process_task(turn("wf"), is_cancelled=lambda run_id: run_id == "run-1")
    assert decision == {"taskId": "run-1:wf:0001", "runId": "run-1", "status": "cancelled", "commands": []}


def test_bad_input_never_raises() -> None:
    workflows = WorkflowWorker()

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        ctx.sleep(-1)

    unknown = workflows.process_task(turn("nope"))
    assert unknown["status"] == "failed" and unknown["error"]["code"] == "no_workflow"
    bad = workflows.process_task(turn("wf"))
    assert bad["status"] == "failed" and "non-negative" in bad["error"]["message"] and "stack" in bad["error"]


def test_an_output_json_cannot_carry_fails_the_run_clearly() -> None:
    workflows = WorkflowWorker()

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        return {1, 2}

    body = json.loads(encode_decision(workflows.process_task(turn("wf"))))
    assert body["status"] == "failed" and body["error"]["code"] == "unserializable_output"


def test_registration_refuses_async_and_generator_functions() -> None:
    workflows = WorkflowWorker()

    async def coro(ctx: Any) -> None:
        return None

    def gen(ctx: Any) -> Any:
        yield 1

    for fn in (coro, gen):
        with pytest.raises(InvalidWorkflowDefinition):
            workflows.register("x", fn)
    with pytest.raises(InvalidWorkflowDefinition):
        WorkflowWorker(group=" ")


def test_is_workflow_task_tells_turns_from_steps() -> None:
    assert is_workflow_task(turn("wf"))
    assert not is_workflow_task({"runId": "r", "seq": 0, "name": "x", "stepId": "r:0"})


def test_the_descriptor_announces_registrations_and_hashes_them_as_the_published_worker() -> None:
    workflows = WorkflowWorker(group="py-workflows")
    workflows.register("b", lambda ctx: None)
    workflows.register("a", lambda ctx: None, version="2")
    assert workflows.registrations() == [{"name": "a", "version": "2", "group": "py-workflows"},
                                         {"name": "b", "group": "py-workflows"}]
    descriptor = build_descriptor(instance_id="py-h-1", steps=["s"], sdk_version="0.1.0", started_at_ms=1700000000000,
                                  workflows=workflows.names, registrations=workflows.registrations())
    descriptor["capabilities"] = ["saga", "signals"]
    assert descriptor["workflows"] == ["a", "b"]
    # Golden values from durable_worker.handshake.descriptor_hash (0.26.1) of the same descriptor.
    assert descriptor_hash(descriptor) == "fa74ba2dcae5102e"
    descriptor.pop("registrations")
    assert descriptor_hash(descriptor) == "b55254780dd1dedc"


@pytest.mark.parametrize("seed", range(40))
def test_random_workflows_replay_to_the_same_end(seed: int) -> None:
    """Random operation sequences, each turn replayed from the top: every captured value, side
    effect call and step outcome is the first turn's; nothing runs twice."""
    rng = random.Random(seed)
    ops = [rng.choice(["step", "now", "side", "sleep", "signal", "child", "fail"]) for _ in range(rng.randint(1, 12))]
    side_calls: List[int] = []
    workflows = WorkflowWorker()

    @workflows.workflow("wf")
    def wf(ctx: WorkflowContext) -> Any:
        out: List[Any] = []
        for i, op in enumerate(ops):
            if op == "step":
                out.append(ctx.step(f"s{i}", i))
            elif op == "now":
                out.append(ctx.now())
            elif op == "side":
                out.append(ctx.side_effect(lambda: side_calls.append(1) or len(side_calls)))
            elif op == "sleep":
                ctx.sleep(i * 10)
            elif op == "signal":
                out.append(ctx.wait_signal(f"sig{i}"))
            elif op == "child":
                out.append(ctx.start_child(f"c{i}", i))
            else:
                try:
                    ctx.step(f"fail{i}")
                except StepFailed as failure:
                    out.append(failure.message)
        return out

    def steps(name: str, value: Any) -> Any:
        if name.startswith("fail"):
            raise StepFailed({"message": f"{name} failed"})
        return {"step": name, "input": value}

    engine = Engine(workflows, "wf", steps=steps)
    decision = engine.run()
    assert decision["status"] == "completed", decision
    assert len(side_calls) == ops.count("side")
    # A cold replay of the full history reaches the same output and runs nothing again.
    history = [engine.history[seq] for seq in sorted(engine.history)]
    again = workflows.process_task(turn("wf", history))
    assert again["status"] == "completed" and again["commands"] == [] and again["output"] == decision["output"]
    assert len(side_calls) == ops.count("side")
