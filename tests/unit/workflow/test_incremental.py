"""Sticky resume == cold replay, byte for byte, on every golden and replay-regression history.

Each history is cut at every event boundary, at its workflow-task boundaries, and at every
starting point followed by one resume with the rest (``tests/_sticky_equivalence``). Hand-built
histories below cover what the corpus lacks, including the cases where resuming must decline
(fall back to a cold replay). Histories recorded on the dev server -- condition waits released
by signals, parallel activity groups, message streams and updates -- are walked the same way
in ``tests/e2e/test_sticky_shapes.py``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from sync_worker import payloads
from sync_worker.workflow import WorkflowRegistry
from sync_worker.workflow.incremental import resume, start
from tests._fixtures import fixture_paths, fixtures_dir, load_fixture
from tests._sticky_equivalence import cold, every_cut, walk
from tests.conformance.test_replay_regressions import PHP_DIR, REGISTRY, SDK_DIR
from tests.unit.workflow._helpers import activity_done, ev, started
from tests.unit.workflow.golden_workflows import ALL

GOLDEN_DIR = "sdk-python/tests/fixtures/golden_history"
PHP_CASES = ("parallel-timer-group-reverse-completion.json", "parallel-child-group-final-sibling-release.json",
             "workflow-fiber-activity-history-sequence.json")
GOLDEN = WorkflowRegistry(ALL)


def _corpus() -> Iterator[Tuple[str, type, List[Any], List[Dict[str, Any]], Optional[str]]]:
    for path in fixture_paths(GOLDEN_DIR):
        data = load_fixture(f"{GOLDEN_DIR}/{path.name}")
        codec = data["source"].get("payload_codec")
        if codec != "avro":
            continue  # pre-Avro histories are refused as a whole (test_golden_history)
        for case in data["cases"]:
            cls = GOLDEN.get(case["workflow_type"])
            assert cls is not None
            yield f"golden:{path.stem}:{case['name']}", cls, list(case["start_input"]), case["history"], codec
    for path in fixture_paths(SDK_DIR):
        fixture = load_fixture(f"{SDK_DIR}/{path.name}")
        if fixture["workflow"].get("payload_codec") != "avro":
            continue
        yield from _regression(f"sdk:{path.stem}", fixture)
    for name in PHP_CASES:
        yield from _regression(f"php:{name}", load_fixture(f"{PHP_DIR}/{name}"))


def _regression(label: str, fixture: Dict[str, Any]) -> Iterator[Any]:
    spec = fixture["workflow"]
    cls = REGISTRY.get(spec["type"])
    assert cls is not None
    yield label, cls, list(spec.get("input", spec.get("arguments", []))), fixture["history"], "avro"


def _cases() -> List[Any]:
    if not fixture_paths(GOLDEN_DIR):
        return [pytest.param(None, id="fixtures-missing")]
    return [pytest.param(case, id=case[0]) for case in _corpus()]


@pytest.mark.parametrize("case", _cases())
def test_sticky_resume_equals_cold_replay_at_every_cut(case: Any) -> None:
    fixtures_dir()
    _, cls, args, history, codec = case
    every_cut(cls, args, history, codec)


def _shape(history: List[Dict[str, Any]]) -> str:
    payloads_ = [event.get("payload") or {} for event in history]
    if any(str(event.get("event_type", "")).startswith("ConditionWait") for event in history):
        return "condition wait"
    if any("parallel_group_id" in payload or "parallel_group_path" in payload for payload in payloads_):
        return "parallel group"
    return "plain"


def test_the_corpus_exercises_the_sticky_path() -> None:
    """Not a vacuous property: every history, condition waits and parallel groups included, is
    resumed at every cut where the run stays suspended -- a kept state never declines -- except
    where the previous task's commands are missing from the history (the PHP fiber case records
    no version marker, so a cold replay takes another path)."""
    fixtures_dir()
    resumed_by_shape: Dict[str, int] = {}
    for label, cls, args, history, codec in _corpus():
        done = walk(cls, args, history, codec, list(range(1, len(history) + 1)))
        if "fiber" not in label:
            assert done.declined == [], (label, done)
        resumed_by_shape[_shape(history)] = resumed_by_shape.get(_shape(history), 0) + done.resumed
    assert resumed_by_shape.get("condition wait", 0) >= 30, resumed_by_shape
    assert resumed_by_shape.get("parallel group", 0) >= 9, resumed_by_shape
    assert resumed_by_shape.get("plain", 0) >= 1, resumed_by_shape


# -- hand-built histories for the cases the corpus lacks ------------------------------------

from sync_worker import workflow  # noqa: E402


@workflow.defn(name="sticky-mixed")
class Mixed:
    def __init__(self) -> None:
        self.seen: List[str] = []

    @workflow.signal("note")
    def note(self, text: str) -> None:
        self.seen.append(text)

    def run(self, ctx: Any, count: int) -> Any:
        total = 0
        for step in range(count):
            token = yield ctx.side_effect(lambda step=step: f"token-{step}")
            version = yield ctx.get_version("change", 0, 1)
            total += yield ctx.schedule_activity("add", [step, token, version])
            yield ctx.start_timer(1)
        return {"total": total, "seen": list(self.seen)}


def _mixed_history(count: int) -> List[Dict[str, Any]]:
    events = [started()]
    sequence = 0
    for step in range(count):
        sequence += 1
        events.append(ev("SideEffectRecorded", sequence=sequence, result=payloads.envelope(f"token-{step}")))
        sequence += 1
        events.append(ev("VersionMarkerRecorded", sequence=sequence, change_id="change", version=1,
                         min_supported=0, max_supported=1))
        sequence += 1
        events.extend(activity_done(sequence, "add", step * 10))
        if step % 2 == 0:
            events.append(ev("SignalReceived", signal_name="note", value=payloads.envelope([f"s{step}"])))
        sequence += 1
        events.append(ev("TimerScheduled", sequence=sequence, delay_seconds=1))
        events.append(ev("TimerFired", sequence=sequence))
    return events


def test_side_effects_versions_signals_and_timers_resume_like_cold() -> None:
    history = _mixed_history(6)
    done = walk(Mixed, [6], history, "avro", list(range(1, len(history) + 1)))
    assert done.resumed > len(history) // 2
    final = cold(Mixed, history, [6], "avro")
    assert final is not None and "complete_workflow" in final


def test_a_side_effect_recorded_with_other_bytes_forces_cold() -> None:
    history = _mixed_history(2)
    cut = 1
    result, state = start(Mixed, history[:cut], [2], run_id="r")
    assert state is not None and result.commands
    tampered = [dict(history[1], payload=dict(history[1]["payload"], result=payloads.envelope("other")))]
    assert resume(state, tampered + history[2:4]) is None


def test_cancel_flag_change_and_condition_waits_decline() -> None:
    history = _mixed_history(1)
    _, state = start(Mixed, history[:1], [1], run_id="r")
    assert state is not None
    assert resume(state, history[1:3], cancel_requested=True) is None
    _, state = start(Mixed, history[:1], [1], run_id="r")
    assert state is not None
    assert resume(state, [ev("ConditionWaitOpened", sequence=9, condition_wait_id="w")]) is None
