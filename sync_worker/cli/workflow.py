"""``sync-worker workflow ...``: start, list, describe, history, result, signal, query, update,
cancel, terminate, and list-runs, show-run, history-export, repair, archive, redrive.

Options and request bodies are the Durable Workflow CLI's (``dw workflow:*``): ``--input`` is a
JSON document (an array is the argument list; any other value is one argument) sent as JSON.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Tuple

import click

from .. import errors
from ..client.base import segment
from ._common import (
    EXIT_FAILURE,
    Context,
    command,
    compact,
    fail,
    input_arguments,
    json_option,
    key_values,
    show_mapping,
    show_table,
)
from .payload_view import decoded_payloads


@click.group("workflow")
def workflow_group() -> None:
    """Start, inspect and message workflows."""


def _wf(workflow_id: str) -> str:
    return f"/workflows/{segment(workflow_id)}"


@command(workflow_group, "start")
@click.option("--type", "-t", "workflow_type", required=True, help="Workflow type.")
@click.option("--workflow-id", "-w", default=None, help="Workflow id (the server chooses one if omitted).")
@click.option("--business-key", default=None)
@click.option("--task-queue", default="default", show_default=True)
@click.option("--duplicate-policy", default=None, help="fail | use-existing")
@click.option("--input", "-i", "input_json", default=None, help="Input JSON (an array: the arguments).")
@click.option("--memo", default=None, help="Memo JSON object.")
@click.option("--search-attr", multiple=True, help="Search attribute key=value (repeatable).")
@click.option("--execution-timeout", type=int, default=None, help="Seconds, across all runs.")
@click.option("--run-timeout", type=int, default=None, help="Seconds, this run.")
@click.option("--wait", is_flag=True, help="Block until the workflow closes; exit 1 unless it completed.")
def start(ctx: Context, workflow_type: str, workflow_id: Optional[str], business_key: Optional[str],
          task_queue: str, duplicate_policy: Optional[str], input_json: Optional[str], memo: Optional[str],
          search_attr: Tuple[str, ...], execution_timeout: Optional[int], run_timeout: Optional[int],
          wait: bool) -> None:
    """Start a workflow run."""
    body = compact(workflow_type=workflow_type, workflow_id=workflow_id, business_key=business_key,
                   task_queue=task_queue, duplicate_policy=duplicate_policy, input=input_arguments(input_json),
                   memo=json_option(memo, "--memo"), execution_timeout_seconds=execution_timeout,
                   run_timeout_seconds=run_timeout, search_attributes=key_values(search_attr, "--search-attr"))
    started = ctx.call("POST", "/workflows", body=body)
    if not wait:
        ctx.emit(started)
        return
    if not ctx.as_json:
        show_mapping(started)
    _wait_and_report(ctx, str(started.get("workflow_id") or workflow_id), timeout=None)


def _wait_and_report(ctx: Context, workflow_id: str, timeout: Optional[float]) -> None:
    try:
        value = ctx.client.get_result(workflow_id, timeout=timeout, poll_interval=1.0)
    except (errors.WorkflowFailed, errors.WorkflowTerminated, errors.WorkflowTimedOut,
            errors.WorkflowCancelled) as exc:
        if ctx.as_json:
            click.echo(json.dumps({"workflow_id": workflow_id, "status": type(exc).__name__, "message": str(exc)},
                                  indent=2))
        click.echo(f"workflow {workflow_id} did not complete: {type(exc).__name__}: {exc}", err=True)
        raise SystemExit(EXIT_FAILURE) from None
    except TimeoutError as exc:
        fail(ctx, exc)
    except errors.DurableWorkflowError as exc:
        fail(ctx, exc)
    if ctx.as_json:
        click.echo(json.dumps({"workflow_id": workflow_id, "status": "completed", "result": value}, indent=2,
                              ensure_ascii=False, default=str))
    else:
        click.echo(json.dumps(value, ensure_ascii=False, default=str))


@command(workflow_group, "list")
@click.option("--type", "-t", "workflow_type", default=None, help="Only this workflow type.")
@click.option("--status", default=None, help="running, completed, failed, ...")
@click.option("--query", default=None, help="Visibility query.")
@click.option("--limit", type=int, default=None, help="Page size.")
@click.option("--next-page-token", default=None)
def list_(ctx: Context, workflow_type: Optional[str], status: Optional[str], query: Optional[str],
          limit: Optional[int], next_page_token: Optional[str]) -> None:
    """List workflows (one page)."""
    page = ctx.call("GET", "/workflows", params=compact(
        workflow_type=workflow_type, status=status, query=query, page_size=limit, next_page_token=next_page_token))

    def human(value: Any) -> None:
        show_table(value.get("workflows") or [], ["workflow_id", "workflow_type", "status", "task_queue", "run_id"])
        if value.get("next_page_token"):
            click.echo(f"next page: --next-page-token {value['next_page_token']}")
    ctx.emit(page, human)


@command(workflow_group, "describe")
@click.argument("workflow_id")
@click.option("--run-id", default=None, help="One run instead of the newest.")
@click.option("--raw", is_flag=True, help="Payloads as the server sends them (codec and base64 blob).")
def describe(ctx: Context, workflow_id: str, run_id: Optional[str], raw: bool) -> None:
    """Describe a workflow (its newest run); input, output and failure payloads decoded."""
    path = _wf(workflow_id) + (f"/runs/{segment(run_id)}" if run_id else "")
    value = ctx.call("GET", path)
    ctx.emit(value if raw else decoded_payloads(value))


def _current_run_id(ctx: Context, workflow_id: str) -> str:
    """The run ``describe`` shows when no run id is given: the workflow's current run."""
    run_id = ctx.call("GET", _wf(workflow_id)).get("run_id")
    if not isinstance(run_id, str) or not run_id:
        fail(ctx, errors.NotFound(404, {"reason": "run_not_found",
                                        "message": f"workflow {workflow_id!r} has no current run"}))
    return run_id


