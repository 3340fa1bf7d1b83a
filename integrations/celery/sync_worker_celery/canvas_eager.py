"""Eager canvases (``task_always_eager``, ``chain(...).apply()``): the same plan, run here in order."""

from __future__ import annotations

from typing import Any, List

from . import errbacks, states
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


def _failed_id(result: Any) -> Any:
    if isinstance(result, GroupResult):
        return next((r.id for r in result.results if r.state in states.PROPAGATE_STATES), result.id)
    return result.id


def _errback(sig: Any, errback: Any, result: Any) -> None:
    """``errback(request, exc, traceback)`` (new style) or ``errback(task_id)``, as on the worker."""
    from .request import Context

    failed = result
    if isinstance(result, GroupResult):
        failed = next((r for r in result.results if r.state in states.PROPAGATE_STATES), result)
    if errback.subtask_type is None and not errback.immutable and errbacks.new_style(sig.app, errback.name):
        request = Context(id=failed.id, task=getattr(failed, "task_name", None))
        errback.clone(args=(request, failed.result, failed.traceback)).apply()
    else:
        run_eagerly(errback, _failed_id(result), True)


def _run_callbacks(sig: Any, result: Any) -> None:
    """A chain's, group's or chord's own ``link`` / ``link_error``, where the worker's canvas runs them
    (canvas_workflow.attach_callback): with the result, or with the failed task's id. A group's are
    immutable and belong to its members, as in Celery: the link runs when the first member succeeds,
    the errback once per failed member."""
    from .canvas import maybe_signature

    links = [maybe_signature(c, app=sig.app) for c in sig.options.get("link") or []]
    errback_sigs = [maybe_signature(c, app=sig.app) for c in sig.options.get("link_error") or []]
    if sig.subtask_type == "group" and isinstance(result, GroupResult):
        members = result.results
        if members and members[0].state not in states.PROPAGATE_STATES:
            for callback in links:
                run_eagerly(callback)
        for member in members:
            if member.state in states.PROPAGATE_STATES:
                for errback in errback_sigs:
                    run_eagerly(errback)
        return
    if _failed(result):
        for errback in errback_sigs:
            _errback(sig, errback, result)
    else:
        for callback in links:
            run_eagerly(callback, _value(result), True)


def run_eagerly(sig: Any, parent: Any = None, has_parent: bool = False) -> Any:
    """Run ``sig`` here; returns an ``EagerResult`` (a ``GroupResult`` of them for a group)."""
    if sig.subtask_type in ("chain", "group", "chord"):
        result = _run_compound(sig, parent, has_parent)
        _run_callbacks(sig, result)
        return result
    return _run_compound(sig, parent, has_parent)


def _run_compound(sig: Any, parent: Any = None, has_parent: bool = False) -> Any:
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
