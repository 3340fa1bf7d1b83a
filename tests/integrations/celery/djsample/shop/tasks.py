"""A reusable Django app's tasks (written for Celery 5)."""

from sync_worker_celery import shared_task
from sync_worker_celery.result import AsyncResult
from sync_worker_celery.signals import task_postrun
from django.conf import settings

from .models import Order

FINISHED = []


@task_postrun.connect
def remember(sender=None, task_id=None, state=None, **kwargs):
    FINISHED.append((task_id, state))


@shared_task
def shop_name():
    return settings.SHOP_NAME


@shared_task(bind=True, max_retries=2)
def order_total(self, prices, discount=0):
    if discount < 0:
        raise self.retry(exc=ValueError("negative discount"), countdown=1)
    return sum(prices) - discount


@shared_task
def place_order(total):
    return Order.objects.create(total=total).pk


def state_of(task_id):
    return AsyncResult(task_id).state
