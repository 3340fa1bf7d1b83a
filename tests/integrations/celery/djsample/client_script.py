"""The web side of the Django sample: publishes tasks and prints what came back (run as a process)."""

import json
import time

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402

from djproj import celery_app  # noqa: E402
from shop.models import Order  # noqa: E402
from shop.tasks import order_total, place_order, shop_name, state_of  # noqa: E402

call_command("migrate", run_syncdb=True, verbosity=0)

with transaction.atomic():
    place_order.delay_on_commit(7)       # published only when the block commits
    Order.objects.create(total=6)
deadline = time.monotonic() + 60
while not Order.objects.filter(total=7).exists() and time.monotonic() < deadline:
    time.sleep(0.1)

total = order_total.delay([10, 20, 30], discount=5)
name = shop_name.delay()
print(json.dumps({
    "total": total.get(timeout=60),
    "name": name.get(timeout=60),
    "state": state_of(total.id),
    "queue": celery_app.client.describe_activity(name.id)["task_queue"],
    "default_queue": celery_app.conf.task_default_queue,
    "order_saved": Order.objects.filter(pk=place_order.delay(42).get(timeout=60), total=42).exists(),
    "on_commit_order": Order.objects.filter(total=7).exists(),
}))
