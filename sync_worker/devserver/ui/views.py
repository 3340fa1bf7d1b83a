"""The pages of the dev server UI. Each reads through the same control-plane code as the HTTP API
(``control``, ``workers``) under the engine's transaction, then renders plain HTML."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ... import payloads
from .. import control, schedules, workers
from ..engine import Engine
from ..store import Row
from ..util import TERMINAL_STATUSES, ApiError, iso
from .html import Html, esc, kv_list, link, payload_block, quote_id, table

__all__ = ["activities_page", "not_found", "run_page", "schedules_page", "status_badge", "task_queues_page",
           "workers_page", "workflows_page"]

PAGE_SIZE = 25
_STATUSES = ("", "pending", "running", "waiting", "completed", "failed", "cancelled", "terminated", "timed_out",
             "continued")
# Event payload keys whose envelope holds an argument list (shown as a list even for one value).
_ARGUMENT_KEYS = frozenset({"arguments", "input"})


def status_badge(status: Any) -> Html:
    return Html(f'<span class="status {esc(status)}">{esc(status)}</span>')


def _run_link(namespace: str, workflow_id: str, run_id: Optional[str] = None, text: Optional[str] = None) -> Html:
    path = f"/ui/workflows/{quote_id(workflow_id)}"
    return link(path, text or workflow_id, namespace=namespace, run_id=run_id)



def workflows_page(engine: Engine, namespace: str, query: Dict[str, str]) -> Tuple[str, Html]:
    status = query.get("status") or ""
    search = (query.get("q") or "").strip()
    try:
        page = max(1, int(query.get("page") or "1"))
    except ValueError:
        page = 1
    with engine.tx():
        listing = control.list_workflows(engine, namespace, {"status": status, "page_size": "1000"}
                                         if status else {"page_size": "1000"})
    rows = listing["workflows"]
    if search:
        needle = search.lower()
        rows = [r for r in rows if needle in str(r["workflow_id"]).lower() or needle in str(r["workflow_type"]).lower()]
    rows = list(reversed(rows))  # newest first
    total = len(rows)
    shown = rows[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    options = "".join(f'<option value="{esc(s)}"{" selected" if s == status else ""}>{esc(s or "any status")}'
                      "</option>" for s in _STATUSES)
    form = Html(
        '<form method="get" action="/ui/workflows" class="filters">'
        f'<input type="hidden" name="namespace" value="{esc(namespace)}">'
        f'<label>Status <select name="status">{options}</select></label> '
        f'<label>Search id or type <input type="text" name="q" value="{esc(search)}"></label> '
        "<button>Filter</button></form>")
    body_rows = [
        [_run_link(namespace, r["workflow_id"]), r["workflow_type"], status_badge(r["status"]), r["task_queue"],
         r.get("created_at"), r.get("closed_at") or ""]
        for r in shown
    ]
    pager = _pager("/ui/workflows", page, total, namespace=namespace, status=status, q=search)
    summary = Html(f'<p class="muted">{total} workflow{"s" if total != 1 else ""}</p>')
    return "Workflows", Html(form + summary + table(
        ["Workflow id", "Type", "Status", "Task queue", "Started", "Closed"], body_rows,
        empty="No workflows match.", css="workflows") + pager)


def _pager(path: str, page: int, total: int, **query: Any) -> Html:
    pages = max(1, (total + PAGE_SIZE - 1) // PAGE_SIZE)
    if pages == 1:
        return Html("")
    parts = []
    if page > 1:
        parts.append(link(path, "← newer", page=page - 1, **query))
    parts.append(esc(f" page {page} of {pages} "))
    if page < pages:
        parts.append(link(path, "older →", page=page + 1, **query))
    return Html('<p class="pager">' + "".join(parts) + "</p>")


def _event_payloads(event: Row) -> Html:
    """An event's Avro payloads decoded, its failure in words, and its other fields as facts."""
    blocks: List[str] = []
    facts: List[str] = []
    for key, value in (event.get("payload") or {}).items():
        if payloads.is_envelope(value):
            blocks.append(payload_block(value, arguments=key in _ARGUMENT_KEYS, label=key))
        elif key == "failure" and isinstance(value, dict):
            blocks.append(_failure_block(value))
        elif isinstance(value, (dict, list)):
            if value:
                facts.append(f"{key}={json.dumps(value, sort_keys=True, default=str)}")
        elif value not in (None, ""):
            facts.append(f"{key}={value}")
    return Html(f'<div class="muted">{esc(", ".join(facts))}</div>' + "".join(blocks))