@command(workflow_group, "list-runs")
@click.argument("workflow_id")
def list_runs(ctx: Context, workflow_id: str) -> None:
    """Every run of a workflow's continue-as-new chain."""
    ctx.emit(ctx.call("GET", _wf(workflow_id) + "/runs"), lambda value: show_table(
        value.get("runs") or [], ["run_number", "run_id", "status", "started_at", "closed_at"]))


@command(workflow_group, "show-run")
@click.argument("workflow_id")
@click.argument("run_id")
def show_run(ctx: Context, workflow_id: str, run_id: str) -> None:
    """Describe one run."""
    ctx.emit(ctx.call("GET", f"{_wf(workflow_id)}/runs/{segment(run_id)}"))


@command(workflow_group, "history")
@click.argument("workflow_id")
@click.argument("run_id", required=False)
@click.option("--page-size", type=int, default=None)
@click.option("--next-page-token", default=None)
def history(ctx: Context, workflow_id: str, run_id: Optional[str], page_size: Optional[int],
            next_page_token: Optional[str]) -> None:
    """One page of a run's history events (RUN_ID: default the current run, as describe shows)."""
    run_id = run_id or _current_run_id(ctx, workflow_id)
    page = ctx.call("GET", f"{_wf(workflow_id)}/runs/{segment(run_id)}/history", params=compact(
        wait_new_event="0", page_size=page_size, next_page_token=next_page_token))
    ctx.emit(page, lambda value: show_table(value.get("events") or [],
                                            ["sequence", "event_type", "timestamp", "recorded_at"]))


@command(workflow_group, "history-export")
@click.argument("workflow_id")
@click.argument("run_id", required=False)
def history_export(ctx: Context, workflow_id: str, run_id: Optional[str]) -> None:
    """A run's history as a replay bundle (always JSON; RUN_ID: default the current run)."""
    run_id = run_id or _current_run_id(ctx, workflow_id)
    click.echo(json.dumps(ctx.call("GET", f"{_wf(workflow_id)}/runs/{segment(run_id)}/history/export"), indent=2))


