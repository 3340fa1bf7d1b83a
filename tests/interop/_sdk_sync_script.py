"""An operator script written against the published blocking facade, ``durable_workflow.sync``.

It calls every public method of ``durable_workflow.sync.Client`` (2.12) and of its workflow,
schedule and standalone-activity handles, and records what each call gave: ``("ok", summary)``
or ``("error", kind, status, reason)``. ``tests/interop/test_sync_client_swap.py`` runs this
source twice against the dev server: as it is on the published SDK, and with only its import
line replaced by ``from sync_worker.client import ...``; the two records must be the same.

Only the SDK's documented surface is used here (keyword names, ``args=[...]`` lists, handles).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Tuple

from durable_workflow.sync import Client, ScheduleAction, ScheduleSpec

Record = List[Tuple[Any, ...]]
# error kinds by class name, the same in both clients (the published SDK's errors do not all carry
# the HTTP status, so the record keeps the kind only)
_KINDS = ("WorkflowFailed", "WorkflowCancelled", "WorkflowTerminated", "WorkflowTimedOut", "TimeoutError",
          "ValueError", "TypeError", "InvalidArgument", "Unauthorized", "Forbidden", "WorkflowNotFound",
          "ScheduleNotFound", "NamespaceNotFound", "WorkflowAlreadyStarted", "SignalFailed", "QueryFailed",
          "UpdateFailed", "UpdateRejected", "ServerError", "DurableWorkflowError")


def _error(exc: BaseException) -> Tuple[Any, ...]:
    kind = next((c.__name__ for c in type(exc).__mro__ if c.__name__ in _KINDS), type(exc).__name__)
    return ("error", kind)


def _step(record: Record, name: str, fn: Callable[[], Any], summary: Callable[[Any], Any] = lambda v: v) -> Any:
    try:
        value = fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # the published SDK's WorkflowCancelled may not be an Exception
        record.append((name, *_error(exc)))
        return None
    record.append((name, "ok", summary(value)))
    return value


def _until(predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError("condition not reached")


def _namespace(n: Any) -> Any:
    return (n.name, n.description, n.retention_days, n.status)


def run(server_url: str, queue: str, prefix: str) -> Record:
    record: Record = []
    with Client(server_url, namespace="default", timeout=30.0) as client:
        _step(record, "health", client.health, lambda v: v.get("status"))

        # -- namespaces -------------------------------------------------------------------
        ns = f"{prefix}-ns"
        _step(record, "create_namespace", lambda: client.create_namespace(ns, description="scripted",
                                                                          retention_days=7), _namespace)
        _step(record, "describe_namespace", lambda: client.describe_namespace(ns), _namespace)
        _step(record, "update_namespace", lambda: client.update_namespace(ns, description="rescripted"), _namespace)
        _step(record, "list_namespaces", client.list_namespaces,
              lambda v: sorted(n.name for n in v.namespaces if n.name in ("default", ns)))
        _step(record, "set_namespace_external_storage", lambda: client.set_namespace_external_storage(
            ns, driver="local", threshold_bytes=1024), lambda v: v.name)
        _step(record, "test_external_storage", lambda: client.test_external_storage(driver="local"),
              lambda v: v.status)
        _step(record, "delete_namespace", lambda: client.delete_namespace(ns), lambda v: (v.name, v.status))

        # -- one workflow, every message and read -----------------------------------------
        wid = f"{prefix}-order"
        handle = _step(record, "start_workflow", lambda: client.start_workflow(
            workflow_type="script.order", task_queue=queue, workflow_id=wid, input=[{"sku": "A-1", "qty": 2}],
            memo={"source": "script"}), lambda h: (h.workflow_id, h.workflow_type, h.run_id is not None))
        _until(lambda: client.query_workflow(wid, "stage")["result"] == "waiting")
        _step(record, "repair_workflow", lambda: client.repair_workflow(wid), lambda v: v.outcome)  # an open run
        _step(record, "handle.repair", lambda: handle.repair(), lambda v: v.outcome)
        _step(record, "query_workflow", lambda: client.query_workflow(wid, "stage")["result"])
        _step(record, "handle.query", lambda: handle.query("stage")["result"])
        _step(record, "update_workflow", lambda: client.update_workflow(
            wid, "set_note", args=["first"], wait_for="completed")["result"])
        _step(record, "handle.update", lambda: handle.update("set_note", ["second"], wait_for="completed")["result"])
        _step(record, "handle.signal", lambda: "request_id" in handle.signal("approve", ["grace"]))
        _step(record, "signal_workflow", lambda: "request_id" in client.signal_workflow(
            wid, "approve", args=["ada"], request_id=f"{prefix}-sig"))
        _step(record, "handle.result", lambda: handle.result(timeout=30))
        _step(record, "get_result", lambda: client.get_result(handle, timeout=30))
        _step(record, "describe_workflow", lambda: client.describe_workflow(wid),
              lambda v: (v.workflow_id, v.workflow_type, v.status, v.input, v.output, v.memo))
        _step(record, "handle.describe", lambda: handle.describe().status)
        _step(record, "list_workflows", lambda: client.list_workflows(workflow_type="script.order", page_size=100),
              lambda v: [e.workflow_id for e in v.executions if e.workflow_id == wid])
        runs = _step(record, "list_workflow_runs", lambda: client.list_workflow_runs(wid),
                     lambda v: (v.workflow_id, v.run_count, [r.status for r in v.runs]))
        run_id = runs.runs[0].run_id if runs else handle.run_id
        _step(record, "handle.list_runs", lambda: handle.list_runs().run_count)
        _step(record, "describe_workflow_run", lambda: client.describe_workflow_run(wid, run_id),
              lambda v: (v.run_id == run_id, v.status, v.workflow_type))
        _step(record, "handle.describe_run", lambda: handle.describe_run().status)
        _step(record, "get_history", lambda: client.get_history(wid, run_id),
              lambda v: [e["event_type"] for e in v["events"]][:1] + [e["event_type"] for e in v["events"]][-1:])
        _step(record, "handle.get_history", lambda: len(handle.get_history()["events"]) > 3)
        _step(record, "export_history", lambda: client.export_history(wid, run_id), lambda v: v.get("schema"))
        _step(record, "handle.export_history", lambda: handle.export_history(), lambda v: v.get("schema"))
        _step(record, "archive_workflow", lambda: client.archive_workflow(wid, reason="scripted"),
              lambda v: v.outcome)
        _step(record, "handle.archive", lambda: handle.archive(reason="again"), lambda v: v.outcome)

        # -- failures, redrive, cancel, terminate -----------------------------------------
        failing = client.start_workflow(workflow_type="script.fail", task_queue=queue, workflow_id=f"{prefix}-fail",
                                        input=["boom"])
        _step(record, "get_result (failed)", lambda: client.get_result(failing, timeout=30))
        _step(record, "redrive_workflow", lambda: client.redrive_workflow(failing.workflow_id, failing.run_id or ""),
              lambda v: v.outcome)
        _step(record, "handle.redrive", lambda: failing.redrive(request_id=f"{prefix}-redrive"), lambda v: v.outcome)
        for name, stop in (("cancel_workflow", lambda h: client.cancel_workflow(h.workflow_id, reason="scripted")),
                           ("handle.cancel", lambda h: h.cancel(reason="scripted")),
                           ("terminate_workflow", lambda h: client.terminate_workflow(h.workflow_id, reason="ops")),
                           ("handle.terminate", lambda h: h.terminate(reason="ops"))):
            waiting = client.start_workflow(workflow_type="script.wait", task_queue=queue,
                                            workflow_id=f"{prefix}-{name}")
            _step(record, name, lambda stop=stop, waiting=waiting: stop(waiting))
            _step(record, f"{name} -> result", lambda waiting=waiting: waiting.result(timeout=30))

        # -- standalone activities --------------------------------------------------------
        activity = _step(record, "start_activity", lambda: client.start_activity(
            activity_type="script.double", task_queue=queue, activity_id=f"{prefix}-act", input=[21],
            retry_policy={"max_attempts": 1}), lambda h: (h.activity_id, h.activity_type))
        _step(record, "activity.result", lambda: activity.result(timeout=30))
        _step(record, "get_activity_result", lambda: client.get_activity_result(activity, timeout=30))
        _step(record, "describe_activity", lambda: client.describe_activity(f"{prefix}-act"),
              lambda v: (v.activity_id, v.activity_type, v.status, v.result))
        _step(record, "activity.describe", lambda: activity.describe().status)
        _step(record, "list_activities", lambda: client.list_activities(status="completed", page_size=100),
              lambda v: [a.activity_id for a in v.activities if a.activity_id == f"{prefix}-act"])
        _step(record, "get_activity_handle", lambda: client.get_activity_handle(f"{prefix}-act").describe().status)
        exploding = client.start_activity(activity_type="script.explode", task_queue=queue,
                                          activity_id=f"{prefix}-explode", retry_policy={"max_attempts": 1})
        _step(record, "activity.result (failed)", lambda: exploding.result(timeout=30))
        _step(record, "activity.cancel (closed)", lambda: exploding.cancel(reason="late"))

        # -- task queues and build ids ----------------------------------------------------
        _step(record, "list_task_queues", client.list_task_queues,
              lambda v: [q.name for q in v.task_queues if q.name == queue])
        _step(record, "describe_task_queue", lambda: client.describe_task_queue(queue), lambda v: v.name)
        _step(record, "list_task_queue_build_ids", lambda: client.list_task_queue_build_ids(queue),
              lambda v: (v.task_queue, sorted(str(c.build_id) for c in v.build_ids)))
        for verb in ("drain", "promote", "resume"):
            method = getattr(client, f"{verb}_task_queue_build_id")
            _step(record, f"{verb}_task_queue_build_id", lambda method=method: method(queue, "build-1"),
                  lambda v: (v.task_queue, v.build_id, v.drain_intent))

        # -- schedules --------------------------------------------------------------------
        sid = f"{prefix}-sched"
        action = ScheduleAction(workflow_type="script.wait", task_queue=queue, input=["scheduled"])
        schedule = _step(record, "create_schedule", lambda: client.create_schedule(
            schedule_id=sid, spec=ScheduleSpec(cron_expressions=["0 0 1 1 *"], timezone="UTC"), action=action,
            overlap_policy="allow_all", paused=True, note="scripted"), lambda h: h.schedule_id)
        _step(record, "describe_schedule", lambda: client.describe_schedule(sid),
              lambda v: (v.schedule_id, v.status, v.overlap_policy, v.note))
        _step(record, "list_schedules", lambda: client.list_schedules(page_size=100),
              lambda v: [s.schedule_id for s in v.schedules if s.schedule_id == sid])
        _step(record, "update_schedule", lambda: client.update_schedule(sid, note="rescheduled", jitter_seconds=0))
        _step(record, "resume_schedule", lambda: client.resume_schedule(sid, note="resume"))
        _step(record, "pause_schedule", lambda: client.pause_schedule(sid, note="pause"))
        _step(record, "trigger_schedule", lambda: client.trigger_schedule(sid), lambda v: (v.schedule_id, v.outcome))
        _step(record, "backfill_schedule", lambda: client.backfill_schedule(
            sid, start_time="2026-01-01T00:00:00Z", end_time="2026-01-01T00:00:01Z"),
            lambda v: (v.schedule_id, v.outcome))
        if schedule is None:
            schedule = client.get_schedule_handle(sid)
        _step(record, "schedule.describe", lambda: schedule.describe().note)
        _step(record, "schedule.update", lambda: schedule.update(overlap_policy="skip"))
        _step(record, "schedule.resume", lambda: schedule.resume())
        _step(record, "schedule.pause", lambda: schedule.pause(note="again"))
        _step(record, "schedule.trigger", lambda: schedule.trigger(overlap_policy="allow_all"), lambda v: v.outcome)
        _step(record, "schedule.backfill", lambda: schedule.backfill(
            start_time="2026-01-01T00:00:00Z", end_time="2026-01-01T00:00:01Z"), lambda v: v.outcome)
        _step(record, "schedule.delete", lambda: client.get_schedule_handle(sid).delete())
        _step(record, "delete_schedule (gone)", lambda: client.delete_schedule(sid))
    return record


def record_as_dict(record: Record) -> Dict[str, Tuple[Any, ...]]:
    return {entry[0]: entry[1:] for entry in record}
