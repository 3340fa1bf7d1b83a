"""Workflow streams written from workflow code, against the PUBLISHED SDK (loaded unchanged, import-swapped).

``tests/interop/test_authoring_streams.py`` runs this one source on both workers. Keep it free of
sync_worker-only names.
"""

from __future__ import annotations

from typing import Any

from durable_workflow import activity, workflow  # the import swap rewrites this line

Item = workflow.WorkflowStreamAppendItem  # (the SDK's durable_workflow.workflow re-exports it too)


@activity.defn(name="interop.streams.shout")
def shout(text: str) -> str:
    return text.upper()


@workflow.defn(name="interop.streams.tokens")
class Tokens:
    """Appends to a token stream around an activity, closes it; errors an alert stream."""

    def run(self, ctx: Any, prompt: str) -> Any:
        yield ctx.append_workflow_stream("tokens", [Item(payload={"token": word})
                                                    for word in prompt.split()])
        loud = yield ctx.schedule_activity("interop.streams.shout", [prompt])
        yield ctx.append_workflow_stream("tokens", [Item(payload={"token": loud},
                                                                             item_type="summary",
                                                                             content_type="application/json")],
                                         max_pending_items=50)
        yield ctx.close_workflow_stream("tokens", retention_seconds=120)
        yield ctx.append_workflow_stream("alerts", [Item(payload="overheated")])
        yield ctx.error_workflow_stream("alerts", "sensor lost")
        return loud


WORKFLOWS = [Tokens]
ACTIVITIES = [shout]