def _failure_block(failure: Dict[str, Any]) -> Html:
    kind = failure.get("type") or failure.get("exception_class") or "failure"
    return Html(f'<div class="label">failure</div><pre class="payload bad">{esc(kind)}: '
                f'{esc(failure.get("message") or "")}</pre>')


def _timeline(events: Sequence[Row]) -> Html:
    items = "".join(
        f'<li class="event" data-type="{esc(e.get("event_type"))}"><strong>#{esc(e.get("sequence"))} '
        f'{esc(e.get("event_type"))}</strong> <span class="muted">{esc(e.get("recorded_at"))}</span>'
        f"{_event_payloads(e)}</li>"
        for e in events)
    return Html(f'<ol class="timeline">{items}</ol>' if items else '<p class="empty">No events yet.</p>')


def _pending(engine: Engine, run: Row) -> Tuple[List[List[Any]], List[List[Any]]]:
    acts = [[a.get("sequence"), a.get("activity_type"), a.get("state"), a.get("attempt_number", 0),
             a.get("task_queue")]
            for a in engine.store.select("activities", "run_id = ?", (run["run_id"],))
            if a.get("state") in ("ready", "leased", "backoff")]
    at = engine.now()
    timers = [[t.get("sequence"), t.get("delay_seconds"), t.get("timer_kind") or "timer",
               fires_at(t.get("fire_at"), at)]
              for t in engine.store.select("timers", "run_id = ? AND state = 'pending'", (run["run_id"],))]
    return acts, timers


