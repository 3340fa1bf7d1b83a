"""The kwargs wire format is a stable contract: pin it (argument lists and Avro bytes)."""

from __future__ import annotations

import pytest
from sync_worker_celery import Celery
from sync_worker_celery.wire import decode_call, encode_call, exponential_backoff, retry_policy_for

from sync_worker import payloads
from tests._sdk_missing import SDK_MISSING


def test_positional_only_calls_travel_unchanged() -> None:
    assert encode_call((2, 3)) == [2, 3]
    assert decode_call([2, 3]) == ([2, 3], {}, {})


def test_kwargs_travel_as_one_trailing_marker_object() -> None:
    wire = encode_call(("ada",), {"greeting": "hi"})
    assert wire == ["ada", {"__kwargs__": {"greeting": "hi"}}]
    assert decode_call(wire) == (["ada"], {"greeting": "hi"}, {})


def test_call_metadata_rides_in_the_marker() -> None:
    wire = encode_call((1,), {}, {"id": "root~1", "root_id": "root", "parent_id": None})
    assert wire == [1, {"__kwargs__": {}, "__celery__": {"id": "root~1", "root_id": "root"}}]
    assert decode_call(wire) == ([1], {}, {"id": "root~1", "root_id": "root"})


def test_a_positional_argument_shaped_like_the_marker_is_escaped() -> None:
    lookalike = {"__kwargs__": {"x": 1}}
    wire = encode_call((lookalike,))
    assert wire == [lookalike, {"__kwargs__": {}}]
    assert decode_call(wire) == ([lookalike], {}, {})
    # other dicts are ordinary arguments
    assert decode_call([{"__kwargs__": {}, "other": 1}]) == ([{"__kwargs__": {}, "other": 1}], {}, {})
    assert decode_call([{"__kwargs__": 5}]) == ([{"__kwargs__": 5}], {}, {})


def test_avro_bytes_of_a_kwargs_call_are_pinned() -> None:
    # add(2, y=3): the exact envelope a workflow in any SDK must send
    blob = payloads.envelope(encode_call((2,), {"y": 3}))
    assert blob == {"codec": "avro", "blob": "wwHioz3/VYAiNwwEBAQOAhRfX2t3YXJnc19fDgICeQQGAAAA"}
    serializer = pytest.importorskip("durable_workflow.serializer", reason=SDK_MISSING)
    # the published SDK's workflow sends exactly these bytes for [2, {"__kwargs__": {"y": 3}}]
    assert serializer.envelope([2, {"__kwargs__": {"y": 3}}], codec="avro") == blob
    assert decode_call(payloads.decode(blob["blob"])) == ([2], {"y": 3}, {})


def test_non_string_keyword_names_are_refused() -> None:
    with pytest.raises(TypeError):
        encode_call((), {1: "x"})  # type: ignore[dict-item]


def test_celery_backoff_formula() -> None:
    assert [exponential_backoff(1, r, 600, False) for r in range(4)] == [1, 2, 4, 8]
    assert exponential_backoff(3, 5, 10, False) == 10
    assert 0 <= exponential_backoff(2, 3, None, True) <= 16


def test_retry_policy_lets_the_facade_decide_and_the_server_wait() -> None:
    app = Celery("wire-test", set_as_current=False)

    @app.task(max_retries=3, default_retry_delay=7)
    def plain() -> None: ...

    # unlimited: the facade reports every failure it does not retry as non-retryable; lost attempts
    # (worker gone) come back after a second; requested retries carry their own next_retry_delay
    assert retry_policy_for(plain) == {"max_attempts": None, "backoff_seconds": [1], "non_retryable_error_types": []}
