"""Small pure pieces of issue 9: per-task log lines, outcome delivery windows, start-up causes,
result paths."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Dict, List

import pytest

from sync_worker import errors
from sync_worker.client import Client
from sync_worker.payloads import encode
from sync_worker.worker.outcomes import OutcomeAbandoned, activity_outcome_deadline, deliver, lease_deadline
from sync_worker.worker.results import not_encodable
from sync_worker.worker.startup import StartupFailed, describe_cause, not_a_server, retry_startup
from sync_worker.worker.tasklog import MAX_REPR_CHARS, MAX_TRACEBACK_CHARS, format_raised, format_succeeded


def test_task_lines_are_bounded() -> None:
    line = format_succeeded("t", "a1", 0.01234, {"blob": "x" * 100_000, "items": list(range(1000))})
    assert line.startswith("Task t[a1] succeeded in 0.012s: {")
    assert len(line) < 40 + MAX_REPR_CHARS

    def deep(n: int) -> None:
        if n == 0:
            raise ValueError("y" * 50_000)
        deep(n - 1)

    with pytest.raises(ValueError) as caught:
        deep(200)
    text = format_raised("t", "a1", caught.value)
    first, rest = text.split("\n", 1)
    assert first.startswith("Task t[a1] raised: ValueError('yyy") and len(first) < 40 + MAX_REPR_CHARS
    assert len(rest) < MAX_TRACEBACK_CHARS + 100
    assert "in deep" in rest and "ValueError: yyy" in rest  # the innermost frames and the error are kept


def test_long_tracebacks_keep_their_innermost_frames() -> None:
    error: BaseException = KeyError("start")
    for level in range(300):  # a long chain of causes: far more than 4 KiB of traceback text
        try:
            raise ValueError(f"level {level}") from error
        except ValueError as raised:
            error = raised
    rest = format_raised("t", "a", error).split("\n", 1)[1]
    assert len(rest) <= MAX_TRACEBACK_CHARS + 40
    assert rest.startswith("[... traceback truncated ...]") and rest.rstrip().endswith("ValueError: level 299")


def test_deliver_retries_transient_errors_until_the_lease_window_closes(caplog: pytest.LogCaptureFixture) -> None:
    clock = [1000.0]
    calls: List[int] = []

    def send() -> str:
        calls.append(1)
        raise errors.TransportError("down")

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    caplog.set_level(logging.WARNING, logger="sync_worker.worker")
    with pytest.raises(OutcomeAbandoned):
        deliver(send, what="activity x completion", deadline=1010.0, now=lambda: clock[0], sleep=sleep)
    assert len(calls) >= 8  # repeated, at most ~1 s apart, for the whole 10 s window
    assert any("abandoned after" in r.getMessage() for r in caplog.records)


def test_deliver_does_not_repeat_a_refusal() -> None:
    calls: List[int] = []

    def send() -> None:
        calls.append(1)
        raise errors.Conflict(409, {"reason": "task_not_leased"})

    with pytest.raises(errors.Conflict):
        deliver(send, what="x", deadline=1e12, sleep=lambda s: None)
    assert calls == [1]


def test_lease_deadline_from_the_task() -> None:
    assert lease_deadline({"lease_expires_at": "2030-01-01T00:00:00.000000Z"}, now=lambda: 0.0) == pytest.approx(
        1893456000.0 + 2.0)
    assert lease_deadline({}, now=lambda: 100.0, default_window=60.0) == 160.0


def test_unencodable_result_names_the_path_from_the_root() -> None:
    value = {"order": {"lines": [{"price": Decimal("1.5")}]}}
    with pytest.raises(errors.PayloadEncodeError) as caught:
        encode(value)
    error = not_encodable(caught.value, value)
    assert error.path == 'result["order"]["lines"][0]["price"]' and error.value_type == "Decimal"
    assert "convert it with str() or float()" in str(error)


def test_startup_causes_are_named() -> None:
    dns = Client("http://no-such-host.invalid", transport_retries=1, connect_timeout=2.0)
    with pytest.raises(errors.TransportError) as caught:
        dns.health()
    assert describe_cause(caught.value).startswith(("DNS lookup failed", "could not connect"))
    assert "check the token" in describe_cause(errors.Unauthorized(401, {}))
    assert "worker plane" in describe_cause(errors.Forbidden(403, {}))
    unavailable = errors.ServerError(503, {"reason": "backend_unavailable"})
    assert describe_cause(unavailable) == "HTTP 503 (backend_unavailable)"


def test_startup_gives_up_at_the_deadline_and_refusals_are_final() -> None:
    clock = [0.0]

    def wait(seconds: float) -> bool:
        clock[0] += seconds
        return False

    def unreachable() -> None:
        raise errors.TransportError("x", connect=True)

    with pytest.raises(StartupFailed) as caught:
        retry_startup(unreachable, url="http://h:1", max_wait=20.0, clock=lambda: clock[0], wait=wait)
    assert 20.0 <= clock[0] < 21.0 and "http://h:1/api/cluster/info" in str(caught.value)

    def refused() -> None:
        raise errors.InvalidArgument(422, {"reason": "validation_failed"})

    with pytest.raises(errors.InvalidArgument):
        retry_startup(refused, url="u", max_wait=60.0, clock=lambda: clock[0], wait=wait)


def _give_up(error: BaseException) -> str:
    def attempt() -> None:
        raise error

    with pytest.raises(StartupFailed) as caught:
        retry_startup(attempt, url="http://h:1", max_wait=0.0, clock=lambda: 0.0, wait=lambda seconds: False)
    return str(caught.value)


def test_the_final_startup_error_says_which_kind_of_problem_it_is() -> None:
    assert _give_up(errors.Unauthorized(401, {})).startswith(
        "Credentials error: the server at http://h:1 refused the worker's credentials: HTTP 401")
    assert _give_up(errors.Forbidden(403, {})).startswith("Credentials error: ")
    assert _give_up(errors.TransportError("x", connect=True)).startswith(
        "Cannot reach the Durable Workflow server: unable to read http://h:1/api/cluster/info")
    assert _give_up(errors.ServerError(503, {})).startswith("Server unavailable: ")
    assert not any(_give_up(e).startswith("Server compatibility error") for e in (
        errors.Unauthorized(401, {}), errors.TransportError("x"), errors.ServerError(502, {})))


@pytest.mark.parametrize("error", [
    errors.NotFound(404, "<html>Not Found</html>", route="/cluster/info"),
    errors.ServerError(200, {"reason": "invalid_json_response"}, route="/cluster/info"),
    errors.ServerError(200, {"reason": "invalid_cluster_info"}, route="/cluster/info"),
])
def test_another_http_server_is_not_a_durable_workflow_server_and_is_not_retried(error: BaseException) -> None:
    calls = []

    def attempt() -> None:
        calls.append(1)
        raise error

    with pytest.raises(StartupFailed) as caught:
        retry_startup(attempt, url="http://h:1", max_wait=60.0, clock=lambda: 0.0, wait=lambda seconds: False)
    assert str(caught.value).startswith("Not a Durable Workflow server: http://h:1/api/cluster/info answered ")
    assert "without /api" in str(caught.value) and calls == [1]
    # A 404 from registration (an unknown namespace, say) is not this case.
    assert not_a_server(errors.NotFound(404, {"reason": "namespace_not_found"}, route="/worker/register"),
                        "http://h:1") is None


@pytest.mark.parametrize("identity, said", [
    ({"task_id": "t-1"}, "not reported (no activity_attempt_id to report it against)"),
    ({"activity_attempt_id": "a-1"}, "not reported (no task_id to report it against)"),
    ({}, "not reported (no task_id and activity_attempt_id to report it against)"),
])
def test_an_unreportable_malformed_task_names_only_what_is_missing(
        caplog: pytest.LogCaptureFixture, identity: Dict[str, Any], said: str) -> None:
    from sync_worker.protocol.tasks import MalformedTask
    from sync_worker.worker.malformed import report_malformed

    with caplog.at_level("WARNING"):
        report_malformed(MalformedTask("activity", ["arguments: not an envelope"], identity),
                         client=None, worker_id="w")  # type: ignore[arg-type]  # never called: nothing to report
    assert caplog.records[-1].getMessage().endswith(said)


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_an_activity_outcome_is_retried_until_the_heartbeat_timeout_when_that_comes_first() -> None:
    now = 1_000_000.0
    task = {"lease_expires_at": _iso(now + 30), "retry_policy": {"heartbeat_timeout": 5},
            "deadlines": {"heartbeat": _iso(now + 5)}}
    # No heartbeat sent: counted from receipt.
    deadline, until = activity_outcome_deadline(task, received_at=now, last_heartbeat_at=None, now=lambda: now + 1)
    assert until == "its heartbeat timeout (5 s) expires" and deadline == pytest.approx(now + 5 + 2)
    # From the last heartbeat when there was one.
    deadline, _ = activity_outcome_deadline(task, received_at=now, last_heartbeat_at=now + 20, now=lambda: now + 21)
    assert deadline == pytest.approx(now + 25 + 2)
    # Without retry_policy.heartbeat_timeout the span to deadlines.heartbeat is used (the dev server's shape).
    bare = {"lease_expires_at": _iso(now + 30), "deadlines": {"heartbeat": _iso(now + 5)}}
    assert activity_outcome_deadline(bare, received_at=now, last_heartbeat_at=None, now=lambda: now)[1] == (
        "its heartbeat timeout (5 s) expires")
    # The lease when it ends first, or when there is no heartbeat timeout.
    assert activity_outcome_deadline({"lease_expires_at": _iso(now + 30)}, received_at=now, last_heartbeat_at=None,
                                     now=lambda: now) == (pytest.approx(now + 32), "its lease ends")
    long_beat = {**task, "retry_policy": {"heartbeat_timeout": 600}}
    assert activity_outcome_deadline(long_beat, received_at=now, last_heartbeat_at=None, now=lambda: now)[1] == (
        "its lease ends")


def test_the_retry_warning_names_what_ends_the_window(caplog: pytest.LogCaptureFixture) -> None:
    clock = [0.0]

    def send() -> None:
        raise errors.TransportError("down")

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    caplog.set_level(logging.WARNING, logger="sync_worker.worker")
    with pytest.raises(OutcomeAbandoned):
        deliver(send, what="activity x completion", deadline=7.0, now=lambda: clock[0], sleep=sleep,
                until="its heartbeat timeout (5 s) expires")
    assert "retrying until its heartbeat timeout (5 s) expires in 7 s" in caplog.records[0].getMessage()


def test_deliver_works_out_its_window_only_when_a_first_attempt_fails() -> None:
    seen: List[float] = []

    def window(at: float) -> Any:
        seen.append(at)
        return 1010.0, "its lease ends"

    assert deliver(lambda: "ok", what="x", window=window, now=lambda: 1000.0) == "ok"
    assert seen == []  # a report that lands at once never works out its lease window

    clock = [1000.0]
    calls: List[int] = []

    def send() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise errors.TransportError("down")
        return "late"

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    assert deliver(send, what="x", window=window, now=lambda: clock[0], sleep=sleep) == "late"
    assert seen == [1000.0]  # once, as seen at the first attempt
    clock[0] = 1000.0
    calls.clear()
    seen.clear()

    def closed(at: float) -> Any:
        seen.append(at)
        return at - 1, "its lease ends"

    with pytest.raises(OutcomeAbandoned):
        deliver(lambda: (_ for _ in ()).throw(errors.TransportError("down")), what="x", window=closed,
                now=lambda: clock[0], sleep=sleep)
    assert seen == [1000.0]


@pytest.mark.parametrize("raw, problems", [
    ({"task_id": "t", "activity_attempt_id": "a", "activity_type": "x"}, None),
    ({"task_id": "t", "activity_attempt_id": "a", "activity_type": "x", "attempt_number": 3}, None),
    ({"task_id": "t", "attempt_id": "a", "activity_type": "x"}, None),  # the alias
    ({"task_id": "t", "activity_attempt_id": "", "attempt_id": "a", "activity_type": "x"}, None),
    ({"task_id": "t", "activity_attempt_id": "a", "activity_type": "x", "attempt_number": True},
     ["attempt_number is not an integer >= 1"]),
    ({"task_id": "t", "activity_attempt_id": "a", "activity_type": "x", "attempt_number": 0},
     ["attempt_number is not an integer >= 1"]),
    ({"task_id": "", "activity_attempt_id": "a", "activity_type": 5}, ["missing task_id", "missing activity_type"]),
])
def test_an_activity_task_is_parsed_by_the_same_rules_on_its_fast_path(raw: Dict[str, Any],
                                                                       problems: Any) -> None:
    from sync_worker.protocol import ActivityTask, MalformedTask, parse_task

    raw = dict(raw, payload_codec="avro", arguments=None, lease_expires_at="2026-01-01T00:00:00Z")
    if problems is not None:
        with pytest.raises(MalformedTask) as caught:
            parse_task("activity", raw)
        assert caught.value.problems == problems
        return
    task = parse_task("activity", raw)
    assert isinstance(task, ActivityTask) and task.raw is raw
    assert (task.task_id, task.attempt_id, task.activity_type) == ("t", "a", "x")
    assert task.attempt_number == raw.get("attempt_number", 1)
    assert (task.payload_codec, task.arguments, task.lease_expires_at) == ("avro", None, "2026-01-01T00:00:00Z")
