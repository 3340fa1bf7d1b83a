from __future__ import annotations

import logging
from typing import List, Tuple

import pytest

from sync_worker.errors import Forbidden, ServerError, TransportError, Unauthorized
from sync_worker.runtime.backoff import PollFailureBackoff, poll_error_summary


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def recording_rng(calls: List[Tuple[float, float]], pick: str = "high"):
    def uniform(low: float, high: float) -> float:
        calls.append((low, high))
        return high if pick == "high" else low

    return uniform


def test_ceiling_doubles_to_thirty_and_jitter_is_half_to_full() -> None:
    calls: List[Tuple[float, float]] = []
    backoff = PollFailureBackoff("activity", rng=recording_rng(calls), clock=FakeClock())
    delays = [backoff.next_delay(TransportError("x")) for _ in range(8)]
    assert calls == [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, 8.0), (8.0, 16.0), (15.0, 30.0),
                     (15.0, 30.0), (15.0, 30.0)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert backoff.consecutive_failures == 8


def test_real_jitter_stays_within_bounds() -> None:
    backoff = PollFailureBackoff("workflow", clock=FakeClock())
    for ceiling in (1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0):
        delay = backoff.next_delay(TransportError("x"))
        assert ceiling / 2 <= delay <= ceiling


def test_success_resets_the_ceiling() -> None:
    calls: List[Tuple[float, float]] = []
    backoff = PollFailureBackoff("query", rng=recording_rng(calls, "low"), clock=FakeClock())
    backoff.next_delay(TransportError("x"))
    backoff.next_delay(TransportError("x"))
    backoff.reset()
    assert backoff.next_delay(TransportError("x")) == 0.5
    assert calls[-1] == (0.5, 1.0)
    assert backoff.consecutive_failures == 1


def test_minimum_delay_wins() -> None:
    backoff = PollFailureBackoff("workflow", rng=recording_rng([]), clock=FakeClock())
    assert backoff.next_delay(TransportError("x"), minimum_delay=7.0) == 7.0


def test_same_failure_is_logged_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    backoff = PollFailureBackoff("activity", rng=recording_rng([]), clock=clock)
    caplog.set_level(logging.WARNING, logger="sync_worker.worker.poll")
    for _ in range(5):
        backoff.next_delay(TransportError("secret://user:pw@host"))
        clock.now += 10
    assert len(caplog.records) == 1
    clock.now += 15  # 65 s after the first warning
    backoff.next_delay(TransportError("x"))
    assert len(caplog.records) == 2
    # a different summary is logged at once
    backoff.next_delay(ServerError(500, {"reason": "boom"}))
    assert len(caplog.records) == 3
    text = caplog.records[0].getMessage()
    assert text.startswith("activity poll error: TransportError; route=/worker/activity-tasks/poll; retrying in ")
    assert "secret" not in " ".join(r.getMessage() for r in caplog.records)


def test_reset_clears_log_throttle(caplog: pytest.LogCaptureFixture) -> None:
    backoff = PollFailureBackoff("activity", rng=recording_rng([]), clock=FakeClock())
    caplog.set_level(logging.WARNING, logger="sync_worker.worker.poll")
    backoff.next_delay(TransportError("x"))
    backoff.reset()
    backoff.next_delay(TransportError("x"))
    assert len(caplog.records) == 2


def test_summaries_are_credential_safe() -> None:
    assert poll_error_summary(Unauthorized(401, {"message": "token abc"})) == (
        "Unauthorized: authentication failed (HTTP 401); check the worker credentials")
    assert poll_error_summary(Forbidden(403, {})) == (
        "Forbidden: authorization failed (HTTP 403); check the worker credentials and permissions")
    assert poll_error_summary(ServerError(503, {"reason": "r" * 100})) == (
        "ServerError: server returned 503 reason=" + repr("r" * 64))
    assert poll_error_summary(ServerError(502, "bad gateway")) == "ServerError: server returned 502"
    assert poll_error_summary(ConnectionError("http://u:p@h")) == "ConnectionError"


def test_early_cutoff_warning_names_duration_and_wait(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    backoff = PollFailureBackoff("workflow", rng=recording_rng([]), clock=clock)
    caplog.set_level(logging.WARNING, logger="sync_worker.worker.poll")
    assert backoff.note_early_cutoff(TransportError("x"), 30.04, 35)  # cut at a round 30 s: a proxy timeout
    assert caplog.records[-1].getMessage() == (
        "Worker long poll /worker/workflow-tasks/poll ended after 30.04s before its configured wait of 35s "
        "(TransportError). Check proxy and HTTP timeout budgets.")
    clock.now += 61
    assert backoff.note_early_cutoff(ServerError(504, {}), 1.0, 35)
    assert not backoff.note_early_cutoff(ServerError(504, {}), 1.0, 35)  # throttled
    backoff.reset()
    assert not backoff.note_early_cutoff(ServerError(500, {}), 1.0, 35)  # not a cutoff status
    assert not backoff.note_early_cutoff(TransportError("x"), 40.0, 35)  # the wait was used up
    assert not backoff.note_early_cutoff(TransportError("x"), 0.1, 0)  # no wait requested
    assert len(caplog.records) == 2


def test_server_restarts_are_not_blamed_on_a_proxy(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 9: every server restart logged "Check proxy and HTTP timeout budgets"."""
    backoff = PollFailureBackoff("activity", rng=recording_rng([]), clock=FakeClock())
    caplog.set_level(logging.WARNING, logger="sync_worker.worker.poll")
    refused = TransportError("x", connect=True)
    assert not backoff.note_early_cutoff(refused, 10.0, 35)  # connection refused: the server is down
    assert not backoff.note_early_cutoff(TransportError("x"), 2.27, 35)  # reset at an arbitrary moment
    assert not backoff.note_early_cutoff(TransportError("x"), 0.4, 35)
    assert caplog.records == []
    assert backoff.note_early_cutoff(ServerError(502, {}), 2.27, 35)  # a gateway said so
    backoff.reset()
    assert backoff.note_early_cutoff(TransportError("x"), 9.93, 35)  # cut at ~10 s
