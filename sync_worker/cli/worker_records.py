"""``sync-worker worker ...``: the server's worker records (list, describe, deregister).

(``sync-worker run`` runs a worker; this group only reads and retires records.)
"""

from __future__ import annotations

from typing import Optional

import click

from ..client.base import segment
from ._common import Context, command, compact, show_table


@click.group("worker")
def worker_group() -> None:
    """Inspect registered workers."""


@command(worker_group, "list")
@click.option("--task-queue", default=None)
@click.option("--status", default=None, help="active, draining, stale, ...")
def list_(ctx: Context, task_queue: Optional[str], status: Optional[str]) -> None:
    """List registered workers."""
    ctx.emit(ctx.call("GET", "/workers", params=compact(task_queue=task_queue, status=status)),
             lambda value: show_table(value.get("workers") or [], [
                 "worker_id", "task_queue", "status", "runtime", "sdk_version", "build_id", "last_heartbeat_at"]))


@command(worker_group, "describe")
@click.argument("worker_id")
def describe(ctx: Context, worker_id: str) -> None:
    """Describe one worker."""
    ctx.emit(ctx.call("GET", f"/workers/{segment(worker_id)}"))


@command(worker_group, "deregister")
@click.argument("worker_id")
def deregister(ctx: Context, worker_id: str) -> None:
    """Retire a stale worker record."""
    ctx.emit(ctx.call("DELETE", f"/workers/{segment(worker_id)}"))
