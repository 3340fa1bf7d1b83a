"""Concurrency options: fixed N, "adaptive", dicts of knobs in camelCase and snake_case, clamping."""

from __future__ import annotations

import pytest

from sync_worker.runtime.admission import DEFAULTS, resolve_concurrency


def test_fixed_n_is_never_gated() -> None:
    config = resolve_concurrency(8)
    assert (config.mode, config.limit, config.min, config.max, config.capacity) == ("fixed", 8, 8, 8, 8)
    assert not config.adaptive and not config.gated
    assert resolve_concurrency("4").limit == 4  # the CLI's spelling


def test_adaptive_defaults_are_the_seed_table() -> None:
    config = resolve_concurrency("adaptive")
    assert config.mode == "adaptive" and config.gated
    assert (config.min, config.max, config.limit) == (1, 32, 1)  # start = min
    assert config.ram_ceiling_pct == 85.0
    assert config.ram_admit_pct == 75.0
    assert config.ram_resume_pct == 65.0
    assert config.ram_admission is True
    assert config.admission_poll_ms == 250
    assert config.admission_max_wait_ms == 0
    assert config.grow_headroom_ticks == 3
    assert config.subtract_page_cache is True
    assert config.step_cost_tracking is True
    assert config.cpu_ceiling_pct is None
    assert config.tick_ms == 2000
    assert resolve_concurrency({}) == config
    assert DEFAULTS["max"] == 32 and DEFAULTS["tick_ms"] == 2000


@pytest.mark.parametrize("camel,snake,value,attribute", [
    ("ramCeilingPct", "ram_ceiling_pct", 90, "ram_ceiling_pct"),
    ("ramAdmitPct", "ram_admit_pct", 70, "ram_admit_pct"),
    ("ramResumePct", "ram_resume_pct", 50, "ram_resume_pct"),
    ("ramAdmission", "ram_admission", False, "ram_admission"),
    ("admissionPollMs", "admission_poll_ms", 10, "admission_poll_ms"),
    ("admissionMaxWaitMs", "admission_max_wait_ms", 5000, "admission_max_wait_ms"),
    ("growHeadroomTicks", "grow_headroom_ticks", 5, "grow_headroom_ticks"),
    ("subtractPageCache", "subtract_page_cache", False, "subtract_page_cache"),
    ("stepCostTracking", "step_cost_tracking", False, "step_cost_tracking"),
    ("cpuCeilingPct", "cpu_ceiling_pct", 80, "cpu_ceiling_pct"),
    ("tickMs", "tick_ms", 500, "tick_ms"),
])
def test_every_knob_in_both_spellings(camel: str, snake: str, value: object, attribute: str) -> None:
    assert getattr(resolve_concurrency({camel: value}), attribute) == value
    assert getattr(resolve_concurrency({snake: value}), attribute) == value


def test_bounds_and_start_are_clamped() -> None:
    assert (resolve_concurrency({"min": 4, "max": 2}).max) == 4  # max < min means max = min
    config = resolve_concurrency({"min": 2, "max": 8, "start": 20})
    assert config.limit == 8
    assert resolve_concurrency({"min": 2, "max": 8, "start": 1}).limit == 2
    assert resolve_concurrency({"min": 3, "max": 8}).limit == 3
    assert resolve_concurrency({"mode": "adaptive", "max": 4}).max == 4  # mode is accepted and ignored


def test_marks_are_clamped_downwards() -> None:
    config = resolve_concurrency({"ramCeilingPct": 60})
    assert (config.ram_ceiling_pct, config.ram_admit_pct, config.ram_resume_pct) == (60, 60, 60)
    config = resolve_concurrency({"ramAdmitPct": 50})
    assert (config.ram_admit_pct, config.ram_resume_pct) == (50, 50)


def test_minimums_of_poll_wait_and_ticks() -> None:
    config = resolve_concurrency({"admissionPollMs": 0, "admissionMaxWaitMs": -5, "growHeadroomTicks": 0})
    assert (config.admission_poll_ms, config.admission_max_wait_ms, config.grow_headroom_ticks) == (1, 0, 1)


@pytest.mark.parametrize("bad,error", [
    (0, ValueError), (-1, ValueError), ("fast", ValueError), ({"maxx": 3}, ValueError),
    ({"ramAdmitPct": "high"}, ValueError), ({"ramAdmission": "yes"}, ValueError), ({"max": 2.5}, ValueError),
    (True, TypeError), (2.0, TypeError), ([4], TypeError),
])
def test_bad_options_get_clear_errors(bad: object, error: type) -> None:
    with pytest.raises(error):
        resolve_concurrency(bad)  # type: ignore[arg-type]
