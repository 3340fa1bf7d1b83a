"""Bounded failure reports (protocol §10): exact markers, budgets, identity preservation."""

from __future__ import annotations

import copy
import json
from typing import Any, Dict

import pytest

from sync_worker.errors import FailureReportTooLarge
from sync_worker.failure_reports import (
    DETAIL_BYTES,
    MESSAGE_BYTES,
    REQUEST_BYTES,
    STACK_BYTES,
    bound_request,
    effective_limit,
    encoded_size,
)

ACTIVITY_FAIL = "/worker/activity-tasks/t-1/fail"
WORKFLOW_FAIL = "/worker/workflow-tasks/t-1/fail"
COMPLETE = "/worker/workflow-tasks/t-1/complete"


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def marker(omitted: Dict[str, Any]) -> str:
    return "\n[truncated " + json.dumps({"omitted_fields": omitted}, separators=(",", ":")) + "]"


def verified_example() -> Dict[str, Any]:
    details = {"codec": "avro", "blob": "D" * 70_000}
    assert encoded_size(details) == 70_026
    return {
        "lease_owner": "worker-1",
        "activity_attempt_id": "attempt-1",
        "failure": {
            "type": "RuntimeError",
            "message": "M" * 200_000,
            "stack_trace": "S" * 300_000,
            "details": details,
        },
    }


def test_constants() -> None:
    assert (MESSAGE_BYTES, STACK_BYTES, DETAIL_BYTES, REQUEST_BYTES) == (63488, 131072, 65536, 1048576)


def test_verified_example_exactly() -> None:
    body = verified_example()
    failure = bound_request(ACTIVITY_FAIL, body)["failure"]
    expected_marker = '\n[truncated {"omitted_fields":{"details":70026,"message":200000,"stack_trace":300000}}]'
    assert utf8_len(failure["message"]) == 63_488
    assert failure["message"] == "M" * (63_488 - utf8_len(expected_marker)) + expected_marker
    assert utf8_len(failure["stack_trace"]) == 131_072
    assert failure["stack_trace"] == "S" * (131_072 - 12) + "\n[truncated]"
    assert "details" not in failure
    assert failure["diagnostics"] == {
        "failure_report": {"omitted_fields": {"details": 70026, "message": 200000, "stack_trace": 300000}}
    }
    assert failure["type"] == "RuntimeError"


def test_input_is_not_mutated() -> None:
    body = verified_example()
    body["failure"]["diagnostics"] = {"host": "h"}
    snapshot = copy.deepcopy(body)
    result = bound_request(ACTIVITY_FAIL, body)
    assert body == snapshot
    assert result is not body
    assert result["failure"] is not body["failure"]
    assert "diagnostics" in result["failure"]


def test_small_reports_are_untouched() -> None:
    body = {
        "lease_owner": "w",
        "failure": {"type": "E", "message": "boom", "stack_trace": "line 1", "details": {"k": "v"}},
    }
    assert bound_request(ACTIVITY_FAIL, body) == body
    complete = {"commands": [{"type": "fail_workflow", "message": "m", "exception": {"class": "E", "x": 1}}]}
    assert bound_request(COMPLETE, complete) == complete


def test_non_report_paths_and_bodies_are_returned_unchanged() -> None:
    huge = {"failure": {"message": "m" * 2_000_000}}
    assert bound_request("/worker/activity-tasks/t/complete", huge) == huge
    assert bound_request("/workflows/w/signal/s", huge) == huge
    assert bound_request("/worker/heartbeat", {"worker_id": "w"}) == {"worker_id": "w"}


def test_absolute_api_path_is_bounded_too() -> None:
    result = bound_request("/api" + ACTIVITY_FAIL, verified_example())
    assert result == bound_request(ACTIVITY_FAIL, verified_example())
    assert encoded_size(result) <= REQUEST_BYTES


