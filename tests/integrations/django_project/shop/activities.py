"""Shop activities: each loads its row by primary key and writes through the ORM."""

import os
import time

from django.db import connection

from sync_worker import activity

from .models import Order


@activity.defn(name="shop.load_order")
def load_order(order_id: int) -> dict:
    order = Order.objects.get(pk=order_id)
    return {"id": order.pk, "sku": order.sku, "quantity": order.quantity, "customer": order.customer}


@activity.defn(name="shop.mark_status")
def mark_status(order_id: int, status: str) -> str:
    updated = Order.objects.filter(pk=order_id).update(status=status)
    if updated != 1:
        raise LookupError(f"order {order_id} not found")
    return status


@activity.defn(name="shop.order_total")
def order_total(order_id: int):
    """Returns the DecimalField value as it is: the worker must refuse it (non-retryable)."""
    return Order.objects.get(pk=order_id).total


@activity.defn(name="shop.slow_touch")
def slow_touch(order_id: int, seconds: float) -> str:
    """Sleeps (heartbeating) then writes: used by the shutdown tests to have work in flight."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        activity.context().heartbeat_sync({"left": deadline - time.monotonic()})
        time.sleep(0.1)
    Order.objects.filter(pk=order_id).update(status="touched")
    return f"touched by {os.getpid()}"


@activity.defn(name="shop.connection_state")
def connection_state() -> dict:
    """What this slot sees of its connection when it starts (the hygiene must have closed the last one)."""
    was_open = connection.connection is not None
    Order.objects.count()
    return {"open_at_start": was_open, "vendor": connection.vendor}


@activity.defn(name="shop.pg_nap")
def pg_nap(seconds: float) -> list:
    """Waits inside PostgreSQL (pg_sleep); returns when the server started the statement, and its end.

    Server-side times: a worker whose database wait blocks every other slot cannot even send the
    next slot's statement until this one returns, so their spans would not overlap.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM statement_timestamp())::float8, pg_sleep(%s)", [seconds])
        started = cursor.fetchone()[0]
    return [started, started + seconds]
