"""Result graph navigation of a canvas run: ``AsyncResult.parent`` links, as Celery gives them.

A chain's ``AsyncResult`` is its canvas run (its value is the last step's); ``result.parent`` is the
step before the last, whose ``parent`` is the step before it, down to the first task (``parent``
None). A step is read from the run's member states (a query) under the id the task ran with: a task
is an ``AsyncResult`` of its id, a group a ``GroupResult`` of its members, a chord its body's last
task, a nested chain its last step (itself linked to the steps before it).

Once the run has failed its member states cannot be queried (a failed run is not replayed to
answer a query, as with the published SDK), so every step then reads the run's failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery
    from .result import ResultBase

__all__ = ["link_parents", "step_result"]


def _steps(plan: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The chain's steps in order, nested chains flattened (Celery unrolls them too)."""
    out: List[Dict[str, Any]] = []
    for node in plan.get("tasks") or []:
        if node.get("kind") == "chain":
            out.extend(_steps(node))
        elif node.get("kind") == "chord":
            out.extend([node["header"], *(_steps(node["body"]) if node["body"].get("kind") == "chain"
                                          else [node["body"]])])
        else:
            out.append(node)
    return out


def step_result(app: Celery, node: Dict[str, Any], run_id: str) -> Optional[ResultBase]:
    """The result object standing for one step of the chain run ``run_id`` (None when it has no id)."""
    from .result import AsyncResult, GroupResult

    kind = node.get("kind")
    if kind == "task":
        if not node.get("id"):
            return None
        step = AsyncResult(str(node["id"]), app=app, task_name=node.get("name"))
        step.canvas_run = run_id  # type: ignore[attr-defined]  # its state is in the run's member states
        return step
    if kind == "group":
        members = [step_result(app, m, run_id) for m in node.get("tasks") or []]
        return GroupResult(None, [m for m in members if isinstance(m, AsyncResult)], app=app)
    if kind == "chord":
        return step_result(app, node["body"], run_id)
    steps = _steps(node)
    return step_result(app, steps[-1], run_id) if steps else None


def link_parents(app: Celery, result: ResultBase, plan: Dict[str, Any]) -> ResultBase:
    """Give ``result`` (the chain's run, standing for its last step) the ``parent`` links of the steps
    before it."""
    steps = _steps(plan)
    current = result
    run_id = str(getattr(result, "id", ""))
    for node in reversed(steps[:-1]):
        parent = step_result(app, node, run_id)
        if parent is None:
            break
        current.parent = parent
        current = parent
    return result

