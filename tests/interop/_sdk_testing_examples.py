"""Testing examples written against the published SDK's ``durable_workflow.testing``.

The scenarios are the ones the SDK documents and tests for its harness (the ``testing`` module
docstring's order workflow; its harness, failure and registration tests): what each asserts is
taken from there, the code is ours. ``test_sdk_testing_examples.py`` runs every ``example_*``
function twice: as written, on the published SDK, and with only the ``durable_workflow`` import
lines swapped to ``sync_worker``. The few differences that are facts about the package (the
module in an exception's class name) are read from the imported names, never spelled out.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from durable_workflow import serializer, workflow
from durable_workflow.errors import ActivityFailed, ChildWorkflowFailed, NonRetryableError, WorkflowFailed
from durable_workflow.testing import WorkflowEnvironment, WorkflowRunRecord, replay_history, replay_history_file
from durable_workflow.workflow import (
    ActivityRetryPolicy,
    ChildWorkflowRetryPolicy,
    CompleteWorkflow,
    ContinueAsNew,
    Replayer,
)


def _raises(kind: Any, call: Callable[[], Any], *, text: Optional[str] = None) -> BaseException:
    try:
        call()
    except kind as error:
        assert text is None or text in str(error), f"{text!r} not in {error!s}"
        return error
    raise AssertionError(f"{kind} was not raised")


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# -- the module docstring's example: an order workflow against canned activity results -----------
@workflow.defn(name="examples.order")
class OrderWorkflow:
    def run(self, ctx: Any, order_id: str, order: Dict[str, Any]) -> Any:
        charge = yield ctx.schedule_activity("charge_card", [order_id, order["amount"]])
        yield ctx.schedule_activity("send_receipt", [order_id, charge["id"]])
        return {"status": "complete", "charge_id": charge["id"]}


def example_docstring_order_workflow() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("charge_card", {"id": "ch_1"})
    env.register_activity_result("send_receipt", None)
    assert env.execute_workflow(OrderWorkflow, "order-1", {"amount": 42}) == {"status": "complete",
                                                                              "charge_id": "ch_1"}


# -- execute_workflow ---------------------------------------------------------------------------
@workflow.defn(name="examples.greeter")
class Greeter:
    def run(self, ctx: Any, name: str) -> Any:
        return (yield ctx.schedule_activity("greet", [name]))


@workflow.defn(name="examples.pipeline")
class Pipeline:
    def run(self, ctx: Any) -> Any:
        first = yield ctx.schedule_activity("first", [])
        second = yield ctx.schedule_activity("second", [first])
        third = yield ctx.schedule_activity("third", [second])
        return [first, second, third]


@workflow.defn(name="examples.boom")
class Boom:
    def run(self, ctx: Any) -> Any:
        yield ctx.schedule_activity("step", [])
        raise RuntimeError("kaboom")


@workflow.defn(name="examples.nap")
class Nap:
    def run(self, ctx: Any) -> Any:
        yield ctx.sleep(86_400)
        return (yield ctx.schedule_activity("after_nap", []))


def example_single_activity_result() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("greet", "hi there")
    assert env.execute_workflow(Greeter, "there") == "hi there"


def example_results_feed_the_next_activity() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("first", "a")
    env.register_activity("second", lambda previous: previous + "b")
    env.register_activity("third", lambda previous: previous + "c")
    assert env.execute_workflow(Pipeline) == ["a", "ab", "abc"]


def example_callable_mock_sees_the_arguments() -> None:
    seen: List[str] = []

    def greet(name: str) -> str:
        seen.append(name)
        return f"hello {name}"

    env = WorkflowEnvironment()
    env.register_activity("greet", greet)
    assert env.execute_workflow(Greeter, "bob") == "hello bob"
    assert seen == ["bob"]


def example_callable_mock_wins_over_a_canned_result() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("greet", "canned")
    env.register_activity("greet", lambda name: "called")
    assert env.execute_workflow(Greeter, "x") == "called"


def example_timers_fire_without_waiting() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("after_nap", "rested")
    started = time.monotonic()
    assert env.execute_workflow(Nap) == "rested"
    assert time.monotonic() - started < 30  # a day-long timer is not slept


def example_a_raising_workflow_raises_workflow_failed() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("step", None)
    _raises(WorkflowFailed, lambda: env.execute_workflow(Boom), text="kaboom")


def example_an_activity_without_a_mock_is_a_key_error() -> None:
    error = _raises(KeyError, lambda: WorkflowEnvironment().execute_workflow(Greeter, "x"))
    assert "greet" in str(error)


def example_iteration_limit_stops_an_endless_workflow() -> None:
    @workflow.defn(name="examples.forever")
    class Forever:
        def run(self, ctx: Any) -> Any:
            while True:
                yield ctx.schedule_activity("tick", [])

    env = WorkflowEnvironment(iteration_limit=4)
    env.register_activity_result("tick", None)
    _raises(RuntimeError, lambda: env.execute_workflow(Forever), text="did not terminate")


# -- signals --------------------------------------------------------------------------------------
@workflow.defn(name="examples.approval")
class Approval:
    def __init__(self) -> None:
        self.approver: Optional[str] = None

    @workflow.signal("approve")
    def approve(self, who: str) -> None:
        self.approver = who

    def run(self, ctx: Any) -> Any:
        yield ctx.schedule_activity("notify", [])
        return {"approver": self.approver}


def example_a_queued_signal_reaches_its_handler() -> None:
    env = WorkflowEnvironment()
    env.signal("approve", ["carol"])
    env.register_activity_result("notify", None)
    assert env.execute_workflow(Approval) == {"approver": "carol"}


def example_without_a_signal_the_state_stays() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("notify", None)
    assert env.execute_workflow(Approval) == {"approver": None}


def example_a_signal_run_number_must_be_positive() -> None:
    _raises(ValueError, lambda: WorkflowEnvironment().signal("approve", ["x"], run=0))


# -- continue-as-new chains -------------------------------------------------------------------------
@workflow.defn(name="examples.countdown")
class Countdown:
    def run(self, ctx: Any, remaining: int) -> Any:
        yield ctx.schedule_activity("emit", [remaining])
        if remaining > 0:
            return ctx.continue_as_new(remaining - 1)
        return {"done_at": remaining}


@workflow.defn(name="examples.notes")
class Notes:
    def __init__(self) -> None:
        self.notes: List[str] = []

    @workflow.signal("note")
    def note(self, text: str) -> None:
        self.notes.append(text)

    def run(self, ctx: Any, remaining: int) -> Any:
        yield ctx.schedule_activity("wait", [remaining])
        if remaining > 0:
            return ctx.continue_as_new(remaining - 1)
        return {"remaining": remaining, "notes": list(self.notes)}


@workflow.defn(name="examples.timer-chain")
class TimerChain:
    def run(self, ctx: Any, remaining: int) -> Any:
        yield ctx.sleep(60)
        if remaining > 0:
            return ctx.continue_as_new(remaining - 1)
        return "finished"


@workflow.defn(name="examples.side-effect-chain")
class SideEffectChain:
    def run(self, ctx: Any, remaining: int) -> Any:
        value = yield ctx.side_effect(lambda: f"value-{remaining}")
        yield ctx.upsert_search_attributes({"remaining": remaining})
        if remaining > 0:
            return ctx.continue_as_new(remaining - 1)
        return value


@workflow.defn(name="examples.stage-one")
class StageOne:
    def run(self, ctx: Any) -> Any:
        yield ctx.schedule_activity("one", [])
        return ctx.continue_as_new(workflow_type="examples.stage-two")


@workflow.defn(name="examples.stage-two")
class StageTwo:
    def run(self, ctx: Any) -> Any:
        return {"stage": 2, "got": (yield ctx.schedule_activity("two", []))}


def example_a_chain_returns_the_last_result() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("emit", None)
    assert env.execute_workflow(Countdown, 3) == {"done_at": 0}
    assert env.run_count == 4


def example_each_link_is_recorded() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("emit", None)
    env.execute_workflow(Countdown, 2)
    runs = env.runs
    assert all(isinstance(run, WorkflowRunRecord) for run in runs)
    assert [run.input for run in runs] == [[2], [1], [0]]
    assert {run.workflow_type for run in runs} == {"examples.countdown"}
    assert isinstance(runs[0].terminal, ContinueAsNew) and runs[0].terminal.arguments == [1]
    assert isinstance(runs[1].terminal, ContinueAsNew)
    assert isinstance(runs[2].terminal, CompleteWorkflow) and runs[2].terminal.result == {"done_at": 0}


def example_a_continued_run_ends_with_its_continue_event() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("emit", None)
    env.execute_workflow(Countdown, 1)
    kinds = [event["event_type"] for event in env.runs[0].history]
    assert "ActivityCompleted" in kinds
    assert kinds[-1] == "WorkflowContinuedAsNew"
    last = env.runs[0].history[-1]["payload"]
    assert last["payload_codec"] == "avro" and "arguments" in last


def example_the_link_limit_stops_a_chain() -> None:
    env = WorkflowEnvironment(continue_as_new_limit=3)
    env.register_activity_result("emit", None)
    _raises(RuntimeError, lambda: env.execute_workflow(Countdown, 50), text="continue-as-new past the 3")


def example_a_signal_can_target_one_link() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("wait", None)
    env.signal("note", ["to the first"], run=1)
    env.signal("note", ["to the third"], run=3)
    assert env.execute_workflow(Notes, 2) == {"remaining": 0, "notes": ["to the third"]}
    signalled = [[event for event in run.history if event["event_type"] == "SignalReceived"] for run in env.runs]
    assert [len(events) for events in signalled] == [1, 0, 1]
    assert signalled[0][0]["payload"]["signal_name"] == "note"


def example_timers_fire_in_every_link() -> None:
    env = WorkflowEnvironment()
    assert env.execute_workflow(TimerChain, 2) == "finished"
    assert env.run_count == 3
    for run in env.runs[:-1]:
        assert any(event["event_type"] == "TimerFired" for event in run.history)


def example_side_effects_and_search_attributes_in_every_link() -> None:
    env = WorkflowEnvironment()
    assert env.execute_workflow(SideEffectChain, 2) == "value-0"
    for run in env.runs:
        kinds = [event["event_type"] for event in run.history]
        assert "SideEffectRecorded" in kinds and "SearchAttributesUpserted" in kinds


def example_a_chain_can_switch_workflow_type() -> None:
    env = WorkflowEnvironment()
    env.register_workflow(StageTwo)
    env.register_activity_result("one", None)
    env.register_activity_result("two", "second stage")
    assert env.execute_workflow(StageOne) == {"stage": 2, "got": "second stage"}
    assert [run.workflow_type for run in env.runs] == ["examples.stage-one", "examples.stage-two"]


def example_an_unregistered_next_type_is_a_key_error() -> None:
    @workflow.defn(name="examples.to-nowhere")
    class ToNowhere:
        def run(self, ctx: Any) -> Any:
            return ctx.continue_as_new(workflow_type="examples.never-registered")

    _raises(KeyError, lambda: WorkflowEnvironment().execute_workflow(ToNowhere), text="examples.never-registered")


def example_runs_reset_on_each_execution() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("emit", None)
    env.execute_workflow(Countdown, 2)
    env.execute_workflow(Countdown, 0)
    assert env.run_count == 1


# -- mocks that fail, and retry policies ----------------------------------------------------------------
@workflow.defn(name="examples.guarded")
class Guarded:
    def run(self, ctx: Any, kind: str, policy: Any) -> Any:
        try:
            if kind == "activity":
                return (yield ctx.schedule_activity("operation", ["input"], retry_policy=policy))
            return (yield ctx.start_child_workflow("operation", ["input"], retry_policy=policy))
        except ActivityFailed as error:
            return {"caught": "activity", "message": str(error), "type": error.exception_type,
                    "class": error.exception_class, "non_retryable": error.non_retryable}
        except ChildWorkflowFailed as error:
            return {"caught": "child", "message": str(error), "class": error.exception_class}


def _mock(env: WorkflowEnvironment, kind: str, fn: Callable[..., Any]) -> None:
    if kind == "activity":
        env.register_activity("operation", fn)
    else:
        env.register_child_workflow("operation", fn)


def _declines(_value: str) -> None:
    raise ValueError("declined")


def example_a_mock_failure_reaches_the_yield() -> None:
    for kind in ("activity", "child_workflow"):
        env = WorkflowEnvironment()
        _mock(env, kind, _declines)
        result = env.execute_workflow(Guarded, kind, None)
        assert result["caught"] == ("activity" if kind == "activity" else "child")
        assert result["message"] == "declined" and result["class"] == "builtins.ValueError"
        if kind == "activity":
            assert result["type"] == "ValueError" and result["non_retryable"] is False
        call = env.mock_calls[0]
        assert (call.kind, call.name, call.attempt_count, call.status) == (kind, "operation", 1, "failed")


def _succeeds_on_the_third_attempt(kind: str, typed: bool) -> None:
    calls: List[str] = []

    def flaky(value: str) -> str:
        calls.append(value)
        if len(calls) < 3:
            raise ValueError("not yet")
        return "finally"

    policy: Any = {"max_attempts": 3, "backoff_seconds": [500, 1000]}
    if typed:
        policy_cls = ActivityRetryPolicy if kind == "activity" else ChildWorkflowRetryPolicy
        policy = policy_cls(max_attempts=3, backoff_seconds=[500, 1000])
    env = WorkflowEnvironment()
    _mock(env, kind, flaky)
    assert env.execute_workflow(Guarded, kind, policy) == "finally"
    assert calls == ["input"] * 3
    assert (env.mock_calls[0].attempt_count, env.mock_calls[0].status) == (3, "completed")
    assert len(env.runs[0].history) == 1  # only the outcome, no event per attempt


def example_retries_until_the_mock_succeeds() -> None:
    for kind in ("activity", "child_workflow"):
        for typed in (False, True):
            _succeeds_on_the_third_attempt(kind, typed)


def example_an_exhausted_policy_delivers_the_last_failure() -> None:
    for kind in ("activity", "child_workflow"):
        attempts: List[int] = []

        def failing(value: str, attempts: List[int] = attempts) -> None:
            attempts.append(1)
            raise ValueError(f"attempt {len(attempts)} of {value}")

        env = WorkflowEnvironment()
        _mock(env, kind, failing)
        result = env.execute_workflow(Guarded, kind, {"max_attempts": 3})
        assert result["message"] == "attempt 3 of input" and len(attempts) == 3
        outcome = "ActivityFailed" if kind == "activity" else "ChildRunFailed"
        assert [event["event_type"] for event in env.runs[0].history] == [outcome]
        if kind == "child_workflow":
            assert "non_retryable" not in env.runs[0].history[0]["payload"]


def example_non_retryable_types_stop_retries() -> None:
    for kind in ("activity", "child_workflow"):
        for name in ("ValueError", "builtins.ValueError"):
            env = WorkflowEnvironment()
            _mock(env, kind, _declines)
            result = env.execute_workflow(Guarded, kind, {"max_attempts": 4, "non_retryable_error_types": [name]})
            assert result["message"] == "declined" and env.mock_calls[0].attempt_count == 1


def example_non_retryable_error_from_an_activity() -> None:
    def permanent(_value: str) -> None:
        raise NonRetryableError("gone for good", cause=ValueError("why"))

    env = WorkflowEnvironment()
    env.register_activity("operation", permanent)
    assert env.execute_workflow(Guarded, "activity", {"max_attempts": 5}) == {
        "caught": "activity", "message": "gone for good", "type": "NonRetryableError",
        "class": _class_name(NonRetryableError), "non_retryable": True}
    assert env.mock_calls[0].attempt_count == 1


def example_non_retryable_error_from_a_child_is_still_retried() -> None:
    def child_body(_value: str) -> None:
        raise NonRetryableError("a child raised the activity marker")

    env = WorkflowEnvironment()
    env.register_child_workflow("operation", child_body)
    result = env.execute_workflow(Guarded, "child_workflow", {"max_attempts": 2})
    assert result["class"] == _class_name(NonRetryableError)
    assert env.mock_calls[0].attempt_count == 2


def example_the_attempt_cap_is_a_harness_error() -> None:
    for kind in ("activity", "child_workflow"):
        env = WorkflowEnvironment(mock_attempt_limit=3)
        _mock(env, kind, _declines)
        started = time.monotonic()
        huge = ActivityRetryPolicy(max_attempts=10**9)
        error = _raises(RuntimeError, lambda env=env, kind=kind, huge=huge: env.execute_workflow(Guarded, kind, huge),
                        text="mock attempt limit 3")
        assert time.monotonic() - started < 30  # a huge budget is neither expanded nor slept
        assert isinstance(error.__cause__, ValueError)
        assert (env.mock_calls[0].attempt_count, env.mock_calls[0].status) == (3, "attempt_limit_exceeded")
        assert env.runs[0].history == []


def example_the_attempt_cap_must_be_a_positive_int() -> None:
    for limit in (True, False, 0, -1, 1.5, "3", None):
        _raises(ValueError, lambda limit=limit: WorkflowEnvironment(mock_attempt_limit=limit),
                text="mock_attempt_limit")


def example_back_off_is_never_slept() -> None:
    env = WorkflowEnvironment()
    env.register_activity("operation", _declines)
    started = time.monotonic()
    env.execute_workflow(Guarded, "activity", {"max_attempts": 3, "backoff_seconds": [10**9]})
    assert time.monotonic() - started < 30
    assert env.mock_calls[0].attempt_count == 3


@workflow.defn(name="examples.compensation")
class Compensation:
    def run(self, ctx: Any) -> Any:
        yield ctx.schedule_activity("reserve", [])
        try:
            yield ctx.schedule_activity("charge", [], retry_policy={"max_attempts": 2})
        except ActivityFailed:
            yield ctx.schedule_activity("release", [])
            return "released"
        return "charged"


def example_replays_do_not_call_a_mock_again() -> None:
    calls: List[str] = []

    def decline() -> None:
        calls.append("charge")
        raise ValueError("declined")

    env = WorkflowEnvironment()
    env.register_activity_result("reserve", None)
    env.register_activity("charge", decline)
    env.register_activity_result("release", None)
    assert env.execute_workflow(Compensation) == "released"
    assert calls == ["charge", "charge"]
    assert [(call.name, call.attempt_count) for call in env.mock_calls] == [("reserve", 1), ("charge", 2),
                                                                            ("release", 1)]


def example_a_missing_mock_is_not_a_call() -> None:
    for kind in ("activity", "child_workflow"):
        env = WorkflowEnvironment()
        _raises(KeyError, lambda env=env, kind=kind: env.execute_workflow(Guarded, kind, {"max_attempts": 3}),
                text="no mock registered")
        assert env.mock_calls == []


def example_an_async_mock_is_refused_without_a_warning() -> None:
    async def async_mock(_value: str) -> str:
        return "never"

    env = WorkflowEnvironment()
    env.register_activity("operation", async_mock)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _raises(TypeError, lambda: env.execute_workflow(Guarded, "activity", {"max_attempts": 3}),
                text="synchronous")
        import gc

        gc.collect()
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]


def example_a_base_exception_is_not_retried() -> None:
    def interrupt(_value: str) -> None:
        raise KeyboardInterrupt()

    env = WorkflowEnvironment()
    env.register_activity("operation", interrupt)
    _raises(KeyboardInterrupt, lambda: env.execute_workflow(Guarded, "activity", {"max_attempts": 3}))
    assert env.mock_calls[0].attempt_count == 1


def example_an_uncaught_mock_failure_fails_the_workflow() -> None:
    env = WorkflowEnvironment()
    env.register_activity("greet", _declines)
    _raises(WorkflowFailed, lambda: env.execute_workflow(Greeter, "x"), text="declined")


def example_mock_calls_reset_between_executions() -> None:
    env = WorkflowEnvironment()
    env.register_activity_result("operation", "done")
    assert env.execute_workflow(Guarded, "activity", None) == "done"
    assert env.execute_workflow(Guarded, "activity", None) == "done"
    assert len(env.mock_calls) == 1 and env.mock_calls[0].run_number == 1


def example_a_later_child_registration_replaces_the_earlier() -> None:
    env = WorkflowEnvironment()
    env.register_child_workflow("operation", _declines)
    env.register_child_workflow_result("operation", "canned")
    assert env.execute_workflow(Guarded, "child_workflow", None) == "canned"
    env.register_child_workflow("operation", lambda value: "called with " + value)
    assert env.execute_workflow(Guarded, "child_workflow", None) == "called with input"


def example_an_invalid_retry_budget_is_refused_before_any_call() -> None:
    for maximum in (True, 0, -1, 1.5, "3", None):
        calls: List[str] = []
        env = WorkflowEnvironment()
        env.register_activity("operation", calls.append)
        budget = {"max_attempts": maximum}
        _raises(ValueError, lambda env=env, budget=budget: env.execute_workflow(Guarded, "activity", budget),
                text="max_attempts")
        assert calls == []


def example_the_attempt_cap_counts_per_call_across_links() -> None:
    @workflow.defn(name="examples.retry-per-link")
    class RetryPerLink:
        def run(self, ctx: Any, count: int) -> Any:
            yield ctx.schedule_activity("step", [count], retry_policy={"max_attempts": 2})
            if count:
                return ctx.continue_as_new(count - 1)
            return "done"

    attempts: Dict[int, int] = {}

    def first_attempt_fails(count: int) -> None:
        attempts[count] = attempts.get(count, 0) + 1
        if attempts[count] == 1:
            raise ValueError("first attempt")

    env = WorkflowEnvironment(mock_attempt_limit=2)
    env.register_activity("step", first_attempt_fails)
    assert env.execute_workflow(RetryPerLink, 1) == "done"
    assert [(call.run_number, call.attempt_count) for call in env.mock_calls] == [(1, 2), (2, 2)]
    assert attempts == {1: 2, 0: 2}


# -- registration ----------------------------------------------------------------------------------------
def example_two_classes_under_one_name_are_refused() -> None:
    first = workflow.defn(name="examples.shared")(type("FirstShared", (), {"run": lambda self, ctx: 1}))
    second = workflow.defn(name="examples.shared")(type("SecondShared", (), {"run": lambda self, ctx: 1}))
    env = WorkflowEnvironment()
    env.register_workflow(first)
    error = _raises(ValueError, lambda: env.register_workflow(second))
    assert error.registration_kind == "workflow" and error.wire_name == "examples.shared"  # type: ignore[attr-defined]
    assert "FirstShared" in str(error) and "SecondShared" in str(error)
    replayer_error = _raises(ValueError, lambda: Replayer(workflows=[first, second]))
    assert "FirstShared" in str(replayer_error) and "SecondShared" in str(replayer_error)


def example_an_undecorated_class_is_a_type_error() -> None:
    class Plain:
        def run(self, ctx: Any) -> Any:
            return 1

    _raises(TypeError, lambda: WorkflowEnvironment().register_workflow(Plain))


def example_an_async_entrypoint_is_refused() -> None:
    async def coroutine_run(self: Any, ctx: Any) -> str:
        return "never"

    @workflow.defn(name="examples.changed-entrypoint")
    class Changed:
        def run(self, ctx: Any) -> Any:
            return "done"

    Changed.run = coroutine_run  # type: ignore[assignment,method-assign]
    _raises(ValueError, lambda: WorkflowEnvironment().register_workflow(Changed),
            text="unsupported_workflow_entrypoint")


def example_plain_and_generator_workflows_both_complete() -> None:
    @workflow.defn(name="examples.plain")
    class Plain:
        def run(self, ctx: Any) -> Any:
            return "done"

    @workflow.defn(name="examples.generator")
    class Generator:
        def run(self, ctx: Any) -> Any:
            if False:
                yield None
            return "done"

    env = WorkflowEnvironment()
    assert env.execute_workflow(Plain) == "done" and env.execute_workflow(Generator) == "done"
    assert Replayer(workflows=[Plain]).replay([], [], workflow_type="examples.plain").commands[0].result == "done"


# -- replaying recorded histories ------------------------------------------------------------------------
def _completed(value: Any) -> Dict[str, Any]:
    return {"event_type": "ActivityCompleted", "payload": {"result": serializer.envelope(value)}}


def example_replay_history_takes_an_event_list() -> None:
    outcome = replay_history(Greeter, [_completed("from history")], ["x"], payload_codec="avro")
    assert len(outcome.commands) == 1
    assert isinstance(outcome.commands[0], CompleteWorkflow) and outcome.commands[0].result == "from history"


def example_replay_history_file_reads_a_list(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_text(json.dumps([_completed("from a file")]))
    outcome = replay_history_file(Greeter, path, ["x"], payload_codec="avro")
    assert isinstance(outcome.commands[0], CompleteWorkflow) and outcome.commands[0].result == "from a file"


def example_replay_history_file_reads_an_events_object(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"events": [_completed("wrapped")]}))
    outcome = replay_history_file(Greeter, path, ["x"], payload_codec="avro")
    assert isinstance(outcome.commands[0], CompleteWorkflow) and outcome.commands[0].result == "wrapped"


def example_a_replayer_reads_type_and_input_from_the_history() -> None:
    started = {"event_type": "WorkflowStarted",
               "payload": {"workflow_type": "examples.greeter", "arguments": serializer.envelope(["ada"]),
                           "timestamp": "2026-01-01T00:00:00.000000Z"}}
    outcome = Replayer(workflows=[Greeter, Pipeline]).replay([started, _completed("hello ada")], payload_codec="avro")
    assert outcome.commands[0].result == "hello ada"


EXAMPLES = {name: fn for name, fn in sorted(globals().items()) if name.startswith("example_") and callable(fn)}
