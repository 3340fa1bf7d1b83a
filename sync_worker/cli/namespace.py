"""``sync-worker namespace ...``: list, describe, create, update, delete, set-storage-driver."""

from __future__ import annotations

from typing import Optional

import click

from ..client.base import segment
from ._common import Context, command, compact, show_table


@click.group("namespace")
def namespace_group() -> None:
    """Manage namespaces."""


def _ns(name: str) -> str:
    return f"/namespaces/{segment(name)}"


@command(namespace_group, "list")
def list_(ctx: Context) -> None:
    """List namespaces."""
    ctx.emit(ctx.call("GET", "/namespaces"), lambda value: show_table(
        value.get("namespaces") or [], ["name", "status", "retention_days", "description"]))


@command(namespace_group, "describe")
@click.argument("name")
def describe(ctx: Context, name: str) -> None:
    """Describe a namespace."""
    ctx.emit(ctx.call("GET", _ns(name)))


@command(namespace_group, "create")
@click.argument("name")
@click.option("--description", default=None)
@click.option("--retention", type=int, default=30, show_default=True, help="Days of closed runs' history.")
def create(ctx: Context, name: str, description: Optional[str], retention: int) -> None:
    """Create a namespace."""
    ctx.emit(ctx.call("POST", "/namespaces", body=compact(name=name, description=description,
                                                          retention_days=retention)))


@command(namespace_group, "update")
@click.argument("name")
@click.option("--description", default=None)
@click.option("--retention", type=int, default=None, help="Days of closed runs' history.")
def update(ctx: Context, name: str, description: Optional[str], retention: Optional[int]) -> None:
    """Change a namespace's description or retention."""
    ctx.emit(ctx.call("PUT", _ns(name), body=compact(description=description, retention_days=retention)))


@command(namespace_group, "delete")
@click.argument("name")
def delete(ctx: Context, name: str) -> None:
    """Delete a namespace and what it holds."""
    ctx.emit(ctx.call("DELETE", _ns(name)))


@command(namespace_group, "set-storage-driver")
@click.argument("name")
@click.argument("driver")
@click.option("--disabled", is_flag=True, help="Record the driver but keep it off.")
@click.option("--threshold-bytes", type=int, default=None)
@click.option("--disk", default=None)
@click.option("--bucket", default=None)
@click.option("--prefix", default=None)
@click.option("--region", default=None)
@click.option("--endpoint", default=None)
@click.option("--auth-profile", default=None)
def set_storage_driver(ctx: Context, name: str, driver: str, disabled: bool, threshold_bytes: Optional[int],
                       disk: Optional[str], bucket: Optional[str], prefix: Optional[str], region: Optional[str],
                       endpoint: Optional[str], auth_profile: Optional[str]) -> None:
    """Configure a namespace's external payload storage."""
    config = compact(disk=disk, bucket=bucket, prefix=prefix, region=region, endpoint=endpoint,
                     auth_profile=auth_profile)
    body = compact(driver=driver, enabled=not disabled, threshold_bytes=threshold_bytes, config=config or None)
    ctx.emit(ctx.call("PUT", f"{_ns(name)}/external-storage", body=body))
