"""``manage.py place_order ada 2``: create an order, start its workflow on commit, wait, enqueue a task."""

import time

from django.core.management.base import BaseCommand
from django.db import transaction
from sync_worker_django import get_client, start_workflow_on_commit

from ...models import Order
from ...tasks import send_receipt


class Command(BaseCommand):
    help = "Place an order and wait for its durable checkout workflow."

    def add_arguments(self, parser):
        parser.add_argument("customer")
        parser.add_argument("quantity", type=int)
        parser.add_argument("--timeout", type=float, default=60)

    def handle(self, customer, quantity, timeout, **options):
        with transaction.atomic():
            order = Order.objects.create(customer=customer, quantity=quantity)
            workflow_id = start_workflow_on_commit("orders.checkout", order.pk, task_queue="orders")
        result = get_client().get_workflow_handle(workflow_id).result(timeout=timeout)
        self.stdout.write(f"workflow {workflow_id} completed: {result}")
        mailed = send_receipt.enqueue(order.pk)  # outside atomic(): sent at once
        deadline = time.monotonic() + timeout
        while not mailed.is_finished and time.monotonic() < deadline:
            time.sleep(0.2)
            mailed.refresh()
        self.stdout.write(f"task {mailed.id} {mailed.status}: {mailed.return_value}")
