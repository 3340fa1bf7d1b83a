"""An app that (wrongly) reuses an activity type name of the shop app: autodiscovery must refuse it."""

from sync_worker import activity


@activity.defn(name="shop.load_order")
def load_order_again(order_id: int) -> dict:
    return {}
