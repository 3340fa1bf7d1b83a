"""A django.tasks task: enqueue() makes it a durable standalone activity on queue "orders"."""

try:
    from django.tasks import task
except ImportError:  # Django < 6: pip install django-tasks
    from django_tasks import task

from .models import Order


@task(queue_name="orders")
def send_receipt(order_id):
    order = Order.objects.get(pk=order_id)
    return f"mailed {order.customer!r}: {order.receipt}"
