"""Update validators, written against the PUBLISHED SDK (loaded unchanged and import-swapped).

``tests/interop/test_authoring_validators.py`` runs this one source on both workers. Keep it free
of sync_worker-only names.
"""

from __future__ import annotations

from typing import Any, List

from durable_workflow import activity, workflow  # the import-swap test rewrites this line


@activity.defn(name="interop.validators.ship")
def ship(items: List[str]) -> str:
    return f"shipped {len(items)}"


@workflow.defn(name="interop.validators.cart")
class Cart:
    """An update with a ``@handler.validator``, another with ``@workflow.update_validator``, one
    without; the run closes when ``checkout`` is applied."""

    def __init__(self) -> None:
        self.items: List[str] = []
        self.closed = False

    @workflow.update("add")
    def add(self, item: str, quantity: int) -> int:
        self.items.extend([item] * quantity)
        return len(self.items)

    @add.validator
    def check_add(self, item: str, quantity: int) -> None:
        if quantity < 1:
            raise ValueError(f"quantity must be positive, got {quantity}")
        if item in self.items:
            raise KeyError(f"{item} is already in the cart")

    @workflow.update("discount")
    def discount(self, code: str) -> str:
        return code.upper()

    @workflow.update_validator("discount")
    def check_discount(self, code: str) -> bool:
        return code.startswith("ok")  # False rejects, as the SDK reads a False result

    @workflow.update("checkout")
    def checkout(self) -> List[str]:
        self.closed = True
        return list(self.items)

    @workflow.query("items")
    def current(self) -> List[str]:
        return list(self.items)

    def run(self, ctx: Any) -> Any:
        yield ctx.wait_condition(lambda: self.closed, key="closed")
        shipped = yield ctx.schedule_activity("interop.validators.ship", [list(self.items)])
        return {"items": list(self.items), "shipped": shipped}


WORKFLOWS = [Cart]
ACTIVITIES = [ship]
