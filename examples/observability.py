"""Observability: one OpenTelemetry trace from a "web request" through a workflow, its activities and
its child, and the Sentry event of a failed payment, on the embedded dev server.

    pip install "sync-worker[otel,sentry]" opentelemetry-sdk
    python examples/observability.py                   # prints the trace as a waterfall, and the event
    python examples/observability.py --html trace.html # and writes the waterfall as a page
    python examples/observability.py --otlp            # export to a local collector/Jaeger instead
                                                       # (needs opentelemetry-exporter-otlp)

What a Django shop writes is the first few lines of ``main``: a tracer provider,
``SyncWorkerInstrumentor().instrument()`` and ``sentry_sdk.init(integrations=[SyncWorkerIntegration()])``.
The dev server keeps trace context only when asked (``DevServer(trace_context=True)``,
``sync-worker devserver --trace-context``); without it every task starts a trace of its own.
"""

from __future__ import annotations

import argparse
import html
import json
import uuid
from typing import Any, Dict, List, Optional

import sentry_sdk
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sentry_sdk.transport import Transport

from sync_worker import Client, Worker, activity, workflow
from sync_worker.contrib.opentelemetry import SyncWorkerInstrumentor
from sync_worker.contrib.sentry import SyncWorkerIntegration
from sync_worker.devserver import DevServer
from sync_worker.errors import WorkflowFailed
from sync_worker.host import WorkerGroup

QUEUE = "observability"


@activity.defn(name="shop.reserve_stock")
def reserve_stock(sku: str, quantity: int) -> str:
    with trace.get_tracer("shop").start_as_current_span("SELECT stock FOR UPDATE"):  # nests under RunActivity
        return f"reserved {quantity} x {sku}"


@activity.defn(name="shop.charge_card")
def charge_card(card: str, cents: int) -> str:
    if card.startswith("4000"):
        raise ValueError(f"card {card[-4:]} declined for {cents} cents")
    return f"charged {cents}"


@workflow.defn(name="shop.send_receipt")
class SendReceipt:
    def run(self, ctx: Any, order_id: str) -> Any:
        return (yield ctx.schedule_activity("shop.reserve_stock", [f"receipt-{order_id}", 1]))


@workflow.defn(name="shop.checkout")
class Checkout:
    def run(self, ctx: Any, order_id: str, card: str) -> Any:
        yield ctx.schedule_activity("shop.reserve_stock", ["SKU-42", 2])
        charged = yield ctx.schedule_activity(
            "shop.charge_card", [card, 4200],
            retry_policy=workflow.ActivityRetryPolicy(max_attempts=2, backoff_seconds=[0]))
        yield ctx.start_child_workflow("shop.send_receipt", [order_id])
        return charged


class KeepEvents(Transport):  # type: ignore[misc]
    """Keeps Sentry's events here instead of sending them (a DSN sends them to Sentry)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: List[Dict[str, Any]] = []

    def capture_envelope(self, envelope: Any) -> None:
        self.events.extend(item.payload.json for item in envelope.items if item.type == "event")


def waterfall(spans: List[ReadableSpan]) -> List[Dict[str, Any]]:
    """The spans of one trace as rows: depth (from parent links), name, start/end offsets in ms."""
    by_id = {s.context.span_id: s for s in spans}
    start = min(s.start_time or 0 for s in spans)

    def depth(span: ReadableSpan) -> int:
        level, parent = 0, span.parent
        while parent is not None and parent.span_id in by_id:
            level, parent = level + 1, by_id[parent.span_id].parent
        return level

    rows = []
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        rows.append({"depth": depth(span), "name": span.name, "kind": span.kind.name,
                     "start_ms": ((span.start_time or 0) - start) / 1e6, "end_ms": ((span.end_time or 0) - start) / 1e6,
                     "error": span.status.status_code.name == "ERROR",
                     "attributes": {k: v for k, v in (span.attributes or {}).items()
                                    if k in ("workflow_instance_id", "activity_type", "activity_attempt_number",
                                             "task_queue", "workflow_task_attempt")}})
    return rows


def render_text(rows: List[Dict[str, Any]], trace_id: int) -> str:
    total = max(r["end_ms"] for r in rows) or 1.0
    lines = [f"trace {trace_id:032x}  ({len(rows)} spans, {total:.0f} ms)"]
    for row in rows:
        left = int(40 * row["start_ms"] / total)
        width = max(1, int(40 * (row["end_ms"] - row["start_ms"]) / total))
        bar = " " * left + ("!" if row["error"] else "#") * width
        lines.append(f"{'  ' * row['depth']}{row['name']:<{44 - 2 * row['depth']}} |{bar:<41}| "
                     f"{row['end_ms'] - row['start_ms']:7.1f} ms")
    return "\n".join(lines)


def render_html(rows: List[Dict[str, Any]], trace_id: int) -> str:
    total = max(r["end_ms"] for r in rows) or 1.0
    body = []
    for row in rows:
        left = 100 * row["start_ms"] / total
        width = max(0.4, 100 * (row["end_ms"] - row["start_ms"]) / total)
        attrs = " ".join(f"{k}={v}" for k, v in row["attributes"].items())
        colour = "#d9534f" if row["error"] else {"CLIENT": "#5b8def", "SERVER": "#3fb27f",
                                                 "CONSUMER": "#9b6bd6"}.get(row["kind"], "#f0ad4e")
        body.append(
            f'<tr><td style="padding-left:{8 + 18 * row["depth"]}px">{html.escape(row["name"])}'
            f'<div class="a">{html.escape(attrs)}</div></td><td class="t"><div class="bar" style="left:{left:.2f}%;'
            f'width:{width:.2f}%;background:{colour}"></div></td><td class="d">'
            f'{row["end_ms"] - row["start_ms"]:.1f} ms</td></tr>')
    return f"""<!doctype html><meta charset="utf-8"><title>trace {trace_id:032x}</title>
