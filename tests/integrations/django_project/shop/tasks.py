"""django.tasks tasks of the shop app, run by the durable backend."""

try:
    from django.tasks import task
except ImportError:  # Django < 6: the django-tasks backport
    from django_tasks import task

from .models import Order, Receipt


@task(queue_name="shop")
def write_receipt(order_id, text):
    order = Order.objects.get(pk=order_id)
    receipt = Receipt.objects.create(order=order, text=text)
    return {"receipt": receipt.pk, "order": order.pk}


@task(queue_name="shop", takes_context=True, backend="retrying")
def flaky_receipt(context, order_id):
    """Fails on its first attempt; records the attempt number the context reports."""
    attempt = context.attempt
    if attempt < 2:
        raise ConnectionError(f"attempt {attempt}: the mail server is down")
    Receipt.objects.create(order_id=order_id, text="flaky", attempt=attempt)
    return attempt


@task(queue_name="shop")
def always_fails(order_id):
    raise ValueError(f"order {order_id} cannot be receipted")
