"""``sync_worker.Client`` has every public method of ``durable_workflow.sync.Client`` 2.12, same shape.

For the client and each handle class: every public method of the published facade exists on
ours with the same parameter names, in the same order, of the same kind (positional vs
keyword-only) and with the same defaults; our extra parameters are optional and come after.
Result dataclasses carry every field of the SDK's, in order. The few deliberate relaxations
(documented in docs/interop.md) are listed here, so a new difference fails the test.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Dict, List, Set, Tuple

import pytest

from tests._sdk_missing import SDK_MISSING

sdk_sync = pytest.importorskip("durable_workflow.sync", reason=SDK_MISSING)

from sync_worker import client as ours  # noqa: E402

PAIRS = [
    (sdk_sync.Client, ours.Client),
    (sdk_sync.SyncWorkflowHandle, ours.WorkflowHandle),
    (sdk_sync.SyncScheduleHandle, ours.ScheduleHandle),
    (sdk_sync.SyncStandaloneActivityHandle, ours.StandaloneActivityHandle),
]

# (method, parameter): ours accepts it positionally too (the SDK: keyword-only), or has a default
RELAXED: Dict[Tuple[str, str], str] = {
    ("start_workflow", "workflow_type"): "positional allowed: start_workflow('greeter', 'ada', task_queue=...)",
    ("start_workflow", "workflow_id"): "optional: a random id when omitted",
    ("start_activity", "activity_type"): "positional allowed: start_activity('greet', 'ada', task_queue=...)",
}

def _public_methods(cls: type) -> List[str]:
    return sorted(name for name, value in vars(cls).items()
                  if callable(value) and (not name.startswith("_") or name == "__init__"))


@pytest.mark.parametrize("sdk_cls,our_cls", PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_every_sdk_method_exists_with_the_same_parameters(sdk_cls: type, our_cls: type) -> None:
    problems: List[str] = []
    for name in _public_methods(sdk_cls):
        if name == "__init__" and sdk_cls is not sdk_sync.Client:
            continue  # the SDK's handles wrap an async handle; ours are built by the client
        label = "Client.__init__" if name == "__init__" else name
        ours_fn = getattr(our_cls, name, None)
        if ours_fn is None:
            problems.append(f"{our_cls.__name__}.{name} is missing")
            continue
        sdk_params = list(inspect.signature(getattr(sdk_cls, name)).parameters.values())[1:]
        our_params = list(inspect.signature(ours_fn).parameters.values())[1:]
        our_by_name = {p.name: p for p in our_params}
        our_order = [p.name for p in our_params if p.kind is not inspect.Parameter.VAR_POSITIONAL]
        sdk_order = [p.name for p in sdk_params]
        if our_order[:len(sdk_order)] != sdk_order:
            problems.append(f"{name}: parameters {our_order} do not start with the SDK's {sdk_order}")
        for param in sdk_params:
            mine = our_by_name.get(param.name)
            if mine is None:
                continue
            relaxed = (label, param.name) in RELAXED
            if mine.kind != param.kind and not relaxed:
                problems.append(f"{name}({param.name}): kind {mine.kind.name} != SDK {param.kind.name}")
            if mine.default != param.default and not relaxed:
                problems.append(f"{name}({param.name}): default {mine.default!r} != SDK {param.default!r}")
        for extra in our_params:
            if extra.name not in {p.name for p in sdk_params} and extra.kind not in (
                    inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD) and \
                    extra.default is inspect.Parameter.empty:
                problems.append(f"{name}: our extra parameter {extra.name} must be optional")
    assert not problems, "\n".join(problems)


def _sdk_result_classes() -> List[type]:
    return [value for name, value in vars(sdk_sync).items()
            if isinstance(value, type) and dataclasses.is_dataclass(value) and hasattr(ours, name)]


@pytest.mark.parametrize("sdk_cls", _sdk_result_classes(), ids=lambda c: c.__name__)
def test_result_dataclasses_have_the_sdk_fields_in_order(sdk_cls: type) -> None:
    our_cls = getattr(ours, sdk_cls.__name__)
    sdk_fields = [f.name for f in dataclasses.fields(sdk_cls)]
    our_fields = [f.name for f in dataclasses.fields(our_cls)]
    seen: Set[str] = set(our_fields)
    assert [f for f in sdk_fields if f not in seen] == []
    # the SDK's fields keep their relative order (our additions may sit between them only after them)
    assert [f for f in our_fields if f in sdk_fields] == sdk_fields


def test_every_name_the_sdk_facade_exports_for_results_is_importable_from_ours() -> None:
    wanted = {name for name, value in vars(sdk_sync).items()
              if isinstance(value, type) and (dataclasses.is_dataclass(value) or name.endswith("Handle"))}
    assert "ScheduleSpec" in wanted and "SyncWorkflowHandle" in wanted
    missing = sorted(name for name in wanted if not hasattr(ours, name))
    assert missing == []


def test_dataclass_results_still_read_like_the_old_dicts() -> None:
    described = ours.StandaloneActivityExecution.from_dict({"activity_id": "a1", "status": "completed",
                                                            "last_heartbeat_at": "t"})
    assert described.status == described["status"] == "completed"
    assert described.get("last_heartbeat_at") == "t" and described.get("missing") is None
    workers: Any = ours.WorkerList.from_dict({"workers": [{"worker_id": "w1"}]})
    assert workers.workers[0].worker_id == "w1" and workers["workers"][0]["worker_id"] == "w1"
