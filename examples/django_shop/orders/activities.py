"""Activities: plain functions that load rows by primary key and write through the ORM.

sync_worker_django closes stale connections before and after each one, in its own slot.
"""

from sync_worker import activity

from .models import Order


@activity.defn(name="orders.charge")
def charge(order_id: int) -> int:
    order = Order.objects.get(pk=order_id)
    total = order.quantity * order.price_cents
    Order.objects.filter(pk=order_id).update(status="charged")
    return total  # cents as an int: a Decimal would be refused (pass str(value) or int cents)


@activity.defn(name="orders.ship")
def ship(order_id: int, total_cents: int) -> str:
    receipt = f"order {order_id}: {total_cents / 100:.2f} charged and shipped"
    Order.objects.filter(pk=order_id).update(status="shipped", receipt=receipt)
    return receipt
