"""Replayer, replay_history and the history loaders: each non-determinism with its event and code line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from sync_worker import payloads, workflow
from sync_worker.errors import CodePosition, DuplicateRegistrationError, NonDeterministicReplayError
from sync_worker.testing import (
    Replayer,
    load_history_files,
    replay_history,
    replay_history_file,
)


def ev(number: int, kind: str, **payload: Any) -> Dict[str, Any]:
    """History event ``number`` (``payload["sequence"]`` is the workflow sequence of its step)."""
    return {"id": f"e{number}", "sequence": number, "event_type": kind, "payload": payload}


def order_history(order: str = "o-1") -> List[Dict[str, Any]]:
    """What the dev server records for ``Checkout`` below (reserve, a timer, charge)."""
    return [
        ev(1, "WorkflowStarted", workflow_type="orders.checkout", workflow_id=f"wf-{order}", workflow_run_id="run-1",
           arguments=payloads.envelope([order]), payload_codec="avro", timestamp="2026-01-01T00:00:00.000000Z"),
        ev(2, "ActivityScheduled", sequence=1, activity_type="orders.reserve"),
        ev(3, "ActivityCompleted", sequence=1, activity_type="orders.reserve",
           result=payloads.envelope(f"reserved {order}"), payload_codec="avro"),
        ev(4, "TimerScheduled", sequence=2, delay_seconds=3600),
        ev(5, "TimerFired", sequence=2, delay_seconds=3600),
        ev(6, "ActivityScheduled", sequence=3, activity_type="orders.charge"),
        ev(7, "ActivityCompleted", sequence=3, activity_type="orders.charge",
           result=payloads.envelope(f"charged {order}"), payload_codec="avro"),
    ]


@workflow.defn(name="orders.checkout")
class Checkout:
    def run(self, ctx: Any, order: str) -> Any:
        reserved = yield ctx.schedule_activity("orders.reserve", [order])
        yield ctx.sleep(3600)
        charged = yield ctx.schedule_activity("orders.charge", [order])
        return [reserved, charged]


@workflow.defn(name="orders.checkout")
class CheckoutChargeFirst:  # the deliberate change: charge before reserving
    def run(self, ctx: Any, order: str) -> Any:
        charged = yield ctx.schedule_activity("orders.charge", [order])
        yield ctx.sleep(3600)
        reserved = yield ctx.schedule_activity("orders.reserve", [order])
        return [reserved, charged]


def _steps(ctx: Any, order: str) -> Any:
    yield ctx.schedule_activity("orders.reserve", [order])
    yield ctx.schedule_activity("orders.charge", [order])  # the timer is gone


@workflow.defn(name="orders.checkout")
class CheckoutWithoutTimer:
    def run(self, ctx: Any, order: str) -> Any:
        yield from _steps(ctx, order)
        return "done"


@workflow.defn(name="orders.checkout")
class CheckoutStopsEarly:
    def run(self, ctx: Any, order: str) -> Any:
        reserved = yield ctx.schedule_activity("orders.reserve", [order])
        return [reserved]


@workflow.defn(name="other.type")
class Other:
    def run(self, ctx: Any) -> Any:
        return None


def test_unchanged_code_replays_and_reaches_the_recorded_result() -> None:
    result = Replayer(workflows=[Checkout]).replay(order_history())
    assert result.commands[-1].result == ["reserved o-1", "charged o-1"]  # type: ignore[union-attr]


def test_a_changed_step_names_the_event_and_the_yield_line() -> None:
    check = Replayer(workflows=[CheckoutChargeFirst]).check(order_history(), source="o-1.json")
    assert check.status == "nondeterministic"
    assert isinstance(check.error, NonDeterministicReplayError)
    assert check.error.workflow_sequence == 1
    assert check.event_number == 2 and check.event is not None and check.event["event_type"] == "ActivityScheduled"
    position = check.code_position
    assert isinstance(position, CodePosition) and position.filename == __file__
    assert position.function == "run" and not position.after
    source_line = Path(__file__).read_text().splitlines()[position.lineno - 1]
    assert 'schedule_activity("orders.charge"' in source_line
    text = check.describe()
    assert "NONDET" in text and "o-1.json" in text and "history event 2: ActivityScheduled" in text
    assert f"{__file__}:{position.lineno} in run" in text


def test_the_position_goes_through_yield_from_into_the_helper() -> None:
    check = Replayer(workflows=[CheckoutWithoutTimer]).check(order_history())
    assert check.status == "nondeterministic" and check.code_position is not None
    assert check.code_position.function == "_steps"
    line = Path(__file__).read_text().splitlines()[check.code_position.lineno - 1]
    assert 'schedule_activity("orders.charge"' in line
    assert check.event is not None and check.event["event_type"] == "TimerScheduled"


def test_code_that_returns_early_points_after_its_last_yield() -> None:
    check = Replayer(workflows=[CheckoutStopsEarly]).check(order_history())
    assert check.status == "nondeterministic" and check.code_position is not None
    assert check.code_position.after
    line = Path(__file__).read_text().splitlines()[check.code_position.lineno - 1]
    assert 'schedule_activity("orders.reserve"' in line
    assert "(run returned)" in str(check.code_position)


def test_check_all_reports_every_history_and_skips_unregistered_types() -> None:
    replayer = Replayer(workflows=[CheckoutChargeFirst, Other])
    foreign = [ev(1, "WorkflowStarted", workflow_type="not.mine", arguments=payloads.envelope([]),
                  timestamp="2026-01-01T00:00:00.000000Z")]
    report = replayer.check_all([("a", order_history("a")), ("b", order_history("b")), ("c", foreign),
                                 ("d", {"no": "events"}), ("e", OSError("unreadable"))])
    assert [c.status for c in report.checks] == ["nondeterministic", "nondeterministic", "skipped", "failed",
                                                 "failed"]
    assert not report.ok
    assert report.summary() == "5 histories: 0 replayed, 2 non-deterministic, 2 failed, 1 skipped"
    as_dict = report.to_dict()
    assert as_dict["histories"][0]["code_position"]["function"] == "run"
    assert as_dict["histories"][0]["recorded_event_types"] == ["ActivityScheduled", "ActivityCompleted"]
    json.dumps(as_dict)  # the report is JSON as it is


def test_a_clean_report_is_ok() -> None:
    report = Replayer(workflows=[Checkout]).check_all([order_history("x"), {"events": order_history("y")}])
    assert report.ok and len(report.replayed) == 2
    assert [c.workflow_id for c in report.checks] == ["wf-x", "wf-y"]


def test_an_export_bundle_gives_type_ids_and_events() -> None:
    bundle = {"schema": "durable-workflow.v2.history-export",
              "workflow": {"instance_id": "order-9", "run_id": "run-9", "workflow_type": "orders.checkout"},
              "history_events": order_history()}
    check = Replayer(workflows=[Checkout]).check(bundle)
    assert (check.status, check.workflow_id, check.run_id) == ("replayed", "order-9", "run-9")


def test_replayer_needs_workflows_and_refuses_two_under_one_name() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Replayer(workflows=[])
    with pytest.raises(DuplicateRegistrationError, match=r"Checkout.*CheckoutChargeFirst"):
        Replayer(workflows=[Checkout, CheckoutChargeFirst])
    with pytest.raises(ValueError, match="workflow_type is required"):
        Replayer(workflows=[Checkout, Other]).replay([])


def test_replay_history_raises_what_the_worker_would(tmp_path: Path) -> None:
    with pytest.raises(NonDeterministicReplayError) as raised:
        replay_history(CheckoutChargeFirst, order_history(), ["o-1"])
    assert raised.value.code_position is not None
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"events": order_history()}))
    assert replay_history_file(Checkout, path, ["o-1"]).commands[-1].result == [  # type: ignore[union-attr]
        "reserved o-1", "charged o-1"]


def test_history_files_come_from_files_and_folders(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "one.json").write_text(json.dumps(order_history("1")))
    (tmp_path / "runs" / "two.json").write_text(json.dumps({"events": order_history("2")}))
    (tmp_path / "runs" / "notes.txt").write_text("not a history")
    (tmp_path / "broken.json").write_text("{ not json")
    loaded = list(load_history_files([tmp_path / "runs", tmp_path / "broken.json"]))
    assert [Path(source).name for source, _ in loaded] == ["one.json", "two.json", "broken.json"]
    assert isinstance(loaded[2][1], ValueError)
    report = Replayer(workflows=[Checkout]).check_all(loaded)
    assert [c.status for c in report.checks] == ["replayed", "replayed", "failed"]
