"""``sync-worker schedule ...``: create, list, describe, update, pause, resume, trigger, backfill,
delete, history, with the Durable Workflow CLI's options (``dw schedule:*``)."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import click

from ..client.base import segment
from ._common import Context, command, compact, input_arguments, json_option, key_values, show_table, usage


@click.group("schedule")
def schedule_group() -> None:
    """Create and operate schedules."""


def _sc(schedule_id: str) -> str:
    return f"/schedules/{segment(schedule_id)}"


def _spec(cron: Tuple[str, ...], interval: Tuple[str, ...], timezone: Optional[str]) -> Optional[Dict[str, Any]]:
    if not cron and not interval:
        return None
    return compact(cron_expressions=list(cron) or None, intervals=[{"every": i} for i in interval] or None,
                   timezone=timezone)


def _action(workflow_type: Optional[str], task_queue: Optional[str], input_json: Optional[str],
            execution_timeout: Optional[int], run_timeout: Optional[int]) -> Dict[str, Any]:
    return compact(workflow_type=workflow_type, task_queue=task_queue, input=input_arguments(input_json),
                   execution_timeout_seconds=execution_timeout, run_timeout_seconds=run_timeout)


def _fields(fn: Any) -> Any:
    for option in reversed([
        click.option("--workflow-type", "-t", default=None, help="Workflow type each fire starts."),
        click.option("--cron", "-c", multiple=True, help="Cron expression (repeatable)."),
        click.option("--interval", multiple=True, help="ISO-8601 duration, e.g. PT30M (repeatable)."),
        click.option("--task-queue", default=None),
        click.option("--input", "-i", "input_json", default=None, help="Workflow input JSON."),
        click.option("--execution-timeout", type=int, default=None),
        click.option("--run-timeout", type=int, default=None),
        click.option("--overlap-policy", default=None,
                     help="skip, buffer_one, buffer_all, cancel_other, terminate_other, allow_all"),
        click.option("--jitter", type=int, default=None, help="Seconds of random delay per fire."),
        click.option("--max-runs", type=int, default=None),
        click.option("--memo", default=None, help="Memo JSON object."),
        click.option("--search-attr", multiple=True, help="key=value (repeatable)."),
        click.option("--note", default=None),
    ]):
        fn = option(fn)
    return fn


@command(schedule_group, "create")
@click.option("--schedule-id", default=None, help="Schedule id (the server chooses one if omitted).")
@_fields
@click.option("--timezone", default="UTC", show_default=True)
@click.option("--paused", is_flag=True, help="Create it paused.")
def create(ctx: Context, schedule_id: Optional[str], workflow_type: Optional[str], cron: Tuple[str, ...],
           interval: Tuple[str, ...], task_queue: Optional[str], input_json: Optional[str],
           execution_timeout: Optional[int], run_timeout: Optional[int], overlap_policy: Optional[str],
           jitter: Optional[int], max_runs: Optional[int], memo: Optional[str], search_attr: Tuple[str, ...],
           note: Optional[str], timezone: str, paused: bool) -> None:
    """Create a schedule."""
    if not workflow_type:
        usage("--workflow-type is required")
    spec = _spec(cron, interval, timezone)
    if spec is None:
        usage("either --cron or --interval is required")
    body = compact(schedule_id=schedule_id, spec=spec,
                   action=_action(workflow_type, task_queue, input_json, execution_timeout, run_timeout),
                   overlap_policy=overlap_policy, jitter_seconds=jitter, max_runs=max_runs,
                   memo=json_option(memo, "--memo"), search_attributes=key_values(search_attr, "--search-attr"),
                   paused=True if paused else None, note=note)
    ctx.emit(ctx.call("POST", "/schedules", body=body))


@command(schedule_group, "update")
@click.argument("schedule_id")
@_fields
@click.option("--timezone", default=None)
def update(ctx: Context, schedule_id: str, workflow_type: Optional[str], cron: Tuple[str, ...],
           interval: Tuple[str, ...], task_queue: Optional[str], input_json: Optional[str],
           execution_timeout: Optional[int], run_timeout: Optional[int], overlap_policy: Optional[str],
           jitter: Optional[int], max_runs: Optional[int], memo: Optional[str], search_attr: Tuple[str, ...],
           note: Optional[str], timezone: Optional[str]) -> None:
    """Change the given fields of a schedule."""
    action = _action(workflow_type, task_queue, input_json, execution_timeout, run_timeout)
    body = compact(spec=_spec(cron, interval, timezone), action=action or None, overlap_policy=overlap_policy,
                   jitter_seconds=jitter, max_runs=max_runs, memo=json_option(memo, "--memo"),
                   search_attributes=key_values(search_attr, "--search-attr"), note=note)
    if not body:
        usage("nothing to update: give --cron, --interval, --workflow-type, --overlap-policy, --note, ...")
    ctx.emit(ctx.call("PUT", _sc(schedule_id), body=body))


@command(schedule_group, "list")
@click.option("--status", default=None)
@click.option("--workflow-type", default=None)
@click.option("--query", default=None)
@click.option("--limit", type=int, default=None)
@click.option("--next-page-token", default=None)
def list_(ctx: Context, status: Optional[str], workflow_type: Optional[str], query: Optional[str],
          limit: Optional[int], next_page_token: Optional[str]) -> None:
    """List schedules."""
    page = ctx.call("GET", "/schedules", params=compact(status=status, workflow_type=workflow_type, query=query,
                                                        page_size=limit, next_page_token=next_page_token))
    ctx.emit(page, lambda value: show_table(
        [dict(s, workflow_type=(s.get("action") or {}).get("workflow_type") or s.get("workflow_type"))
         for s in value.get("schedules") or []],
        ["schedule_id", "workflow_type", "status", "overlap_policy", "fires_count", "next_fire_at"]))


@command(schedule_group, "describe")
@click.argument("schedule_id")
def describe(ctx: Context, schedule_id: str) -> None:
    """Describe a schedule."""
    ctx.emit(ctx.call("GET", _sc(schedule_id)))


@command(schedule_group, "delete")
@click.argument("schedule_id")
def delete(ctx: Context, schedule_id: str) -> None:
    """Delete a schedule (workflows it started go on)."""
    ctx.emit(ctx.call("DELETE", _sc(schedule_id)))


def _note_command(name: str, doc: str) -> None:
    @command(schedule_group, name, help=doc)
    @click.argument("schedule_id")
    @click.option("--note", default=None)
    def run(ctx: Context, schedule_id: str, note: Optional[str]) -> None:
        ctx.emit(ctx.call("POST", f"{_sc(schedule_id)}/{name}", body=compact(note=note)))


_note_command("pause", "Stop a schedule firing.")
_note_command("resume", "Let a paused schedule fire again.")


@command(schedule_group, "trigger")
@click.argument("schedule_id")
@click.option("--overlap-policy", default=None, help="For this fire only.")
def trigger(ctx: Context, schedule_id: str, overlap_policy: Optional[str]) -> None:
    """Fire a schedule now."""
    ctx.emit(ctx.call("POST", f"{_sc(schedule_id)}/trigger", body=compact(overlap_policy=overlap_policy)))


@command(schedule_group, "backfill")
@click.argument("schedule_id")
@click.option("--start-time", required=True, help="ISO-8601, inclusive.")
@click.option("--end-time", required=True, help="ISO-8601, exclusive.")
@click.option("--overlap-policy", default=None)
def backfill(ctx: Context, schedule_id: str, start_time: str, end_time: str, overlap_policy: Optional[str]) -> None:
    """Fire for every moment of a past window the schedule would have fired."""
    body = compact(start_time=start_time, end_time=end_time, overlap_policy=overlap_policy)
    ctx.emit(ctx.call("POST", f"{_sc(schedule_id)}/backfill", body=body))


@command(schedule_group, "history")
@click.argument("schedule_id")
@click.option("--limit", type=int, default=None)
@click.option("--after-sequence", type=int, default=None)
def history(ctx: Context, schedule_id: str, limit: Optional[int], after_sequence: Optional[int]) -> None:
    """A schedule's audit events."""
    page = ctx.call("GET", f"{_sc(schedule_id)}/history",
                    params=compact(limit=limit, after_sequence=after_sequence))
    ctx.emit(page, lambda value: show_table(value.get("events") or [],
                                            ["sequence", "event_type", "recorded_at", "workflow_instance_id"]))
