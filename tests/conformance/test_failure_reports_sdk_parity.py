"""Our bounded failure reports equal the published SDK's, byte for byte, on generated requests.

The SDK applies ``prepare_failure_request`` before payload uploads and ``bound_failure_request``
just before sending; without external payloads those two steps together are what
``sync_worker.failure_reports.bound_request`` does.
"""

from __future__ import annotations

import json
import random
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from sync_worker.errors import FailureReportTooLarge
from sync_worker.failure_reports import bound_request
from tests._sdk_missing import SDK_MISSING

sdk = pytest.importorskip("durable_workflow._failure_reporting", reason=SDK_MISSING)

_ALPHABET = 'abcXYZ 019\n\t"\\é€😀中'


def _text(rng: random.Random, size: int) -> str:
    if rng.random() < 0.5:
        return "M" * size
    chunk = "".join(rng.choice(_ALPHABET) for _ in range(61))
    return (chunk * (size // 61 + 1))[:size]


def _size(rng: random.Random) -> int:
    return rng.choice([0, 10, 500, 20_000, 63_000, 63_500, 70_000, 140_000, 300_000])


def _metadata(rng: random.Random) -> Dict[str, Any]:
    fields: Dict[str, Any] = {}
    if rng.random() < 0.6:
        fields["details"] = {"codec": "avro", "blob": "A" * _size(rng)}
    if rng.random() < 0.4:
        nested: Dict[str, Any] = {"host": "w-1", "nested": {"deep": [_text(rng, _size(rng) // 4)]}}
        if rng.random() < 0.3:
            nested["failure_report"] = {"omitted_fields": {"stack_trace": 123_456, "details": None}}
        fields["diagnostics"] = nested
    if rng.random() < 0.2:
        fields["runtime_diagnostics"] = {"log": _text(rng, _size(rng) // 2)}
    if rng.random() < 0.2:
        fields["validation_errors"] = [{"field": "x", "error": _text(rng, _size(rng) // 3)}]
    return fields


def _report(rng: random.Random) -> Dict[str, Any]:
    report: Dict[str, Any] = {"type": "ValueError", "non_retryable": rng.random() < 0.5}
    if rng.random() < 0.95:
        report["message"] = _text(rng, _size(rng))
    if rng.random() < 0.8:
        report["stack_trace"] = _text(rng, _size(rng))
    report.update(_metadata(rng))
    return report


def _activity_fail(rng: random.Random) -> Tuple[str, Dict[str, Any]]:
    failure = _report(rng)
    failure["activity_attempt_id"] = "att-1"
    return "/worker/activity-tasks/t-1/fail", {
        "lease_owner": "w-1",
        "activity_attempt_id": "att-1",
        "failure": failure,
    }


def _workflow_task_fail(rng: random.Random) -> Tuple[str, Dict[str, Any]]:
    return "/worker/workflow-tasks/t-1/fail", {
        "lease_owner": "w-1",
        "workflow_task_attempt": 2,
        "failure": _report(rng),
    }


def _update_reject(rng: random.Random) -> Tuple[str, Dict[str, Any]]:
    return "/worker/workflow-tasks/t-1/updates/u-1/reject", {"lease_owner": "w-1", "failure": _report(rng)}


def _complete(rng: random.Random) -> Tuple[str, Dict[str, Any]]:
    commands: List[Dict[str, Any]] = [{"type": "schedule_activity", "activity_type": "a", "arguments": None}]
    exception: Dict[str, Any] = {
        "class": "app.Boom",
        "type": "Boom",
        "code": "E1",
        "message": _text(rng, _size(rng)),
    }
    exception.update(_metadata(rng))
    if rng.random() < 0.2:
        exception["extra"] = _text(rng, _size(rng))
    commands.append(
        {
            "type": "fail_workflow",
            "message": _text(rng, _size(rng)),
            "exception_type": "Boom",
            "stack_trace": _text(rng, _size(rng)),
            "exception": exception,
        }
    )
    if rng.random() < 0.5:
        update = {"type": "fail_update", "update_id": "u-1", "message": _text(rng, _size(rng))}
        update.update(_metadata(rng))
        commands.append(update)
    if rng.random() < 0.5:
        local = {
            "type": "record_local_activity",
            "message": _text(rng, _size(rng)),
            "stack_trace": _text(rng, _size(rng)),
            "attempts": [
                {"attempt": 1, "message": _text(rng, _size(rng)), "stack_trace": _text(rng, _size(rng))},
                {"attempt": 2},
            ],
        }
        commands.append(local)
    return "/worker/workflow-tasks/t-1/complete", {
        "lease_owner": "w-1",
        "workflow_task_attempt": 1,
        "commands": commands,
    }


_BUILDERS: List[Callable[[random.Random], Tuple[str, Dict[str, Any]]]] = [
    _activity_fail,
    _workflow_task_fail,
    _update_reject,
    _complete,
]


def _ours(path: str, body: Dict[str, Any], limit: int) -> Tuple[str, Any]:
    try:
        return "ok", bound_request(path, body, limit_bytes=limit)
    except FailureReportTooLarge as error:
        return "too_large", error.limit_bytes


def _sdk_outcome(path: str, body: Dict[str, Any], limit: int) -> Tuple[str, Any]:
    def call() -> Any:
        return sdk.bound_failure_request(path, sdk.prepare_failure_request(path, body), limit)

    try:
        return "ok", call()
    except Exception as error:  # the SDK's own FailureReportTooLarge class
        if type(error).__name__ != "FailureReportTooLarge":
            raise
        return "too_large", getattr(error, "limit_bytes", None)


def _wire(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _assert_same(path: str, body: Dict[str, Any], limit: int) -> Tuple[str, Any]:
    snapshot = json.dumps(body, sort_keys=True)
    ours = _ours(path, body, limit)
    theirs = _sdk_outcome(path, body, limit)
    assert json.dumps(body, sort_keys=True) == snapshot
    assert ours[0] == theirs[0], (ours[0], theirs[0])
    if ours[0] == "ok":
        assert ours[1] == theirs[1]
        assert _wire(ours[1]) == _wire(theirs[1])
        assert len(_wire(ours[1])) <= limit
    return ours


def test_verified_example_matches_sdk() -> None:
    body: Dict[str, Any] = {
        "lease_owner": "w-1",
        "activity_attempt_id": "att-1",
        "failure": {
            "type": "RuntimeError",
            "message": "M" * 200_000,
            "stack_trace": "S" * 300_000,
            "details": {"codec": "avro", "blob": "D" * 70_000},
        },
    }
    assert len(_wire(body["failure"]["details"])) == 70_026
    kind, result = _assert_same("/worker/activity-tasks/t-1/fail", body, 1_048_576)
    assert kind == "ok"
    assert result["failure"]["message"].endswith(
        'M\n[truncated {"omitted_fields":{"details":70026,"message":200000,"stack_trace":300000}}]'
    )


_LIMITS = [1_048_576, 400_000, 65_536, 20_000, 2_000, 300]


@pytest.mark.parametrize("seed", range(60))
def test_generated_requests_match_sdk(seed: int) -> None:
    rng = random.Random(seed)
    path, body = rng.choice(_BUILDERS)(rng)
    limit = rng.choice(_LIMITS)
    _assert_same(path, body, limit)


def test_generated_corpus_exercises_both_outcomes() -> None:
    # The parity above is only meaningful if the corpus covers truncation and refusal.
    outcomes = set()
    truncated = 0
    for seed in range(60):
        rng = random.Random(seed)
        path, body = rng.choice(_BUILDERS)(rng)
        limit = rng.choice(_LIMITS)
        kind, result = _ours(path, body, limit)
        outcomes.add(kind)
        truncated += kind == "ok" and result != body
    assert outcomes == {"ok", "too_large"}
    assert truncated >= 10


@pytest.mark.parametrize(
    "message",
    [
        "é" * 40_000,
        "€" * 30_000,
        "😀" * 20_000,
        "a" + "😀" * 15_871,
        "bad \ud800 surrogate",
        "",
    ],
    ids=["2-byte", "3-byte", "4-byte", "4-byte-offset", "lone-surrogate", "empty"],
)
@pytest.mark.parametrize("path", ["/worker/activity-tasks/t/fail", "/worker/workflow-tasks/t/fail"])
def test_unicode_messages_match_sdk(message: str, path: str) -> None:
    body = {"failure": {"type": "E", "message": message, "stack_trace": "😀" * 40_000}}
    _assert_same(path, body, 1_048_576)
    _assert_same(path, body, 50_000)


def test_rebounding_an_already_bounded_report_matches_sdk() -> None:
    path = "/worker/activity-tasks/t-1/fail"
    body = {
        "failure": {
            "type": "E",
            "message": "m" * 100_000,
            "stack_trace": "s" * 200_000,
            "details": "d" * 70_000,
        }
    }
    kind, first = _assert_same(path, body, 1_048_576)
    assert kind == "ok"
    kind, second = _assert_same(path, first, 1_048_576)
    assert second == first
    _assert_same(path, first, 30_000)


def test_non_report_bodies_match_sdk() -> None:
    cases: List[Tuple[str, Optional[Dict[str, Any]]]] = [
        ("/worker/activity-tasks/t/complete", {"result": {"codec": "avro", "blob": "x" * 10}}),
        ("/worker/heartbeat", {"worker_id": "w"}),
        ("/workflows/x/signal/s", {"failure": {"message": "m" * 100_000}}),
    ]
    for path, body in cases:
        assert body is not None
        assert bound_request(path, body) == sdk.bound_failure_request(
            path, sdk.prepare_failure_request(path, body)
        )


def test_prepared_local_activity_outcome_report_matches_sdk() -> None:
    body = {
        "lease_owner": "w-1",
        "report": {"type": "E", "message": "é" * 50_000, "stack_trace": "s" * 200_000, "details": "d" * 70_000},
    }
    kind, result = _assert_same("/worker/workflow-tasks/t-1/local-activities/la-1/outcome", body, 1_048_576)
    assert kind == "ok"
    assert "details" not in result["report"]
    assert "diagnostics" not in result["report"]
