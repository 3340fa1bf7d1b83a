"""sync_worker_django.testing's pytest fixtures, used the way a pytest user would."""

from inventory.models import StockItem
from shop.models import Order
from sync_worker_django.testing import durable_server, durable_workers  # noqa: F401  (fixtures)


def test_durable_workers_run_the_projects_workflow(durable_workers):  # noqa: F811
    StockItem.objects.update_or_create(sku="fixture", defaults={"quantity": 3})
    order = Order.objects.create(customer="pytest", sku="fixture", quantity=1)
    handle = durable_workers.client.start_workflow("shop.fulfil_order", order.pk, task_queue="shop")
    assert handle.result(timeout=60) == {"order": order.pk, "status": "fulfilled", "left": 2}
    assert sorted(w.task_queue for w in durable_workers.group.workers) == ["inventory", "shop"]


def test_durable_server_points_the_settings_at_it(durable_server):  # noqa: F811
    from sync_worker_django.conf import get_config

    assert get_config().server_url == durable_server.server.url
    assert durable_server.group is None  # no workers until asked
    durable_server.start_workers(["shop"])
    assert [w.task_queue for w in durable_server.group.workers] == ["shop"]
