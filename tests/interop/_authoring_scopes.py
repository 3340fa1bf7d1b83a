"""Cancellation surface, written against the PUBLISHED SDK (loaded unchanged and import-swapped).

``tests/interop/test_authoring_scopes.py`` runs this one source on both workers. Keep it free of
sync_worker-only names.
"""

from __future__ import annotations

from typing import Any

from durable_workflow import activity, workflow  # the import-swap test rewrites this line


@activity.defn(name="interop.scopes.cleanup")
def cleanup(step: str) -> str:
    return f"cleaned {step}"


@workflow.defn(name="interop.scopes.shielded")
class Shielded:
    """What a workflow sees of cancellation without 1.20 delivery: flags, shield, context, the
    refusal of a scope (caught here), in one run."""

    def run(self, ctx: Any) -> Any:
        seen = {"requested": ctx.is_cancellation_requested, "context": ctx.cancellation_context}
        ctx.throw_if_cancellation_requested()
        with ctx.cancellation_shield(), ctx.cancellation_shield():
            ctx.throw_if_cancellation_requested()
            seen["cleanup"] = yield ctx.schedule_activity("interop.scopes.cleanup", ["inner"])

        def body() -> Any:
            done = yield ctx.schedule_activity("interop.scopes.cleanup", ["scoped"])
            return done

        try:
            seen["scoped"] = yield from ctx.cancellation_scope(body, shield_parent=True)
        except Exception as error:  # the SDK 2.12 refuses scope authoring
            seen["refused"] = [type(error).__name__, str(error)]
        seen["after"] = yield ctx.schedule_activity("interop.scopes.cleanup", ["after"])
        return seen


@workflow.defn(name="interop.scopes.scoped")
class Scoped:
    """A scope the workflow does not catch: the task is refused and the run stays open."""

    def run(self, ctx: Any) -> Any:
        def body() -> Any:
            return (yield ctx.schedule_activity("interop.scopes.cleanup", ["scoped"]))

        return (yield from ctx.cancellation_scope(body))


WORKFLOWS = [Shielded, Scoped]
ACTIVITIES = [cleanup]