<style>body{{font:13px system-ui,sans-serif;margin:16px;color:#222}}table{{border-collapse:collapse;width:100%}}
td{{border-bottom:1px solid #eee;padding:4px 8px;vertical-align:top}}td.t{{position:relative;width:42%}}
.bar{{position:absolute;top:7px;height:12px;border-radius:2px}}.a{{color:#777;font-size:11px}}
td.d{{text-align:right;white-space:nowrap;color:#555}}h1{{font-size:15px}}</style>
<h1>One trace: a web request, the workflow it started, its tasks, activities and child
&mdash; trace {trace_id:032x}, {len(rows)} spans, {total:.0f} ms</h1>
<table>{''.join(body)}</table>"""


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html", help="write the waterfall page here")
    parser.add_argument("--otlp", action="store_true", help="also export the spans over OTLP (localhost:4317)")
    options = parser.parse_args(argv)

    # -- what an application does once, at start-up ---------------------------------------------
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    if options.otlp:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(insecure=True)))
    trace.set_tracer_provider(provider)  # the application's provider: activity code's own spans use it too
    instrumentor = SyncWorkerInstrumentor()
    instrumentor.instrument()
    events = KeepEvents()
    sentry_sdk.init(dsn="https://public@sentry.invalid/1", transport=events, integrations=[SyncWorkerIntegration()])
    # ---------------------------------------------------------------------------------------------
    try:
        with DevServer(trace_context=True) as server, Client(server.url) as client:
            worker = Worker(client, task_queue=QUEUE, workflows=[Checkout, SendReceipt],
                            activities=[reserve_stock, charge_card], poll_timeout=1.0)
            group = WorkerGroup([worker])  # the host's group: runs the worker on its own thread
            group.start()
            try:
                tracer = trace.get_tracer("django")
                order = f"order-{uuid.uuid4().hex[:6]}"
                with tracer.start_as_current_span("POST /checkout", kind=trace.SpanKind.SERVER) as request:
                    good = client.start_workflow("shop.checkout", order, "4242424242424242", task_queue=QUEUE,
                                                 workflow_id=order)
                charged = good.result(timeout=30)
                declined = client.start_workflow("shop.checkout", f"{order}-b", "4000000000000002",
                                                 task_queue=QUEUE, workflow_id=f"{order}-b")
                try:
                    declined.result(timeout=30)
                except WorkflowFailed:
                    pass
            finally:
                group.stop()
                group.join(30)
        sentry_sdk.flush()
    finally:
        instrumentor.uninstrument()
        sentry_sdk.get_client().close()
    trace_id = request.get_span_context().trace_id
    ours = [s for s in spans.get_finished_spans() if s.context.trace_id == trace_id]
    rows = waterfall(ours)
    print(render_text(rows, trace_id))
    if options.html:
        with open(options.html, "w", encoding="utf-8") as page:
            page.write(render_html(rows, trace_id))
    event = next(e for e in events.events if (e.get("tags") or {}).get("activity.type") == "shop.charge_card")
    shown = {key: event.get(key) for key in ("level", "transaction", "tags", "contexts", "breadcrumbs")}
    shown["exception"] = {"values": [{k: v for k, v in value.items() if k != "stacktrace"}
                                     for value in event["exception"]["values"]]}
    shown["contexts"] = {k: v for k, v in (event.get("contexts") or {}).items() if k in ("sync_worker", "trace")}
    print(json.dumps(shown, indent=2, default=str))
    return {"charged": charged, "spans": rows, "event": event, "trace_id": trace_id}


if __name__ == "__main__":
    main()
