"""``sync-worker activity ...``: standalone activities (start, list, describe, result, cancel)."""

from __future__ import annotations

from typing import Optional

import click

from .. import errors
from ..client.base import segment
from ._common import EXIT_FAILURE, Context, command, compact, fail, input_arguments, json_option, show_table


@click.group("activity")
def activity_group() -> None:
    """Run and inspect standalone activities."""


@command(activity_group, "start")
@click.option("--type", "-t", "activity_type", required=True, help="Activity type.")
@click.option("--activity-id", default=None, help="Activity id (the server chooses one if omitted).")
@click.option("--task-queue", default="default", show_default=True)
@click.option("--input", "-i", "input_json", default=None, help="Arguments JSON.")
@click.option("--activity-class", default=None)
@click.option("--business-key", default=None)
@click.option("--retry-policy", default=None, help='JSON, e.g. {"max_attempts": 3}.')
@click.option("--start-to-close-timeout", type=int, default=None)
@click.option("--schedule-to-start-timeout", type=int, default=None)
@click.option("--schedule-to-close-timeout", type=int, default=None)
@click.option("--heartbeat-timeout", type=int, default=None)
def start(ctx: Context, activity_type: str, activity_id: Optional[str], task_queue: str, input_json: Optional[str],
          activity_class: Optional[str], business_key: Optional[str], retry_policy: Optional[str],
          start_to_close_timeout: Optional[int], schedule_to_start_timeout: Optional[int],
          schedule_to_close_timeout: Optional[int], heartbeat_timeout: Optional[int]) -> None:
    """Start a standalone activity."""
    body = compact(activity_type=activity_type, task_queue=task_queue, activity_id=activity_id,
                   activity_class=activity_class, business_key=business_key, input=input_arguments(input_json),
                   retry_policy=json_option(retry_policy, "--retry-policy"),
                   start_to_close_timeout_seconds=start_to_close_timeout,
                   schedule_to_start_timeout_seconds=schedule_to_start_timeout,
                   schedule_to_close_timeout_seconds=schedule_to_close_timeout,
                   heartbeat_timeout_seconds=heartbeat_timeout)
    ctx.emit(ctx.call("POST", "/activities", body=body))


@command(activity_group, "list")
@click.option("--status", default=None, help="running, completed or failed.")
@click.option("--limit", type=int, default=None)
@click.option("--next-page-token", default=None)
def list_(ctx: Context, status: Optional[str], limit: Optional[int], next_page_token: Optional[str]) -> None:
    """List standalone activities."""
    page = ctx.call("GET", "/activities", params=compact(status=status, page_size=limit,
                                                         next_page_token=next_page_token))
    ctx.emit(page, lambda value: show_table(value.get("activities") or [], [
        "activity_id", "activity_type", "status", "activity_status", "task_queue", "attempt_count"]))


@command(activity_group, "describe")
@click.argument("activity_id")
def describe(ctx: Context, activity_id: str) -> None:
    """Describe a standalone activity."""
    ctx.emit(ctx.call("GET", f"/activities/{segment(activity_id)}"))


@command(activity_group, "result")
@click.argument("activity_id")
@click.option("--timeout", type=float, default=None, help="Seconds to wait (default: until it closes).")
def result(ctx: Context, activity_id: str, timeout: Optional[float]) -> None:
    """Wait for a standalone activity and print its result (exit 1 and its failure if it failed)."""
    import json

    try:
        value = ctx.client.get_activity_result(activity_id, timeout=timeout, poll_interval=0.5)
    except errors.StandaloneActivityFailed as exc:
        if ctx.as_json:
            click.echo(json.dumps({"activity_id": activity_id, "status": "failed", "failure_type": exc.failure_type,
                                   "message": exc.failure_message}, indent=2))
        click.echo(str(exc), err=True)
        raise SystemExit(EXIT_FAILURE) from None
    except (errors.WorkflowCancelled, errors.WorkflowTerminated) as exc:
        click.echo(f"activity {activity_id} did not complete: {exc}", err=True)
        raise SystemExit(EXIT_FAILURE) from None
    except (TimeoutError, errors.DurableWorkflowError) as exc:
        fail(ctx, exc)
    payload = {"activity_id": activity_id, "status": "completed", "result": value}
    click.echo(json.dumps(payload if ctx.as_json else value, indent=2 if ctx.as_json else None,
                          ensure_ascii=False, default=str))


@command(activity_group, "cancel")
@click.argument("activity_id")
@click.option("--reason", default=None)
def cancel(ctx: Context, activity_id: str, reason: Optional[str]) -> None:
    """Cancel a standalone activity (through its host run)."""
    ctx.emit(ctx.call("POST", f"/workflows/{segment(activity_id)}/cancel", body=compact(reason=reason)))
