"""Eager canvases (``task_always_eager``, ``chain(...).apply()``): the same plan, run here in order."""

from __future__ import annotations

from typing import Any, List

from . import states
from .result import EagerResult, GroupResult

__all__ = ["run_eagerly"]


def _value(result: Any) -> Any:
    if isinstance(result, GroupResult):
        return [r.result for r in result.results]
    return result.result


def _failed(result: Any) -> bool:
    if isinstance(result, GroupResult):
        return any(r.state in states.PROPAGATE_STATES for r in result.results)
    return result.state in states.PROPAGATE_STATES


def run_eagerly(sig: Any, parent: Any = None, has_parent: bool = False) -> Any:
    """Run ``sig`` here; returns an ``EagerResult`` (a ``GroupResult`` of them for a group)."""
    from .utils import uuid

    kind = sig.subtask_type
    if kind == "chain":
        result: Any = None
        value, chained = parent, has_parent
        for member in sig.tasks:
            result = run_eagerly(member, value, chained)
            if _failed(result):
                return result
            value, chained = _value(result), True
        return result
    if kind == "group":
        members: List[Any] = [run_eagerly(m, parent, has_parent) for m in sig.tasks]
        flat: List[Any] = [m if isinstance(m, EagerResult) else EagerResult(uuid(), _value(m), states.SUCCESS)
                           for m in members]
        return GroupResult(sig.id or uuid(), flat, app=sig.app)
    if kind == "chord":
        header = run_eagerly(sig.header, parent, has_parent)
        if _failed(header):
            return header
        return run_eagerly(sig.body, _value(header), True)
    args = (parent,) if has_parent and not sig.immutable else ()
    return sig.apply(args)
