"""Matching yielded commands against recorded steps, and parallel-group annotation (§4.5.1, §13.4)."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional, Tuple

from .. import payloads
from ..errors import ActivityFailed, ChildWorkflowFailed, NonDeterministicReplayError
from .commands import RecordVersionMarker, ScheduleActivity, StartChildWorkflow, StartTimer, UpsertMemo, WaitCondition
from .history import RecordedStep
from .local_activities import RecordLocalActivity

__all__ = ["annotate_group", "check_step", "first_failure", "group_leaves", "reshape"]

_GROUP_PREFIX = {"activity": "parallel-activities", "child": "parallel-children", "timer": "parallel-timers",
                 "condition": "parallel-conditions", "mixed": "parallel-calls"}
_MAX_GROUP_LEAVES = 1000


def first_failure(values: List[Any]) -> Optional[BaseException]:
    return next((value for value in values if isinstance(value, (ActivityFailed, ChildWorkflowFailed))), None)


def _leaf_kind(command: Any) -> str:
    if isinstance(command, (ScheduleActivity, RecordLocalActivity)):
        return "activity"
    if isinstance(command, StartTimer):
        return "timer"
    if isinstance(command, StartChildWorkflow):
        return "child"
    if isinstance(command, WaitCondition):
        raise TypeError("ordinary parallel list groups do not support WaitCondition; wait for conditions one at a time")
    raise TypeError(f"parallel groups support activities, timers, child workflows and nested lists, not {command!r}")


def group_leaves(group: List[Any], *, nested: bool = False) -> List[Any]:
    if nested and not group:
        raise ValueError("nested parallel workflow groups must contain at least one operation")
    out: List[Any] = []
    for member in group:
        if isinstance(member, list):
            out.extend(group_leaves(member, nested=True))
        else:
            _leaf_kind(member)
            out.append(member)
    if len(out) > _MAX_GROUP_LEAVES:
        raise ValueError(f"parallel workflow group exceeds the deterministic limit of {_MAX_GROUP_LEAVES} operations")
    return out


def annotate_group(group: List[Any], base: int) -> Tuple[List[Any], List[Any]]:
    """Copies of the group's leaves carrying their parallel path, and the nesting shape."""
    leaves = group_leaves(group, nested=True)
    kinds = {_leaf_kind(leaf) for leaf in leaves}
    kind = kinds.pop() if len(kinds) == 1 else "mixed"
    size = len(leaves)

    def entry(index: int) -> Dict[str, Any]:
        return {"parallel_group_id": f"{_GROUP_PREFIX[kind]}:{base}:{size}", "parallel_group_kind": kind,
                "parallel_group_base_sequence": base, "parallel_group_size": size, "parallel_group_index": index}

    annotated: List[Any] = []
    shape: List[Any] = []
    for member in group:
        position = len(annotated)
        if isinstance(member, list):
            inner, inner_shape = annotate_group(member, base + position)
            for offset, leaf in enumerate(inner):
                leaf.parallel_path.insert(0, entry(position + offset))
            annotated.extend(inner)
            shape.append(inner_shape)
        else:
            leaf = copy.copy(member)
            leaf.parallel_path = [entry(position)]
            annotated.append(leaf)
            shape.append(None)
    return annotated, shape


def reshape(shape: List[Any], values: List[Any]) -> List[Any]:
    remaining = iter(values)

    def build(level: List[Any]) -> List[Any]:
        return [next(remaining) if member is None else build(member) for member in level]

    return build(shape)


def _detail_mismatch(command: Any, step: RecordedStep) -> Optional[str]:
    details = step.details
    path, recorded_path = getattr(command, "parallel_path", None), details.get("parallel_group_path")
    if path is not None and recorded_path is not None and recorded_path != path:
        return f"Recorded parallel_group_path {recorded_path!r}, but current workflow yielded {path!r}."
    own = getattr(command, "detail_mismatch", None)
    if callable(own):
        return own(details)  # type: ignore[no-any-return]
    if isinstance(command, ScheduleActivity):
        if details.get("execution_mode") == "local":
            return "Recorded local activity cannot replay as a scheduled activity."
        recorded = details.get("activity_type")
        if isinstance(recorded, str) and recorded != command.activity_type:
            return f"Recorded activity_type {recorded!r}, but current workflow scheduled {command.activity_type!r}."
        policy = command.cancellation_policy
        wanted = str(getattr(policy, "value", policy)) if policy is not None else "try_cancel"
        if details.get("cancellation_policy", "try_cancel") != wanted:
            return (f"activity_cancellation_policy_changed: recorded {details.get('cancellation_policy')!r}, "
                    f"but current workflow requested {wanted!r}.")
    elif isinstance(command, StartChildWorkflow):
        recorded = details.get("workflow_type") or details.get("child_workflow_type")
        if isinstance(recorded, str) and recorded != command.workflow_type:
            return f"Recorded child workflow_type {recorded!r}, but current workflow started {command.workflow_type!r}."
        wanted_policies = {"parent_close_policy": "abandon", "cancellation_policy": "abandon", **command.policies()}
        for name, wanted in wanted_policies.items():
            if details.get(name, "abandon") != wanted:
                return (f"child_workflow_policy_changed: recorded {name} {details.get(name, 'abandon')!r}, "
                        f"but current workflow requested {wanted!r}.")
    elif isinstance(command, StartTimer):
        if "delay_seconds" in details and details["delay_seconds"] != command.delay_seconds:
            return (f"Recorded delay_seconds {details['delay_seconds']!r}, but current workflow "
                    f"requested {command.delay_seconds!r}.")
    elif isinstance(command, RecordVersionMarker):
        recorded = details.get("change_id")
        if isinstance(recorded, str) and recorded != command.change_id:
            return f"Recorded version change_id {recorded!r}, but current workflow requested {command.change_id!r}."
    elif isinstance(command, UpsertMemo):
        recorded = details.get("entries_identity")
        if isinstance(recorded, str) and recorded != payloads.encode(command.entries):
            return "Recorded memo entries differ from the current workflow memo update."
    return None


def check_step(command: Any, step: RecordedStep) -> None:
    """Raise ``NonDeterministicReplayError`` unless ``command`` matches the recorded ``step``."""
    if step.shape != command.shape:
        raise NonDeterministicReplayError(step.sequence, command.shape, step.event_types)
    detail = _detail_mismatch(command, step)
    if detail is not None:
        raise NonDeterministicReplayError(step.sequence, command.describe(), step.event_types, detail=detail)


