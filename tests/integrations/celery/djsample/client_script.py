"""The web side of the Django sample: publishes tasks and prints what came back (run as a process)."""

import json

import django

django.setup()

from django.core.management import call_command  # noqa: E402

from djproj import celery_app  # noqa: E402
from shop.models import Order  # noqa: E402
from shop.tasks import order_total, place_order, shop_name, state_of  # noqa: E402

call_command("migrate", run_syncdb=True, verbosity=0)

total = order_total.delay([10, 20, 30], discount=5)
name = shop_name.delay()
print(json.dumps({
    "total": total.get(timeout=60),
    "name": name.get(timeout=60),
    "state": state_of(total.id),
    "queue": celery_app.client.describe_activity(name.id)["task_queue"],
    "default_queue": celery_app.conf.task_default_queue,
    "order_saved": Order.objects.filter(pk=place_order.delay(42).get(timeout=60), total=42).exists(),
}))