@command(workflow_group, "result")
@click.argument("workflow_id")
@click.option("--timeout", type=float, default=None, help="Seconds to wait (default: until it closes).")
def result(ctx: Context, workflow_id: str, timeout: Optional[float]) -> None:
    """Wait for a workflow to close and print its result (exit 1 if it did not complete)."""
    _wait_and_report(ctx, workflow_id, timeout)


@command(workflow_group, "signal")
@click.argument("workflow_id")
@click.argument("signal_name")
@click.option("--input", "-i", "input_json", default=None, help="Arguments JSON.")
@click.option("--request-id", default=None, help="Command key: a retry with it is the same signal.")
def signal(ctx: Context, workflow_id: str, signal_name: str, input_json: Optional[str],
           request_id: Optional[str]) -> None:
    """Send a signal."""
    body = compact(input=input_arguments(input_json), request_id=request_id)
    ctx.emit(ctx.call("POST", f"{_wf(workflow_id)}/signal/{segment(signal_name)}", body=body))


@command(workflow_group, "query")
@click.argument("workflow_id")
@click.argument("query_name")
@click.option("--input", "-i", "input_json", default=None, help="Arguments JSON.")
def query(ctx: Context, workflow_id: str, query_name: str, input_json: Optional[str]) -> None:
    """Ask a query; prints its result."""
    answer = ctx.call("POST", f"{_wf(workflow_id)}/query/{segment(query_name)}",
                      body=compact(input=input_arguments(input_json)))
    ctx.emit(answer, lambda value: click.echo(json.dumps(_decoded_result(value), ensure_ascii=False, default=str)))


@command(workflow_group, "update")
@click.argument("workflow_id")
@click.argument("update_name")
@click.option("--wait", "wait_for", type=click.Choice(["accepted", "completed"]), default=None,
              help="Return when accepted or when completed (server default: accepted).")
@click.option("--input", "-i", "input_json", default=None, help="Arguments JSON.")
@click.option("--wait-timeout", type=int, default=None, help="Seconds the server waits for completion.")
@click.option("--request-id", default=None, help="Command key: a retry with it is the same update.")
def update(ctx: Context, workflow_id: str, update_name: str, wait_for: Optional[str], input_json: Optional[str],
           wait_timeout: Optional[int], request_id: Optional[str]) -> None:
    """Send an update."""
    body = compact(wait_for=wait_for, input=input_arguments(input_json), wait_timeout_seconds=wait_timeout,
                   request_id=request_id)
    ctx.emit(ctx.call("POST", f"{_wf(workflow_id)}/update/{segment(update_name)}", body=body))


def _reason_command(name: str, doc: str) -> None:
    @command(workflow_group, name, help=doc)
    @click.argument("workflow_id")
    @click.option("--reason", default=None)
    def run(ctx: Context, workflow_id: str, reason: Optional[str]) -> None:
        ctx.emit(ctx.call("POST", f"{_wf(workflow_id)}/{name}", body=compact(reason=reason)))


_reason_command("cancel", "Cancel the current run (it closes as cancelled).")
_reason_command("terminate", "Terminate the current run.")
_reason_command("archive", "Move a closed workflow to the archive tier.")


@command(workflow_group, "repair")
@click.argument("workflow_id")
def repair(ctx: Context, workflow_id: str) -> None:
    """Ask the server to repair a stalled run."""
    ctx.emit(ctx.call("POST", f"{_wf(workflow_id)}/repair", body={}))


@command(workflow_group, "redrive")
@click.argument("workflow_id")
@click.argument("run_id")
@click.option("--request-id", default=None)
def redrive(ctx: Context, workflow_id: str, run_id: str, request_id: Optional[str]) -> None:
    """Continue a failed run from its failure."""
    path = f"{_wf(workflow_id)}/runs/{segment(run_id)}/redrive"
    ctx.emit(ctx.call("POST", path, body=compact(request_id=request_id)))


def _decoded_result(value: Any) -> Any:
    from ..client.results._common import decode_payload

    if isinstance(value, dict):
        envelope = value.get("result_envelope")
        if isinstance(envelope, dict) and "blob" in envelope:
            return decode_payload(envelope)
        return value.get("result")
    return value
