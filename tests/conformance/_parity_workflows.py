"""The ``parity.v1.*`` workflows and activities, authored ONCE against the published SDK.

``test_server_parity_sdk.py`` runs this module as it is on the published SDK's Worker;
``test_server_parity_sync_worker.py`` runs the same text with only its import line swapped
(``tests._import_swap``) on sync_worker's Worker. Keep exactly one ``durable_workflow`` import line.
"""

from __future__ import annotations

from typing import Any

from durable_workflow import activity, workflow

SIGNAL_NAME = "parity-signal"
STREAM_NAME = "parity-signals"


class RuntimeException(Exception):
    """Named like the fixture's failure type, which the server matches retry policies on."""


# -- activities ----------------------------------------------------------------------------------
@activity.defn(name="parity.v1.echo_activity")
def echo_activity(value: Any) -> Any:
    return value


@activity.defn(name="parity.v1.retry_activity")
def retry_activity(value: Any, message: str) -> Any:
    attempt = activity.context().info.attempt_number
    if attempt == 1:
        raise RuntimeException(message)
    return {"echo": value, "attempt": attempt}


# -- workflows -----------------------------------------------------------------------------------
@workflow.defn(name="parity.v1.echo")
class Echo:
    def run(self, ctx: Any, value: Any) -> Any:
        return value


@workflow.defn(name="parity.v1.one_activity")
class OneActivity:
    def run(self, ctx: Any, value: Any) -> Any:
        result = yield ctx.schedule_activity("parity.v1.echo_activity", [value])
        return result


@workflow.defn(name="parity.v1.one_timer")
class OneTimer:
    def run(self, ctx: Any, value: Any) -> Any:
        for delay in value["delays"]:
            yield ctx.start_timer(delay)
        return value


@workflow.defn(name="parity.v1.signals")
class Signals:
    def __init__(self) -> None:
        self.received: Any = None

    @workflow.signal(SIGNAL_NAME)
    def on_signal(self, value: Any) -> None:
        self.received = value

    def run(self, ctx: Any, value: Any) -> Any:
        yield ctx.wait_condition(lambda: self.received is not None)
        return self.received


@workflow.defn(name="parity.v1.queries")
class Queries:
    """Two deliveries through a durable message stream; the query reads the committed state."""

    def __init__(self) -> None:
        self.count = 0
        self.last: Any = None

    @workflow.query("state")
    def state(self, *arguments: Any) -> Any:
        return {"arguments": list(arguments), "count": self.count, "last": self.last}

    def run(self, ctx: Any, value: Any) -> Any:
        stream = ctx.message_stream(STREAM_NAME)
        for _ in range(2):
            message = yield from stream.receive_one()
            self.count += 1
            self.last = message.arguments[0]
        return {"count": self.count, "last": self.last}


@workflow.defn(name="parity.v1.activity_retry")
class ActivityRetry:
    def run(self, ctx: Any, value: Any, policy: Any, message: str) -> Any:
        result = yield ctx.schedule_activity("parity.v1.retry_activity", [value, message], retry_policy=policy)
        return result


@workflow.defn(name="parity.v1.child_activity")
class ChildActivity:
    def run(self, ctx: Any, value: Any) -> Any:
        echoed = yield ctx.schedule_activity("parity.v1.echo_activity", [value])
        return {"echo": echoed, "source": "child-workflow"}


@workflow.defn(name="parity.v1.two_children")
class TwoChildren:
    def run(self, ctx: Any, value: Any) -> Any:
        results = []
        for payload in value["payloads"]:
            results.append((yield ctx.start_child_workflow("parity.v1.child_activity", [payload])))
        return {"child_results": results}


@workflow.defn(name="parity.v1.cancel_pending_timer")
class CancelPendingTimer:
    def run(self, ctx: Any, value: Any) -> Any:
        yield ctx.start_timer(60)
        return value


WORKFLOWS = [Echo, OneActivity, OneTimer, Signals, Queries, ActivityRetry, ChildActivity, TwoChildren,
             CancelPendingTimer]
ACTIVITIES = [echo_activity, retry_activity]
