"""The UI's pending-timer column: a date in the page's format and the time left, never raw epoch seconds."""

from __future__ import annotations

import pytest

from sync_worker.devserver.ui.views import fires_at, time_left


@pytest.mark.parametrize("seconds, shown", [
    (0, "0 s"), (12, "12 s"), (59.6, "1 min"), (3599, "59 min 59 s"), (3600, "1 h"), (7322, "2 h 2 min"),
    (3 * 86400 + 4 * 3600 + 5, "3 d 4 h"), (30 * 86400, "30 d"), (-5, "0 s"),
])
def test_time_left_shows_the_two_largest_units(seconds: float, shown: str) -> None:
    assert time_left(seconds) == shown


def test_fire_time_is_an_iso_date_with_the_time_left() -> None:
    fire_at = 1796161188.3173842  # the raw value the issue saw on the page
    assert fires_at(fire_at, fire_at - 3598) == "2026-12-01T21:39:48.317384Z (in 59 min 58 s)"
    assert fires_at(fire_at, fire_at + 3) == "2026-12-01T21:39:48.317384Z (due now)"
    assert fires_at(None, 0.0) == "—"