def time_left(seconds: float) -> str:
    """``seconds`` as the two largest units: ``3 d 4 h``, ``59 min 58 s``, ``12 s``."""
    left = int(max(0.0, seconds) + 0.5)
    parts = [(left // 86400, "d"), (left % 86400 // 3600, "h"), (left % 3600 // 60, "min"), (left % 60, "s")]
    first = next((i for i, (value, _) in enumerate(parts) if value), len(parts) - 1)
    shown = [parts[first]] + [part for part in parts[first + 1:first + 2] if part[0]]
    return " ".join(f"{value} {unit}" for value, unit in shown)


def fires_at(fire_at: Any, at: float) -> str:
    """A pending timer's fire time in the page's date format (ISO-8601 UTC), with the time left."""
    if not isinstance(fire_at, (int, float)):
        return "—"
    left = fire_at - at
    return f"{iso(fire_at)} ({'in ' + time_left(left) if left >= 0.5 else 'due now'})"


def _task_failure(failure: Any) -> Html:
    if not isinstance(failure, dict):
        return Html("")
    kind = failure.get("type") or "workflow task failure"
    message = failure.get("message") or "(no message)"
    return Html('<div class="error" role="alert"><strong>The last workflow task failed.</strong> '
                f"{esc(kind)}: {esc(message)}. The server keeps retrying the task; fix the workflow code or "
                "its worker and it resumes.</div>")


def _children(engine: Engine, namespace: str, run: Row) -> List[Html]:
    out = []
    for child_id in run.get("children") or []:
        child = engine.current_run(namespace, child_id)
        status = child["status"] if child else "?"
        out.append(Html(_run_link(namespace, child_id) + " " + status_badge(status)))
    return out


def run_page(engine: Engine, namespace: str, workflow_id: str, run_id: Optional[str]) -> Tuple[str, Html, bool]:
    """``(title, body, open)`` for a run; ``open`` says whether the page should keep refreshing."""
    with engine.tx():
        run = engine.require_run(namespace, workflow_id, run_id)
        view = control.run_view(engine, run)
        events = engine.history(run["run_id"])
        acts, timers = _pending(engine, run)
        runs = engine.runs_of(namespace, workflow_id)
        children = _children(engine, namespace, run)
    is_open = view["status"] not in TERMINAL_STATUSES
    facts = kv_list([
        ("Workflow id", view["workflow_id"]), ("Run id", view["run_id"]), ("Type", view["workflow_type"]),
        ("Status", status_badge(view["status"])), ("Task queue", view["task_queue"]),
        ("Run number", view.get("run_number")), ("Started", view.get("started_at")),
        ("Closed", view.get("closed_at") or "—"), ("Closed reason", view.get("closed_reason") or "—"),
        ("Memo", view.get("memo") or {}), ("Search attributes", view.get("search_attributes") or {}),
    ])
    chain = []
    if len(runs) > 1:
        chain = [Html(_run_link(namespace, workflow_id, r["run_id"], f"run {r.get('run_number')}")
                      + ("" if r["run_id"] != run["run_id"] else esc(" (this run)"))) for r in runs]
    parent = ""
    if view.get("parent_workflow_id"):
        parent = Html("<p>Parent: " + _run_link(namespace, view["parent_workflow_id"], view.get("parent_run_id"))
                      + "</p>")
    io = Html(payload_block(view.get("input"), arguments=True, label="Input")
              + (payload_block(view.get("output"), label="Output") if view.get("output") is not None else "")
              + (payload_block(view.get("failure"), label="Failure") if isinstance(view.get("failure"), str)
                 else ""))
    if isinstance(view.get("failure"), dict):
        io = Html(io + _failure_block(view["failure"]))
    sections = [
        _task_failure(view.get("last_task_failure")) if is_open else Html(""),
        facts, parent,
        Html("<h2>Continue-as-new chain</h2><p>" + " · ".join(chain) + "</p>") if chain else Html(""),
        Html("<h2>Child runs</h2><p>" + " · ".join(children) + "</p>") if children else Html(""),
        Html("<h2>Input and output</h2>" + io),
        Html("<h2>Pending activities</h2>" + table(["Seq", "Activity", "State", "Attempt", "Queue"], acts,
                                                    empty="None.")),
        Html("<h2>Pending timers</h2>" + table(["Seq", "Delay (s)", "Kind", "Fires at (UTC)"], timers,
                                                empty="None.")),
        Html(f"<h2>History ({len(events)} events)</h2>" + _timeline(events)),
    ]
    live = Html(f'<div id="live" data-refresh="{"1" if is_open else "0"}">' + "".join(sections) + "</div>")
    return f"Workflow {workflow_id}", live, is_open


def activities_page(engine: Engine, namespace: str, query: Dict[str, str]) -> Tuple[str, Html]:
    with engine.tx():
        listing = control.list_activities(engine, namespace, {"page_size": "1000"})
    rows = [[a["activity_id"], a.get("activity_type"), status_badge(a.get("activity_status")), a["task_queue"],
             a.get("attempt_count"), a.get("started_at"), a.get("closed_at") or "",
             payload_block(a.get("result")) if a.get("result") is not None else
             (esc((a.get("failure") or {}).get("message")) if isinstance(a.get("failure"), dict) else "")]
            for a in reversed(listing["activities"])]
    return "Standalone activities", table(
        ["Activity id", "Type", "Status", "Task queue", "Attempts", "Started", "Closed", "Result / failure"], rows,
        empty="No standalone activities.", css="activities")


def _status_block(item: Dict[str, Any]) -> Html:
    """What the worker's last heartbeat said: free slots, CPU and the memory figure (the memory
    admission gate's working set where the worker runs one), then the raw block."""
    metrics = item.get("process_metrics") or {}
    slots = item.get("task_slots") or {}
    facts = []
    if "activity_available" in slots or "workflow_available" in slots:
        facts.append(f"free slots: activity {slots.get('activity_available', '?')}, "
                     f"workflow {slots.get('workflow_available', '?')}")
    if isinstance(metrics.get("cpu_percent"), (int, float)):
        facts.append(f"CPU {metrics['cpu_percent']}%")
    if isinstance(metrics.get("memory_bytes"), int):
        facts.append(f"memory {metrics['memory_bytes'] / (1024 * 1024):.1f} MiB")
    raw = payload_block_plain({"task_slots": slots, "process_metrics": metrics}) if slots or metrics else ""
    return Html(f'<div class="status-block">{esc("; ".join(facts))}</div>{raw}')


def payload_block_plain(value: Any) -> Html:
    return Html(f'<pre class="payload">{esc(json.dumps(value, indent=2, sort_keys=True, default=str))}</pre>')


def workers_page(engine: Engine, namespace: str, query: Dict[str, str]) -> Tuple[str, Html]:
    with engine.tx():
        listing = workers.list_workers(engine, namespace, query.get("task_queue") or None, None)
    rows = [[w["worker_id"], w["task_queue"], status_badge(w["status"]), w.get("runtime") or "",
             w.get("max_concurrent_activity_tasks"), w.get("max_concurrent_workflow_tasks"),
             w.get("last_heartbeat_at") or w.get("registered_at"), _status_block(w)]
            for w in listing["workers"]]
    return "Workers", table(["Worker id", "Task queue", "Status", "Runtime", "Activity slots", "Workflow slots",
                             "Last heartbeat", "Status block"], rows, empty="No workers registered.", css="workers")


def task_queues_page(engine: Engine, namespace: str, query: Dict[str, str]) -> Tuple[str, Html]:
    queues: Dict[str, Dict[str, int]] = {}

    def bump(queue: Any, key: str, by: int = 1) -> None:
        counts = queues.setdefault(str(queue), {"workers": 0, "workflow_tasks": 0, "activities_ready": 0,
                                                 "activities_running": 0, "open_runs": 0})
        counts[key] += by

    with engine.tx():
        for w in workers.list_workers(engine, namespace, None, None)["workers"]:
            bump(w["task_queue"], "workers", 1 if w["status"] == "active" else 0)
        for task in engine.store.select("wf_tasks", "namespace = ? AND state = 'ready'", (namespace,)):
            bump(task["task_queue"], "workflow_tasks")
        for act in engine.store.select("activities", "namespace = ? AND state IN ('ready', 'leased')", (namespace,)):
            bump(act["task_queue"], "activities_ready" if act["state"] == "ready" else "activities_running")
        for run in engine.store.select("runs", "namespace = ? AND is_current = 1", (namespace,)):
            bump(run["task_queue"], "open_runs", 0 if run["status"] in TERMINAL_STATUSES else 1)
    rows = [[link("/ui/workers", q, namespace=namespace, task_queue=q), c["workers"], c["open_runs"],
             c["workflow_tasks"], c["activities_ready"], c["activities_running"]] for q, c in sorted(queues.items())]
    return "Task queues", table(["Task queue", "Active workers", "Open runs", "Workflow tasks waiting",
                                 "Activities waiting", "Activities running"], rows, empty="No task queues in use.",
                                css="queues")


def schedules_page(engine: Engine, namespace: str, query: Dict[str, str]) -> Tuple[str, Html]:
    with engine.tx():
        listing = schedules.list_schedules(engine, namespace, {"page_size": "1000"})
    rows = []
    for item in listing["schedules"]:
        latest = item.get("latest_workflow_instance_id")
        rows.append([item["schedule_id"], status_badge(item["status"]), item.get("workflow_type") or "",
                     item.get("spec") or {}, item.get("overlap_policy") or "", item.get("fires_count"),
                     item.get("next_fire_at") or "—", item.get("last_fired_at") or "—",
                     _run_link(namespace, latest) if latest else ""])
    return "Schedules", table(["Schedule id", "Status", "Workflow type", "Spec", "Overlap", "Fired", "Next fire",
                               "Last fire", "Latest run"], rows, empty="No schedules.", css="schedules")


def not_found(error: ApiError) -> Html:
    return Html(f'<p class="empty">{esc(error.message)}</p><p>{link("/ui/workflows", "Back to workflows")}</p>')
