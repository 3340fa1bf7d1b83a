"""``Task.replace(sig)``: the running task's result becomes the result of ``sig``, run in its place.

The task raises :class:`~sync_worker_celery.exceptions.Replaced`; its activity then completes with
a *replacement marker* instead of a value, so the replacement is as durable as the task was:

* inside a canvas run (a chain, group or chord member, or a task with countdown/link): the
  marker carries the compiled plan of ``sig`` and the canvas workflow runs it where the task
  stood (``CanvasWorkflow._resolve``); the task's own links then get the replacement's result;
* a plain ``delay()``/``apply_async()`` task: the activity starts ``sig`` as a canvas run whose
  id is derived from the task's (``<task id>.replaced``; starting it again on a retried attempt
  finds the same run) and the marker names that run: ``AsyncResult(task id)`` follows it;
* eagerly: ``sig`` runs here and its result is the task's.

As in Celery, ``sig`` keeps its own arguments (the replaced task's input is not prepended).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery

__all__ = ["MARKER", "follow", "replacement_marker"]

MARKER = "__celery_replaced_by__"


def nest(plan: Dict[str, Any], nesting: int) -> Dict[str, Any]:
    """Mark every task of ``plan`` (not its callbacks) as run ``nesting`` replacements deep: the
    tasks see it as ``request.replaced_task_nesting``, as in Celery."""
    kind = plan.get("kind")
    if kind == "task":
        plan["meta"] = dict(plan.get("meta") or {}, replaced_task_nesting=nesting)
    elif kind == "chord":
        nest(plan["header"], nesting)
        nest(plan["body"], nesting)
    else:
        for member in plan.get("tasks") or []:
            nest(member, nesting)
    return plan


def replacement_marker(app: Celery, sig: Any, task_id: str, in_canvas: bool, queue: Optional[str],
                       nesting: int = 1) -> Dict[str, Any]:
    """The activity result standing for ``sig`` (started here when there is no canvas run to run it);
    ``nesting``: the replaced task's ``replaced_task_nesting`` plus one."""
    from sync_worker.errors import Conflict, WorkflowAlreadyStarted

    from .canvas import _first_queue, maybe_signature
    from .canvas_workflow import CANVAS_WORKFLOW, compile_plan

    sig = maybe_signature(sig, app=app)
    if in_canvas:
        return {MARKER: {"plan": nest(compile_plan(app, sig, f"{task_id}~r"), nesting)}}
    run_id = f"{task_id}.replaced"
    plan = nest(compile_plan(app, sig, run_id), nesting)
    try:
        app.client.start_workflow(CANVAS_WORKFLOW, plan, run_id, task_queue=queue or _first_queue(sig),
                                  workflow_id=run_id)
    except (WorkflowAlreadyStarted, Conflict):
        # a retried attempt: the replacement was started by the attempt before (same id)
        app.client.describe_workflow(run_id)
    return {MARKER: {"id": run_id}}


def follow(value: Any) -> Optional[str]:
    """The id of the run that replaced a plain task, when ``value`` is its replacement marker."""
    if isinstance(value, dict) and isinstance(value.get(MARKER), dict):
        run_id = value[MARKER].get("id")
        return str(run_id) if run_id else None
    return None


def plan_of(value: Any) -> Optional[Dict[str, Any]]:
    """The plan a canvas run must run in place of a member, when ``value`` is its replacement marker."""
    if isinstance(value, dict) and isinstance(value.get(MARKER), dict):
        plan = value[MARKER].get("plan")
        return plan if isinstance(plan, dict) else None
    return None
