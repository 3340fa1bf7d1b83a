"""``sync-worker task-queue ...``: list, describe, build-ids, drain, promote, resume."""

from __future__ import annotations

from typing import Any, Optional

import click

from ..client.base import segment
from ._common import Context, command, show_table


@click.group("task-queue")
def task_queue_group() -> None:
    """Inspect task queues and roll out worker builds."""


def _tq(name: str) -> str:
    return f"/task-queues/{segment(name)}"


def _status(queue: Any, kind: str) -> Any:
    return ((queue.get("admission") or {}).get(kind) or {}).get("status")


@command(task_queue_group, "list")
def list_(ctx: Context) -> None:
    """List task queues and their admission state."""
    ctx.emit(ctx.call("GET", "/task-queues"), lambda value: show_table(
        [{"name": q.get("name"), "workflow_tasks": _status(q, "workflow_tasks"),
          "activity_tasks": _status(q, "activity_tasks"),
          "pollers": ((q.get("stats") or {}).get("pollers") or {}).get("active_count")}
         for q in value.get("task_queues") or []], ["name", "workflow_tasks", "activity_tasks", "pollers"]))


@command(task_queue_group, "describe")
@click.argument("task_queue")
def describe(ctx: Context, task_queue: str) -> None:
    """Backlog, pollers, leases and admission of a queue."""
    ctx.emit(ctx.call("GET", _tq(task_queue)))


@command(task_queue_group, "build-ids")
@click.argument("task_queue")
def build_ids(ctx: Context, task_queue: str) -> None:
    """The build-id cohorts of a queue."""
    ctx.emit(ctx.call("GET", f"{_tq(task_queue)}/build-ids"), lambda value: show_table(
        value.get("build_ids") or [], ["build_id", "rollout_status", "active_worker_count", "draining_worker_count",
                                       "stale_worker_count", "last_heartbeat_at"]))


def _rollout(name: str, doc: str) -> None:
    @command(task_queue_group, name, help=doc)
    @click.argument("task_queue")
    @click.option("--build-id", default=None, help="The build (omit for the unversioned workers).")
    def run(ctx: Context, task_queue: str, build_id: Optional[str]) -> None:
        ctx.emit(ctx.call("POST", f"{_tq(task_queue)}/build-ids/{name}", body={"build_id": build_id}))


_rollout("drain", "Stop a build's workers claiming new tasks.")
_rollout("promote", "Select a build for new workflow starts.")
_rollout("resume", "Undo a drain.")
