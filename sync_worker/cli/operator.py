"""``sync-worker search-attribute ...``, ``sync-worker storage test`` and ``sync-worker system ...``."""

from __future__ import annotations

from typing import Optional, Tuple

import click

from ..client.base import segment
from ._common import Context, command, compact, json_option, show_table


@click.group("search-attribute")
def search_attribute_group() -> None:
    """Search attribute definitions of the namespace."""


@command(search_attribute_group, "list")
def sa_list(ctx: Context) -> None:
    """List system and custom search attributes."""
    def human(value: dict) -> None:  # type: ignore[type-arg]
        rows = [{"name": k, "type": v, "kind": "system"} for k, v in (value.get("system_attributes") or {}).items()]
        rows += [{"name": k, "type": v, "kind": "custom"} for k, v in (value.get("custom_attributes") or {}).items()]
        show_table(rows, ["name", "type", "kind"])
    ctx.emit(ctx.call("GET", "/search-attributes"), human)


@command(search_attribute_group, "create")
@click.argument("name")
@click.argument("type_", metavar="TYPE")
def sa_create(ctx: Context, name: str, type_: str) -> None:
    """Define a custom search attribute (keyword, text, int, double, bool, datetime)."""
    ctx.emit(ctx.call("POST", "/search-attributes", body={"name": name, "type": type_}))


@command(search_attribute_group, "delete")
@click.argument("name")
def sa_delete(ctx: Context, name: str) -> None:
    """Remove a custom search attribute."""
    ctx.emit(ctx.call("DELETE", f"/search-attributes/{segment(name)}"))


@click.group("storage")
def storage_group() -> None:
    """External payload storage."""


@command(storage_group, "test")
@click.option("--driver", default=None)
@click.option("--small-bytes", type=int, default=None)
@click.option("--large-bytes", type=int, default=None)
def storage_test(ctx: Context, driver: Optional[str], small_bytes: Optional[int], large_bytes: Optional[int]) -> None:
    """Round-trip a small and a large payload through the server's storage."""
    body = compact(small_payload_bytes=small_bytes, large_payload_bytes=large_bytes, driver=driver)
    ctx.emit(ctx.call("POST", "/storage/test", body=body))


@click.group("system")
def system_group() -> None:
    """Maintenance passes: repair, retention, activity timeouts."""


@command(system_group, "repair-status")
def repair_status(ctx: Context) -> None:
    """Runs that need a repair."""
    ctx.emit(ctx.call("GET", "/system/repair"))


@command(system_group, "repair-pass")
@click.option("--run-id", multiple=True)
@click.option("--instance-id", default=None)
def repair_pass(ctx: Context, run_id: Tuple[str, ...], instance_id: Optional[str]) -> None:
    """Repair now."""
    ctx.emit(ctx.call("POST", "/system/repair/pass", body=compact(run_ids=list(run_id) or None,
                                                                  instance_id=instance_id)))


@command(system_group, "retention-status")
def retention_status(ctx: Context) -> None:
    """Closed runs past retention."""
    ctx.emit(ctx.call("GET", "/system/retention"))


@command(system_group, "retention-pass")
@click.option("--run-id", multiple=True)
@click.option("--limit", type=int, default=None)
def retention_pass(ctx: Context, run_id: Tuple[str, ...], limit: Optional[int]) -> None:
    """Prune expired runs now."""
    ctx.emit(ctx.call("POST", "/system/retention/pass", body=compact(run_ids=list(run_id) or None, limit=limit)))


@command(system_group, "activity-timeout-status")
def activity_timeout_status(ctx: Context) -> None:
    """Activity executions past a deadline."""
    ctx.emit(ctx.call("GET", "/system/activity-timeouts"))


@command(system_group, "activity-timeout-pass")
@click.option("--execution-id", multiple=True)
@click.option("--limit", type=int, default=None)
def activity_timeout_pass(ctx: Context, execution_id: Tuple[str, ...], limit: Optional[int]) -> None:
    """Enforce activity timeouts now."""
    ctx.emit(ctx.call("POST", "/system/activity-timeouts/pass",
                      body=compact(execution_ids=list(execution_id) or None, limit=limit)))


@click.group("bridge")
def bridge_group() -> None:
    """Send bridge-adapter events (webhooks the server turns into workflow commands)."""


@command(bridge_group, "webhook")
@click.argument("adapter")
@click.option("--action", required=True, help="start_workflow, signal_workflow, ...")
@click.option("--idempotency-key", required=True, help="A resent event with it is the same event.")
@click.option("--target", required=True, help="Target JSON object (workflow_type, task_queue, ...).")
@click.option("--input", "input_json", default=None, help="Input JSON.")
@click.option("--correlation", default=None, help="Correlation JSON object.")
def bridge_webhook(ctx: Context, adapter: str, action: str, idempotency_key: str, target: str,
                   input_json: Optional[str], correlation: Optional[str]) -> None:
    """Send one webhook event; prints the server's outcome (a rejection exits 2 with its reason)."""
    body = compact(action=action, idempotency_key=idempotency_key, target=json_option(target, "--target"),
                   input=json_option(input_json, "--input"), correlation=json_option(correlation, "--correlation"))
    ctx.emit(ctx.call("POST", f"/bridge-adapters/webhook/{segment(adapter)}", body=body))
