"""Local activities, written against the PUBLISHED SDK (loaded unchanged and import-swapped).

``tests/interop/test_authoring_local.py`` runs this one source on the published SDK's worker and,
with only the import line replaced, on sync_worker's. Keep it free of sync_worker-only names.
"""

from __future__ import annotations

from typing import Any, Dict, List

from durable_workflow import activity, workflow  # the import-swap test rewrites this line

FLAKY_CALLS: Dict[str, int] = {}
HUGE = "x" * 70_000  # over the 63,488-byte message cap: bounded before the workflow sees it


@activity.defn(name="interop.local.price")
def price(item: str, quantity: int) -> Dict[str, Any]:
    # (no heartbeat here: the SDK runs a synchronous local activity on its event loop, where
    # heartbeat_sync refuses to run; ours is covered in tests/e2e/test_local_activities.py)
    assert activity.context().info.activity_type == "interop.local.price"
    return {"item": item, "total": quantity * 7}


@activity.defn(name="interop.local.flaky")
def flaky(key: str) -> str:
    FLAKY_CALLS[key] = FLAKY_CALLS.get(key, 0) + 1
    if FLAKY_CALLS[key] < 3:
        raise RuntimeError(f"flaky attempt {FLAKY_CALLS[key]}")
    return f"ok after {FLAKY_CALLS[key]}"


class HugeError(Exception):
    pass


@activity.defn(name="interop.local.huge")
def huge(key: str) -> str:
    raise HugeError(HUGE + key)


class Rejected(Exception):
    pass


@activity.defn(name="interop.local.reject")
def reject(key: str) -> str:
    raise Rejected(f"rejected {key}")


@activity.defn(name="interop.local.remote")
def remote(value: int) -> int:
    return value + 1


@workflow.defn(name="interop.local.checkout")
class Checkout:
    """Local activities: a value with a heartbeat, retries to success, a bounded failure, a
    non-retryable type, mixed with a timer and an ordinary activity."""

    def __init__(self) -> None:
        self.failures: List[str] = []

    @workflow.query("failures")
    def seen_failures(self) -> List[str]:
        return list(self.failures)

    def run(self, ctx: Any, key: str) -> Any:
        quote = yield ctx.local_activity("interop.local.price", ["book", 3], start_to_close_timeout=30)
        retried = yield ctx.local_activity("interop.local.flaky", [key],
                                           retry_policy={"max_attempts": 3, "backoff_seconds": [0, 1]})
        try:
            yield ctx.local_activity("interop.local.huge", [key], retry_policy={"max_attempts": 2})
        except Exception as error:  # ActivityFailed, bounded
            self.failures.append(str(error))
        try:
            yield ctx.local_activity("interop.local.reject", [key], retry_policy={
                "max_attempts": 5, "non_retryable_error_types": ["Rejected"]})
        except Exception as error:
            self.failures.append(str(error))
        yield ctx.start_timer(1)
        bumped = yield ctx.schedule_activity("interop.local.remote", [quote["total"]])
        again = yield ctx.local_activity("interop.local.price", ["pen", bumped])
        return {"quote": quote, "retried": retried, "bumped": bumped, "again": again,
                "failure_sizes": [len(text.encode()) for text in self.failures],
                "failure_ends": [text[-40:] for text in self.failures]}


WORKFLOWS = [Checkout]
ACTIVITIES = [price, flaky, huge, reject, remote]
