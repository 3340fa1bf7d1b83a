"""An exception may ask for a non-retryable failure or for its own retry delay (attributes)."""

from __future__ import annotations

from sync_worker.worker.activities import failure_from_exception


class Flagged(Exception):
    non_retryable = True


class Later(Exception):
    next_retry_delay = 2.5


def test_non_retryable_attribute() -> None:
    failure = failure_from_exception(Flagged("no"))
    assert failure["non_retryable"] is True and failure["type"] == "Flagged"
    assert "next_retry_delay" not in failure


def test_next_retry_delay_attribute_is_sent_for_retryable_failures_only() -> None:
    assert failure_from_exception(Later("soon"))["next_retry_delay"] == 2.5
    assert "next_retry_delay" not in failure_from_exception(Later("soon"), non_retryable=True)
    bad = Exception("odd")
    bad.next_retry_delay = "5"  # type: ignore[attr-defined]
    assert "next_retry_delay" not in failure_from_exception(bad)
    assert "non_retryable" not in failure_from_exception(ValueError("plain"))
