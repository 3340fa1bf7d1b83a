"""Durable selection, written against the PUBLISHED SDK (loaded unchanged and import-swapped).

``tests/interop/test_authoring_select.py`` runs this one source on both workers. Keep it free of
sync_worker-only names.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List

from durable_workflow import activity, workflow  # the import-swap test rewrites this line


@activity.defn(name="interop.select.quick")
def quick(tag: str) -> str:
    return f"quick {tag}"


@activity.defn(name="interop.select.slow")
def slow(tag: str, seconds: float) -> str:
    time.sleep(seconds)
    return f"slow {tag}"


class Declined(Exception):
    pass


@activity.defn(name="interop.select.broken")
def broken(tag: str) -> str:
    raise Declined(f"broken {tag}")


@workflow.defn(name="interop.select.child")
class Child:
    def run(self, ctx: Any, value: int) -> Any:
        yield ctx.start_timer(1)
        return value * 10


@workflow.defn(name="interop.select.race")
class Race:
    """Selections of activities, a timer, a child and a nested list; a loser awaited through its
    handle; a failing winner; members keyed by name and by index."""

    def run(self, ctx: Any) -> Any:
        out: List[Dict[str, Any]] = []
        first = yield ctx.select({
            "slow": ctx.schedule_activity("interop.select.slow", ["a", 1.5], start_to_close_timeout=30),
            "quick": ctx.schedule_activity("interop.select.quick", ["a"]),
            "timer": ctx.start_timer(60),
        })
        out.append({"key": first.key, "index": first.index, "kind": first.kind, "value": first.value,
                    "ok": first.succeeded, "remaining": sorted(first.remaining())})
        late = yield first.handles["slow"]  # a loser, awaited to its end
        out.append({"late": late})
        second = yield ctx.select([
            ctx.start_timer(1),
            ctx.start_child_workflow("interop.select.child", [4]),
        ])
        out.append({"key": second.key, "kind": second.kind, "value": second.value})
        third = yield ctx.select({
            "pair": [ctx.schedule_activity("interop.select.quick", ["b"]),
                     ctx.schedule_activity("interop.select.quick", ["c"])],
            "deadline": ctx.start_timer(120),
        })
        out.append({"key": third.key, "kind": third.kind, "value": third.value})
        fourth = yield ctx.select({"broken": ctx.schedule_activity("interop.select.broken", ["d"], retry_policy={
            "max_attempts": 1}), "later": ctx.start_timer(90)})
        out.append({"key": fourth.key, "ok": fourth.succeeded, "failure": str(fourth.failure),
                    "failure_type": type(fourth.failure).__name__})
        fifth = yield ctx.select({"fast": ctx.schedule_activity("interop.select.quick", ["e"]),
                                  "nap": ctx.start_timer(600)})
        yield fifth.handles["nap"].cancel()
        try:
            yield fifth.handles["nap"]
            out.append({"cancelled": False})
        except Exception as error:  # DurableOperationCancelled
            out.append({"key": fifth.key, "cancelled": type(error).__name__, "message": str(error)})
        return out


WORKFLOWS = [Race, Child]
ACTIVITIES = [quick, slow, broken]
