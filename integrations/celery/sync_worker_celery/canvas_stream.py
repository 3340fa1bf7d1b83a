"""A chord whose header is a generator: header tasks start as the generator yields them.

Celery publishes each header task as the generator produces it (so a long or slow generator's
first tasks run while it is still producing). Here the chord is one durable canvas run started
with an *open* header; every signature the generator yields is compiled and sent to the run as the
signal ``celery.header`` (request id ``<run>:header:<n>``, so a resend is recorded once), and the
exhausted generator sends ``celery.header_end``. The run (``CanvasWorkflow._streamed_group``)
runs the members that have arrived, as one batch, while the next ones arrive; when the header is
closed and every member has finished, the body runs with all the results, in yield order.

If the generator raises, the run is cancelled (its body never runs) and the error propagates to
the caller, as Celery's ``apply_async`` would raise it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, List

if TYPE_CHECKING:  # pragma: no cover
    from .canvas import chord

__all__ = ["HEADER_END_SIGNAL", "HEADER_SIGNAL", "start_streamed_chord"]

HEADER_SIGNAL = "celery.header"
HEADER_END_SIGNAL = "celery.header_end"


def start_streamed_chord(sig: chord, stream: Iterator[Any], options: Dict[str, Any]) -> Any:
    """Start ``sig`` (a chord whose header is still the iterator ``stream``); returns its result."""
    from .canvas import _root_id, chord, group, maybe_signature
    from .canvas_workflow import CANVAS_WORKFLOW, _first_queue, compile_plan
    from .result import AsyncResult

    app = sig.app
    opened = chord(group([], app=app), sig.body, app=app, **{**sig.options, **options})
    root_id = _root_id(opened)
    counter: List[int] = [0]
    plan = compile_plan(app, opened, root_id, counter)
    plan["header"]["streamed"] = True
    body_queue = _first_queue(plan["body"]) or str(app.conf.task_default_queue)
    app.client.start_workflow(CANVAS_WORKFLOW, plan, root_id, task_queue=body_queue, workflow_id=root_id)
    sent = 0
    try:
        for item in stream:
            member = compile_plan(app, maybe_signature(item, app=app), root_id, counter)
            app.client.signal_workflow(root_id, HEADER_SIGNAL, args=[member], request_id=f"{root_id}:header:{sent}")
            sent += 1
    except BaseException:
        app.client.cancel_workflow(root_id, reason="the chord header's generator raised")
        raise
    app.client.signal_workflow(root_id, HEADER_END_SIGNAL, args=[sent], request_id=f"{root_id}:header:end")
    return AsyncResult(root_id, app=app)
