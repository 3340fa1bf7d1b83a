"""Inventory activities: ORM reads and writes inside a transaction (row lock on PostgreSQL)."""

from django.db import transaction

from sync_worker import NonRetryableError, activity

from .models import Reservation, StockItem


@activity.defn(name="inventory.reserve")
def reserve(order_id: int, sku: str, quantity: int) -> dict:
    with transaction.atomic():
        item = StockItem.objects.select_for_update().get(sku=sku)
        existing = Reservation.objects.filter(order_id=order_id, sku=sku).first()
        if existing is not None:  # a retried attempt: the reservation already happened
            return {"sku": sku, "left": item.quantity, "reserved": existing.quantity}
        if item.quantity < quantity:
            raise NonRetryableError(f"only {item.quantity} {sku} left, {quantity} asked")
        item.quantity -= quantity
        item.save(update_fields=["quantity"])
        Reservation.objects.create(order_id=order_id, sku=sku, quantity=quantity)
    return {"sku": sku, "left": item.quantity, "reserved": quantity}


@activity.defn(name="inventory.stock_level")
def stock_level(sku: str) -> int:
    return int(StockItem.objects.get(sku=sku).quantity)