def test_message_cut_never_splits_a_three_byte_code_point() -> None:
    message = "€" * 30_000
    result = bound_request(WORKFLOW_FAIL, {"failure": {"type": "E", "message": message}})
    tail = marker({"message": 90_000})
    retained = MESSAGE_BYTES - utf8_len(tail)
    assert result["failure"]["message"] == "€" * (retained // 3) + tail
    assert "diagnostics" not in result["failure"]  # workflow-task failures are not structured


def test_stack_cut_never_splits_a_four_byte_code_point() -> None:
    stack = "a" + "😀" * 40_000
    result = bound_request(WORKFLOW_FAIL, {"failure": {"type": "E", "message": "m", "stack_trace": stack}})
    cut = result["failure"]["stack_trace"]
    kept = cut[: -len("\n[truncated]")]
    assert cut.endswith("\n[truncated]")
    assert kept == "a" + "😀" * ((STACK_BYTES - 12 - 1) // 4)
    assert utf8_len(cut) <= STACK_BYTES
    assert result["failure"]["message"] == "m" + marker({"stack_trace": utf8_len(stack)})


def test_two_byte_message_fits_exactly_or_one_byte_under() -> None:
    result = bound_request(WORKFLOW_FAIL, {"failure": {"message": "é" * 50_000}})
    message = result["failure"]["message"]
    assert MESSAGE_BYTES - 1 <= utf8_len(message) <= MESSAGE_BYTES
    assert set(message[: message.index("\n[truncated")]) == {"é"}


@pytest.mark.parametrize("limit", [effective_limit(65_536, None), effective_limit(None, 20_000), 5_000])
def test_lowered_limits_keep_the_body_within_the_limit(limit: int) -> None:
    body = verified_example()
    body["failure"]["details"] = {"codec": "avro", "blob": "D" * 30_000}  # fits 64 KiB, not the request
    result = bound_request(ACTIVITY_FAIL, body, limit_bytes=limit)
    assert encoded_size(result) <= limit
    failure = result["failure"]
    assert failure["type"] == "RuntimeError"
    omitted = failure["diagnostics"]["failure_report"]["omitted_fields"]
    assert omitted["message"] == 200_000
    assert omitted["stack_trace"] == 300_000
    assert failure["message"].endswith(marker(omitted))


def test_identity_and_claim_fields_are_never_shortened() -> None:
    identity = {
        "type": "T" * 3_000,
        "class": "app.errors.Boom",
        "non_retryable": True,
        "retry_after_seconds": 7,
        "next_retry_delay": "PT3S",
        "activity_type": "charge",
        "activity_attempt_id": "attempt-9",
    }
    failure = {**identity, "message": "m" * 90_000, "stack_trace": "s" * 90_000, "details": "d" * 9_000}
    body = {"lease_owner": "w" * 500, "activity_attempt_id": "attempt-9", "failure": failure}
    result = bound_request(ACTIVITY_FAIL, body, limit_bytes=8_000)
    assert encoded_size(result) <= 8_000
    assert result["lease_owner"] == body["lease_owner"]
    assert result["activity_attempt_id"] == "attempt-9"
    for key, value in identity.items():
        assert result["failure"][key] == value


def test_fail_workflow_exception_is_reduced_to_identity_keys() -> None:
    exception = {
        "class": "app.Boom",
        "type": "Boom",
        "code": "E42",
        "failed_step_sequence": 3,
        "message": "x" * 70_000,
        "context": {"big": "y" * 10},
    }
    command = {"type": "fail_workflow", "message": "boom", "exception_type": "Boom", "exception": exception}
    body = {"lease_owner": "w", "commands": [{"type": "complete_update", "update_id": "u"}, command]}
    result = bound_request(COMPLETE, body)
    reduced = result["commands"][1]["exception"]
    original_size = encoded_size(exception)
    assert set(reduced) == {"class", "type", "code", "failed_step_sequence", "diagnostics"}
    assert reduced["diagnostics"] == {"failure_report": {"omitted_fields": {"exception": original_size}}}
    assert result["commands"][1]["message"] == "boom" + marker({"exception": original_size})
    assert result["commands"][0] == body["commands"][0]
    assert result["commands"][1]["exception_type"] == "Boom"


def test_existing_diagnostics_are_merged_when_metadata_fits() -> None:
    failure = {"type": "E", "message": "m" * 70_000, "diagnostics": {"host": "worker-host", "pid": 12}}
    diagnostics = bound_request(ACTIVITY_FAIL, {"failure": failure})["failure"]["diagnostics"]
    assert diagnostics == {"host": "worker-host", "pid": 12, "failure_report": {"omitted_fields": {"message": 70_000}}}


def test_oversized_metadata_drops_existing_diagnostics_whole() -> None:
    body = verified_example()
    body["failure"]["diagnostics"] = {"host": "worker-host"}
    failure = bound_request(ACTIVITY_FAIL, body)["failure"]
    omitted = failure["diagnostics"]["failure_report"]["omitted_fields"]
    assert failure["diagnostics"] == {"failure_report": {"omitted_fields": omitted}}
    assert omitted["diagnostics"] == encoded_size({"host": "worker-host"})
    assert omitted["details"] == 70_026


def test_sizes_carried_from_an_earlier_truncation_are_kept() -> None:
    first = bound_request(ACTIVITY_FAIL, verified_example())
    assert bound_request(ACTIVITY_FAIL, first) == first
    second = bound_request(ACTIVITY_FAIL, first, limit_bytes=40_000)
    omitted = second["failure"]["diagnostics"]["failure_report"]["omitted_fields"]
    assert omitted == {"details": 70026, "message": 200000, "stack_trace": 300000}
    assert encoded_size(second) <= 40_000


def test_fail_update_and_local_activity_attempts_are_bounded() -> None:
    commands = [
        {"type": "fail_update", "update_id": "u-1", "message": "u" * 80_000, "details": "d" * 70_000},
        {
            "type": "record_local_activity",
            "message": "l" * 70_000,
            "attempts": [{"attempt": 1, "message": "a" * 70_000, "stack_trace": "s" * 140_000}, {"attempt": 2}],
        },
    ]
    body = {"lease_owner": "w", "commands": commands}
    result = bound_request(COMPLETE, body)
    update, local = result["commands"]
    assert "details" not in update and "diagnostics" not in update
    assert update["message"].endswith(marker({"message": 80_000, "details": encoded_size("d" * 70_000)}))
    assert utf8_len(local["message"]) == MESSAGE_BYTES
    attempt = local["attempts"][0]
    assert utf8_len(attempt["message"]) == MESSAGE_BYTES
    assert utf8_len(attempt["stack_trace"]) == STACK_BYTES
    assert local["attempts"][1] == {"attempt": 2}
    assert encoded_size(result) <= REQUEST_BYTES


def test_tiny_budget_drops_the_stack_entirely() -> None:
    body = {"failure": {"type": "E", "message": "m" * 1_000, "stack_trace": "s" * 1_000}}
    without_stack = {"failure": {"type": "E", "message": marker({"message": 1_000, "stack_trace": 1_000})}}
    limit = encoded_size(without_stack) + 5  # too small for even a bare "\n[truncated]" stack
    result = bound_request(WORKFLOW_FAIL, body, limit_bytes=limit)
    assert result == without_stack


def test_too_large_when_identity_alone_cannot_fit() -> None:
    body = {"lease_owner": "w", "failure": {"type": "T" * 5_000, "message": "m", "stack_trace": "s" * 5_000}}
    with pytest.raises(FailureReportTooLarge) as raised:
        bound_request(ACTIVITY_FAIL, body, limit_bytes=4_000)
    assert raised.value.limit_bytes == 4_000
    assert "4000-byte encoded request budget" in str(raised.value)


def test_too_large_when_exception_identity_exceeds_detail_budget() -> None:
    command = {"type": "fail_workflow", "message": "m", "exception": {"class": "C" * 70_000, "message": "x"}}
    with pytest.raises(FailureReportTooLarge) as raised:
        bound_request(COMPLETE, {"commands": [command]})
    assert raised.value.limit_bytes == REQUEST_BYTES


def test_unencodable_details_are_omitted_with_null_size() -> None:
    body = {"failure": {"type": "E", "message": "boom", "details": float("nan")}}
    result = bound_request(ACTIVITY_FAIL, body)
    assert "details" not in result["failure"]
    assert result["failure"]["diagnostics"] == {"failure_report": {"omitted_fields": {"details": None}}}
    assert result["failure"]["message"] == 'boom\n[truncated {"omitted_fields":{"details":null}}]'


def test_limit_above_one_mebibyte_is_clamped() -> None:
    body = {"lease_owner": "w", "padding": "p" * 1_047_000, "failure": {"type": "E", "message": "m" * 5_000}}
    result = bound_request(WORKFLOW_FAIL, body, limit_bytes=10 * REQUEST_BYTES)
    assert encoded_size(result) <= REQUEST_BYTES
    assert result["padding"] == body["padding"]


def test_effective_limit() -> None:
    assert effective_limit(None, None) == REQUEST_BYTES
    assert effective_limit(5 * REQUEST_BYTES, None) == REQUEST_BYTES
    assert effective_limit(65_536, None) == 65_536
    assert effective_limit(None, 20_000) == 20_000
    assert effective_limit(30_000, 40_000) == 30_000
    assert effective_limit(None, 0) == REQUEST_BYTES
    assert effective_limit(None, -5) == REQUEST_BYTES
    assert effective_limit(None, True) == REQUEST_BYTES
    for bad in (0, -1, True, 1.5, "100"):
        with pytest.raises(ValueError):
            effective_limit(bad, None)  # type: ignore[arg-type]


def test_encoded_size_counts_utf8_bytes_of_compact_json() -> None:
    assert encoded_size({"a": "é", "b": [1, 2]}) == len('{"a":"é","b":[1,2]}'.encode())
    assert encoded_size("\n") == 4
    with pytest.raises(ValueError):
        encoded_size(float("inf"))
