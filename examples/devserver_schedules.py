"""Namespaces and schedules on the embedded dev server, fired on its own clock.

Creates a namespace, runs a worker in it, and adds

* a schedule firing every second (three runs at most, then it deletes itself),
* a weekday-morning cron schedule in Europe/Paris (paused; triggered once by hand),
* a backfill of the cron schedule over a past week,

then prints each schedule's audit history and the runs' results.

    python examples/devserver_schedules.py
"""

from __future__ import annotations

import threading
import time
from typing import Any

from sync_worker import workflow
from sync_worker.client import Client, ScheduleAction, ScheduleSpec
from sync_worker.devserver import DevServer
from sync_worker.worker import Worker


@workflow.defn(name="reports.nightly")
class NightlyReport:
    def run(self, ctx: Any, region: str) -> Any:
        return {"region": region, "report": f"{region} is fine"}
        yield  # a workflow is a generator, even one that finishes at once


def main() -> None:
    with DevServer(port=0, db=":memory:") as server:
        admin = Client(server.url)
        team = admin.create_namespace("reports", description="Report workflows", retention_days=14)
        print(f"namespace {team.name}: retention {team.retention_days} days")
        client = Client(server.url, namespace="reports")
        worker = Worker(client, task_queue="reports", workflows=[NightlyReport], poll_timeout=1.0)
        runner = threading.Thread(target=worker.run, name="reports-worker", daemon=True)
        runner.start()
        try:
            client.create_schedule(
                schedule_id="every-second", spec=ScheduleSpec(intervals=[{"every": "PT1S"}]),
                action=ScheduleAction(workflow_type="reports.nightly", task_queue="reports", input=["eu-west"]),
                overlap_policy="allow_all", max_runs=3)
            cron = client.create_schedule(
                schedule_id="weekday-morning",
                spec=ScheduleSpec(cron_expressions=["30 7 * * 1-5"], timezone="Europe/Paris"),
                action=ScheduleAction(workflow_type="reports.nightly", task_queue="reports", input=["paris"]),
                paused=True, note="waiting for go-live")
            paused = cron.describe()
            print(f"weekday-morning: {paused.status}, next_fire_at={paused.next_fire_at}")
            print(f"trigger while paused: {cron.trigger().outcome}")
            cron.resume(note="live")
            print(f"weekday-morning next fire: {cron.describe().next_fire_at}")
            manual = cron.trigger()
            print(f"manual trigger: {manual.outcome} -> {client.get_result(manual.workflow_id or '', timeout=20)}")
            backfill = cron.backfill(start_time="2026-04-06T00:00:00Z", end_time="2026-04-13T00:00:00Z",
                                     overlap_policy="allow_all")
            print(f"backfill of a week: {backfill.fires_attempted} fires")

            deadline = time.monotonic() + 20
            while "ScheduleDeleted" not in [e.event_type for e in
                                            client.get_schedule_history("every-second", limit=100).events]:
                if time.monotonic() > deadline:
                    raise SystemExit("the schedule never fired three times")
                time.sleep(0.1)
            history = client.get_schedule_history("every-second", limit=100)
            print("every-second audit: " + ", ".join(str(e.event_type) for e in history.events))
            for event in history.events:
                if event.event_type == "ScheduleTriggered":
                    result = client.get_result(event.workflow_instance_id or "", timeout=20)
                    payload = event.payload or {}
                    print(f"  run {payload['trigger_number']} at {payload['occurrence_time']}: {result}")
        finally:
            worker.stop()
            runner.join(30)
            client.close()
            admin.close()


if __name__ == "__main__":
    main()
