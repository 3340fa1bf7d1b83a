"""Local activities: the authoring checks, the replay rules and the worker's runner (no HTTP).

The runner is driven with a stub lease (``_Lease``) standing in for the workflow-task heartbeat
route; the same runner against the real dev server over sockets is in
``tests/e2e/test_local_activities.py`` and against the published SDK in
``tests/interop/test_authoring_local.py``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import pytest

from sync_worker import payloads, workflow
from sync_worker.errors import (
    ActivityFailed,
    FailureReportTooLarge,
    LocalActivityExecutionAborted,
    NonDeterministicReplayError,
    NonRetryableError,
)
from sync_worker.failure_reports import ObservedText, bound_request
from sync_worker.worker.local_activities import TaskLocalActivities, WorkflowTaskLeaseLost
from sync_worker.workflow import RecordLocalActivity, WorkflowContext, replay
from tests.unit.workflow._helpers import activity_done, ev, result_of, started, wire


class _Lease:
    """The workflow-task heartbeat route: counts renewals, refuses after ``refuse_after``."""

    def __init__(self, refuse_after: Optional[int] = None, limit: int = 1_048_576) -> None:
        self.renewals = 0
        self.refuse_after = refuse_after
        self.limit = limit

    def heartbeat_workflow_task(self, task_id: str, *, lease_owner: str, workflow_task_attempt: int,
                                cancel: Any = None) -> Dict[str, Any]:
        self.renewals += 1
        if self.refuse_after is not None and self.renewals > self.refuse_after:
            raise RuntimeError("lease_expired")
        return {"task_id": task_id, "lease_owner": lease_owner, "workflow_task_attempt": workflow_task_attempt,
                "renewed": True}

    def failure_report_limit(self) -> int:
        return self.limit


def _runner(activities: Dict[str, Any], lease: Optional[_Lease] = None, **kwargs: Any) -> TaskLocalActivities:
    return TaskLocalActivities(client=lease or _Lease(), task={"task_id": "wt-1", "workflow_task_attempt": 1,
                                                              "workflow_id": "wf", "run_id": "run"},
                               activities=activities, worker_id="w", task_queue="q", **kwargs)


@workflow.defn(name="unit.local.one")
class One:
    def run(self, ctx: Any, value: int) -> Any:
        try:
            got = yield ctx.local_activity("double", [value], retry_policy={"max_attempts": 2})
        except ActivityFailed as error:
            return {"failed": str(error)}
        return {"got": got}


# -- authoring --------------------------------------------------------------------------------


def test_the_sdk_checks_when_the_call_is_built() -> None:
    ctx = WorkflowContext(run_id="r")
    with pytest.raises(ValueError, match="abandon is not supported"):
        ctx.local_activity("a", [], cancellation_policy="abandon")
    with pytest.raises(ValueError, match="does not accept"):
        ctx.local_activity("a", [], retry_policy={"max_attempts": 2, "initial_interval_seconds": 1})
    with pytest.raises(ValueError, match="from 1 to 100"):
        ctx.local_activity("a", [], retry_policy={"max_attempts": 0})
    with pytest.raises(ValueError, match="exceeds possible retries"):
        ctx.local_activity("a", [], retry_policy={"max_attempts": 2, "backoff_seconds": [1, 1]})
    with pytest.raises(ValueError, match="heartbeat_timeout must be <="):
        ctx.local_activity("a", [], start_to_close_timeout=5, heartbeat_timeout=6)
    with pytest.raises(ValueError, match="non-empty"):
        ctx.local_activity("  ", [])
    command = ctx.local_activity(" a ", [1], retry_policy={"non_retryable_error_types": [" X ", "X"]})
    assert command.activity_type == "a" and command.retry_policy == {"non_retryable_error_types": ["X"]}


# -- replay -------------------------------------------------------------------------------------


def _local_pair(sequence: int, activity_type: str, value: Any) -> List[Dict[str, Any]]:
    return activity_done(sequence, activity_type, value, execution_mode="local", local_activity=True)


class _NeverRun:
    def begin_replay(self) -> None:
        pass

    def run(self, command: Any) -> Any:
        raise AssertionError("a recorded local activity must never run again")


def test_a_recorded_local_activity_replays_its_outcome_and_never_runs() -> None:
    history = [started(), *_local_pair(1, "double", 42)]
    assert result_of(wire(One, history, [21], local_activities=_NeverRun())) == {"got": 42}
    failed = [started(), ev("ActivityScheduled", sequence=1, activity_type="double", execution_mode="local"),
              ev("ActivityFailed", sequence=1, activity_type="double", execution_mode="local",
                 message="bounded text", exception_type="ValueError")]
    assert result_of(wire(One, failed, [21], local_activities=_NeverRun())) == {"failed": "bounded text"}


def test_local_and_remote_never_replay_as_each_other() -> None:
    remote = [started(), *activity_done(1, "double", 42)]
    with pytest.raises(NonDeterministicReplayError, match="remote activity cannot replay as a local"):
        replay(One, remote, [21], local_activities=_NeverRun())

    @workflow.defn(name="unit.local.remote")
    class Remote:
        def run(self, ctx: Any) -> Any:
            return (yield ctx.schedule_activity("double", [1]))

    with pytest.raises(NonDeterministicReplayError, match="local activity cannot replay as a scheduled"):
        replay(Remote, [started(), *_local_pair(1, "double", 2)], [])


def test_a_new_local_activity_runs_in_the_task_and_the_code_goes_on() -> None:
    runner = _runner({"double": lambda n: n * 2})
    commands = wire(One, [started()], [21], local_activities=runner)
    assert [c["type"] for c in commands] == ["record_local_activity", "complete_workflow"]
    assert commands[0]["outcome"] == "completed" and payloads.decode_envelope(commands[0]["result"]) == 42
    assert result_of(commands) == {"got": 42}


def test_without_a_runner_the_replay_stops_before_it() -> None:
    result = replay(One, [started()], [21])
    assert [type(c).__name__ for c in result.commands] == ["RecordLocalActivity"]


def test_what_the_sdk_refuses_without_prepared_admission() -> None:
    @workflow.defn(name="unit.local.group")
    class Group:
        def run(self, ctx: Any) -> Any:
            return (yield [ctx.local_activity("double", [1]), ctx.schedule_activity("double", [2])])

    @workflow.defn(name="unit.local.policy")
    class Policy:
        def run(self, ctx: Any) -> Any:
            return (yield ctx.local_activity("double", [1], cancellation_policy="try_cancel"))

    with pytest.raises(LocalActivityExecutionAborted, match="local groups require negotiated atomic prepared"):
        replay(Group, [started()], [], local_activities=_NeverRun())
    with pytest.raises(LocalActivityExecutionAborted, match="prepared_local_activity_cancellation_policy"):
        replay(Policy, [started()], [], local_activities=_NeverRun())


def test_a_forgotten_yield_names_local_activity() -> None:
    @workflow.defn(name="unit.local.forgot")
    class Forgot:
        def run(self, ctx: Any) -> Any:
            ctx.local_activity("double", [1])
            return 1

    from sync_worker.errors import InvalidWorkflowDefinition

    with pytest.raises(InvalidWorkflowDefinition, match=r"ctx.local_activity\(...\)"):
        replay(Forgot, [started()], [])


# -- the runner ---------------------------------------------------------------------------------


def test_the_lease_is_renewed_before_every_attempt_and_retries_stop_at_max_attempts() -> None:
    calls: List[int] = []
    slept: List[float] = []

    def flaky(n: int) -> int:
        calls.append(n)
        raise RuntimeError(f"attempt {len(calls)}")

    lease = _Lease()
    runner = _runner({"f": flaky}, lease, sleep=slept.append)
    command = RecordLocalActivity("f", [1], retry_policy={"max_attempts": 3, "backoff_seconds": [2, 5]})
    failure = runner.run(command)
    assert isinstance(failure, ActivityFailed) and str(failure) == "attempt 3"
    assert len(calls) == 3 and lease.renewals == 3 and slept == [2, 5]
    attempts = command.outcome["attempts"]  # type: ignore[index]
    assert [(a["attempt_number"], a["outcome"], a.get("retry_reason"), a.get("backoff_seconds")) for a in attempts] \
        == [(1, "failed", "failure", 2), (2, "failed", "failure", 5), (3, "failed", None, None)]
    assert len({a["attempt_id"] for a in attempts}) == 3


def test_non_retryable_types_and_errors_stop_at_once() -> None:
    class Declined(Exception):
        pass

    def declined() -> None:
        raise Declined("no")

    def fatal() -> None:
        raise NonRetryableError("fatal")

    runner = _runner({"d": declined, "f": fatal})
    for kind, policy in (("d", {"max_attempts": 5, "non_retryable_error_types": ["Declined"]}),
                         ("f", {"max_attempts": 5})):
        command = RecordLocalActivity(kind, [], retry_policy=policy)
        failure = runner.run(command)
        assert isinstance(failure, ActivityFailed) and failure.non_retryable
        assert len(command.outcome["attempts"]) == 1  # type: ignore[index]


def test_timeouts_are_checked_at_the_boundary_as_the_sdk_does() -> None:
    clock = [0.0]

    def slow() -> str:
        clock[0] += 10
        return "late"

    def slow_failure() -> str:
        clock[0] += 10
        raise RuntimeError("slow failure")

    runner = _runner({"s": slow, "sf": slow_failure}, monotonic=lambda: clock[0])
    command = RecordLocalActivity("s", [], start_to_close_timeout=5, retry_policy={"max_attempts": 3})
    failure = runner.run(command)
    assert isinstance(failure, ActivityFailed) and str(failure) == "local activity start_to_close timeout elapsed"
    assert command.outcome["outcome"] == "timed_out" and command.outcome["timeout_kind"] == "start_to_close"  # type: ignore[index]
    assert len(command.outcome["attempts"]) == 3  # type: ignore[index]
    command = RecordLocalActivity("sf", [], schedule_to_close_timeout=15, retry_policy={"max_attempts": 3})
    runner.run(command)
    assert len(command.outcome["attempts"]) == 2  # type: ignore[index]  # the third would start past the budget


def test_a_failure_is_bounded_before_the_workflow_sees_it_and_never_changed_after() -> None:
    def huge() -> None:
        raise ValueError("y" * 80_000)

    runner = _runner({"h": huge})
    command = RecordLocalActivity("h", [])
    failure = runner.run(command)
    message = command.outcome["message"]  # type: ignore[index]
    assert isinstance(message, ObservedText) and str(failure) == message
    assert len(message.encode()) == 63488 and message.endswith('{"omitted_fields":{"message":80000}}]')
    body = {"lease_owner": "w", "workflow_task_attempt": 1, "commands": [command.to_wire("q")]}
    assert bound_request("/worker/workflow-tasks/wt-1/complete", body)["commands"][0]["message"] == message
    with pytest.raises(FailureReportTooLarge):  # a lower limit cannot change an observed value
        bound_request("/worker/workflow-tasks/wt-1/complete", body, limit_bytes=65_000)


def test_heartbeats_renew_the_lease_and_are_recorded() -> None:
    from sync_worker import activity

    def beating() -> str:
        for step in range(3):
            activity.context().heartbeat_sync({"step": step})
        return "done"

    def bad_details() -> str:
        activity.context().heartbeat_sync(["not", "an", "object"])  # type: ignore[arg-type]
        return "never"

    lease = _Lease()
    runner = _runner({"b": beating, "x": bad_details}, lease)
    command = RecordLocalActivity("b", [])
    assert runner.run(command) == "done" and lease.renewals == 4
    beats = command.outcome["attempts"][0]["heartbeats"]  # type: ignore[index]
    assert [beat["details"] for beat in beats] == [{"step": 0}, {"step": 1}, {"step": 2}]
    command = RecordLocalActivity("x", [], retry_policy={"max_attempts": 3})
    failure = runner.run(command)
    assert isinstance(failure, ActivityFailed) and failure.non_retryable
    assert failure.exception_type == "_InvalidLocalActivityReport"


def test_a_refused_lease_renewal_abandons_the_task() -> None:
    runner = _runner({"f": lambda: 1 / 0}, _Lease(refuse_after=1))
    with pytest.raises(WorkflowTaskLeaseLost) as raised:
        runner.run(RecordLocalActivity("f", [], retry_policy={"max_attempts": 2}))
    assert raised.value.abandon_task is True


def test_a_second_replay_of_the_same_task_reuses_the_outcome() -> None:
    calls: List[int] = []
    runner = _runner({"double": lambda n: calls.append(n) or n * 2})
    first = wire(One, [started()], [21], local_activities=runner)
    second = wire(One, [started()], [21], local_activities=runner)  # e.g. a sticky resume fell back cold
    assert calls == [21] and json.dumps(first) == json.dumps(second)


def test_an_unknown_type_fails_non_retryably() -> None:
    command = RecordLocalActivity("missing", [])
    failure = _runner({}).run(command)
    assert isinstance(failure, ActivityFailed) and failure.non_retryable
    assert "no local activity handler registered for 'missing'" in str(failure)
