"""Cross-check: the published SDK's replayer and ours produce the same wire commands.

Each workflow is authored once by a factory that receives the ``workflow`` module and the
error classes of either SDK, so the code is identical on both sides; the history is the
same; the SDK's commands go through its own ``commands_to_server_commands``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import pytest

from sync_worker import errors as our_errors
from sync_worker import payloads
from sync_worker import workflow as our_workflow
from tests._fixtures import fixtures_dir, load_fixture
from tests._sdk_missing import SDK_MISSING

sdk_workflow = pytest.importorskip("durable_workflow.workflow", reason=SDK_MISSING)
sdk_errors = pytest.importorskip("durable_workflow.errors", reason=SDK_MISSING)

QUEUE = "xcheck-queue"


def _classes(wf: Any, err: Any) -> Dict[str, type]:
    @wf.defn(name="x.signals")
    class Signals:
        def __init__(self) -> None:
            self.items: List[str] = []

        @wf.signal("add")
        def add(self, item: str) -> None:
            self.items.append(item)

        @wf.update("reset")
        def reset(self, marker: str) -> int:
            self.items = [marker]
            return 1

        @wf.query("items")
        def list_items(self) -> List[str]:
            return list(self.items)

        def run(self, ctx: Any) -> Any:
            first = yield ctx.schedule_activity("fetch", [len(self.items)], start_to_close_timeout=30,
                                                retry_policy=wf.ActivityRetryPolicy(max_attempts=4,
                                                                                    initial_interval_seconds=1.5,
                                                                                    maximum_interval_seconds=4))
            yield ctx.wait_condition(lambda: len(self.items) >= 2, key="two-items")
            token = yield ctx.side_effect(lambda: "token-1")
            patched = yield ctx.patched("use-v2")
            child = yield ctx.start_child_workflow("x.child", [first, token], parent_close_policy="terminate")
            return {"items": self.items, "first": first, "patched": patched, "child": child}

    @wf.defn(name="x.failing")
    class Failing:
        def run(self, ctx: Any) -> Any:
            try:
                yield ctx.schedule_activity("charge", ["card"])
            except err.ActivityFailed as failure:
                raise RuntimeError(f"charge failed: {failure}") from failure
            return "unreachable"

    @wf.defn(name="x.groups")
    class Groups:
        def run(self, ctx: Any, n: int) -> Any:
            version = yield ctx.get_version("fan-out", 1, 3)
            results = yield [ctx.schedule_activity("leaf", [i]) for i in range(n)] + [
                [ctx.start_timer(5), ctx.start_child_workflow("x.child", [])]]
            yield ctx.upsert_search_attributes({"stage": "done"})
            return ctx.continue_as_new(n + 1, version, results[0])

    return {"x.signals": Signals, "x.failing": Failing, "x.groups": Groups}


OURS = _classes(our_workflow, our_errors)
THEIRS = _classes(sdk_workflow, sdk_errors)


def _ev(kind: str, **payload: Any) -> Dict[str, Any]:
    return {"event_type": kind, "payload": payload}


def _blob(value: Any) -> str:
    return payloads.encode(value)


def _ours(name: str, history: List[Dict[str, Any]], args: List[Any]) -> List[Dict[str, Any]]:
    result = our_workflow.replay(OURS[name], history, args, workflow_id="wf-x", run_id="run-x")
    return [command.to_wire(QUEUE) for command in result.commands]


def _theirs(name: str, history: List[Dict[str, Any]], args: List[Any]) -> List[Dict[str, Any]]:
    outcome = sdk_workflow.replay(THEIRS[name], history, args, workflow_id="wf-x", run_id="run-x",
                                  payload_codec="avro")
    return list(sdk_workflow.commands_to_server_commands(outcome.commands, QUEUE))


STARTED = _ev("WorkflowStarted", timestamp="2026-01-01T00:00:00+00:00")
SIGNALS: List[Tuple[str, List[Dict[str, Any]]]] = [
    ("fresh", [STARTED]),
    ("signal before first yield", [STARTED, _ev("SignalReceived", signal_name="add", value=_blob(["a"]))]),
    ("activity pending, woken by a signal", [
        STARTED, _ev("ActivityScheduled", sequence=1, activity_type="fetch"),
        _ev("SignalReceived", signal_name="add", value=_blob(["a"]))]),
    ("wait opened, not yet satisfied (re-open)", [
        STARTED, _ev("ActivityScheduled", sequence=1, activity_type="fetch"),
        _ev("ActivityCompleted", sequence=1, result=_blob(10), payload_codec="avro"),
        _ev("ConditionWaitOpened", sequence=2, condition_wait_id="w2", condition_key="two-items"),
        _ev("SignalReceived", signal_name="add", value=_blob(["a"]))]),
    ("wait satisfied, side effect + marker + child go out together", [
        STARTED, _ev("ActivityScheduled", sequence=1, activity_type="fetch"),
        _ev("ActivityCompleted", sequence=1, result=_blob(10), payload_codec="avro"),
        _ev("ConditionWaitOpened", sequence=2, condition_wait_id="w2", condition_key="two-items"),
        _ev("SignalReceived", signal_name="add", value=_blob(["a"])),
        _ev("SignalReceived", signal_name="add", value=_blob(["b"]))]),
    ("update and signals bound to a wait and its re-open", [
        STARTED, _ev("ActivityScheduled", sequence=1, activity_type="fetch"),
        _ev("ActivityCompleted", sequence=1, result=_blob(10), payload_codec="avro"),
        _ev("ConditionWaitOpened", sequence=2, condition_wait_id="w2", condition_key="two-items"),
        _ev("UpdateApplied", sequence=2, update_name="reset", arguments=_blob(["r"])),
        _ev("SignalReceived", signal_name="add", value=_blob(["x"])),
        _ev("ConditionWaitOpened", sequence=3, condition_wait_id="w3", condition_key="two-items"),
        _ev("SignalReceived", signal_name="add", value=_blob(["y"]))]),
    ("completed", [
        STARTED, _ev("ActivityScheduled", sequence=1, activity_type="fetch"),
        _ev("ActivityCompleted", sequence=1, result=_blob(10), payload_codec="avro"),
        _ev("SignalReceived", signal_name="add", value=_blob(["a"])),
        _ev("SignalReceived", signal_name="add", value=_blob(["b"])),
        _ev("SideEffectRecorded", sequence=2, result=_blob("token-1"), payload_codec="avro"),
        _ev("VersionMarkerRecorded", sequence=3, change_id="use-v2", version=1, min_supported=-1, max_supported=1),
        _ev("ChildWorkflowScheduled", sequence=4, workflow_type="x.child", parent_close_policy="terminate"),
        _ev("ChildRunCompleted", sequence=4, result=_blob("kid"), payload_codec="avro",
            parent_close_policy="terminate")]),
]
FAILING = [
    ("activity failure chained into a workflow failure", [
        STARTED, _ev("ActivityScheduled", sequence=1, activity_type="charge"),
        _ev("ActivityFailed", sequence=1, activity_type="charge", message="declined",
            exception_type="CardDeclined", exception_class="billing.CardDeclined",
            activity_execution_id="exec-1", activity_attempt_id="att-1", non_retryable=True)]),
]


def _member(kind: str, index: int, **extra: Any) -> Dict[str, Any]:
    outer = {"parallel_group_id": "parallel-calls:2:5", "parallel_group_kind": "mixed",
             "parallel_group_base_sequence": 2, "parallel_group_size": 5, "parallel_group_index": index}
    path = [outer]
    if index >= 3:
        path.append({"parallel_group_id": "parallel-calls:5:2", "parallel_group_kind": "mixed",
                     "parallel_group_base_sequence": 5, "parallel_group_size": 2, "parallel_group_index": index - 3})
    return _ev(kind, sequence=2 + index, **path[-1], parallel_group_path=path, **extra)


MARKER = _ev("VersionMarkerRecorded", sequence=1, change_id="fan-out", version=3, min_supported=1, max_supported=3)
SCHEDULED = [_member("ActivityScheduled", i, activity_type="leaf") for i in range(3)] + [
    _member("TimerScheduled", 3, delay_seconds=5), _member("ChildWorkflowScheduled", 4, workflow_type="x.child")]
DONE = [_member("ActivityCompleted", i, activity_type="leaf", result=_blob(i * 10), payload_codec="avro")
        for i in (2, 0, 1)] + [_member("TimerFired", 3), _member("ChildRunCompleted", 4, result=_blob("kid"),
                                                                  payload_codec="avro")]
GROUPS = [
    ("fresh group with nesting", [STARTED]),
    ("group partly resolved (whole group re-emitted)", [STARTED, MARKER, *SCHEDULED, *DONE[:2]]),
    ("group resolved out of order, then continue-as-new", [
        STARTED, MARKER, *SCHEDULED, *DONE, _ev("SearchAttributesUpserted", sequence=7)]),
    ("changed code: group recorded members in another order", [STARTED, MARKER, *DONE[:1]]),
]


@pytest.mark.parametrize(("name", "args", "history"),
                         [pytest.param("x.signals", [], h, id=label) for label, h in SIGNALS]
                         + [pytest.param("x.failing", [], h, id=label) for label, h in FAILING]
                         + [pytest.param("x.groups", [3], h, id=label) for label, h in GROUPS])
def test_same_commands_as_published_sdk(name: str, args: List[Any], history: List[Dict[str, Any]]) -> None:
    assert _outcome(_ours, name, history, args) == _outcome(_theirs, name, history, args)


def _outcome(replayer: Callable[..., Any], *args: Any) -> Any:
    try:
        return replayer(*args)
    except Exception as error:  # both sides must refuse the same way
        return (type(error).__name__, str(error))


@pytest.mark.parametrize("fixture", ["server-2.0.0-rc.39-parallel-completion-order.json",
                                     "parallel-group-metadata-emission.json"])
def test_same_commands_on_regression_histories(fixture: str) -> None:
    fixtures_dir()
    data = load_fixture(f"sdk-python/tests/fixtures/replay_regressions/{fixture}")
    from tests.unit.workflow import golden_workflows as golden

    ours_cls = next(cls for cls in golden.ALL if cls.__workflow_name__ == data["workflow"]["type"])  # type: ignore[attr-defined]
    theirs_cls = sdk_workflow.defn(name=data["workflow"]["type"])(type("Theirs", (), {"run": ours_cls.run}))
    ours = [c.to_wire(QUEUE) for c in our_workflow.replay(ours_cls, data["history"], []).commands]
    theirs = sdk_workflow.commands_to_server_commands(
        sdk_workflow.replay(theirs_cls, data["history"], [], payload_codec="avro").commands, QUEUE)
    assert ours == theirs
