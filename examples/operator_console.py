"""Operate a Durable Workflow server from Python and from the shell.

Runs the embedded dev server and a worker in this process, then

1. drives it with ``sync_worker.client.Client`` written exactly as for the published blocking
   facade (``from durable_workflow.sync import Client, ScheduleAction, ScheduleSpec`` works the
   same with only that import changed): a workflow with an update, a query and a signal, a
   schedule, a standalone activity whose failure names its type and message;
2. runs the ``sync-worker`` operator commands against it as a shell would.

    python examples/operator_console.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any, List

from sync_worker import activity, errors, workflow
from sync_worker.client import Client, ScheduleAction, ScheduleSpec
from sync_worker.devserver import DevServer
from sync_worker.worker import Worker


@workflow.defn(name="console.ticket")
class Ticket:
    def __init__(self) -> None:
        self.notes: List[str] = []
        self.closed = False

    @workflow.update("add_note")
    def add_note(self, note: str) -> int:
        self.notes.append(note)
        return len(self.notes)

    @workflow.query("notes")
    def current(self) -> List[str]:
        return list(self.notes)

    @workflow.signal("close")
    def close(self) -> None:
        self.closed = True

    def run(self, ctx: Any, title: str) -> Any:
        yield ctx.wait_condition(lambda: self.closed)
        return {"title": title, "notes": self.notes}


@activity.defn(name="console.charge")
def charge(cents: int) -> str:
    if cents > 10_000:
        raise PermissionError(f"{cents} cents needs a manager")
    return f"charged {cents}"


def main() -> None:
    with DevServer(port=0, db=":memory:") as server:
        client = Client(server.url, namespace="default")
        worker = Worker(client, task_queue="console", workflows=[Ticket], activities=[charge], poll_timeout=1.0)
        runner = threading.Thread(target=worker.run, name="console-worker", daemon=True)
        runner.start()
        try:
            script(client)
            shell(server.url)
        finally:
            worker.stop()
            runner.join(30)
            client.close()


def script(client: Client) -> None:
    handle = client.start_workflow(workflow_type="console.ticket", task_queue="console", workflow_id="ticket-1",
                                   input=["printer on fire"])
    print("update ->", handle.update("add_note", ["unplugged it"], wait_for="completed")["result"])
    print("query ->", handle.query("notes")["result"])
    handle.signal("close")
    print("result ->", handle.result(timeout=30))

    schedule = client.create_schedule(
        schedule_id="nightly-ticket", spec=ScheduleSpec(cron_expressions=["0 2 * * *"], timezone="UTC"),
        action=ScheduleAction(workflow_type="console.ticket", task_queue="console", input=["nightly check"]),
        overlap_policy="skip", note="created by the console example")
    print("schedule ->", schedule.describe().status, client.trigger_schedule("nightly-ticket").outcome)

    ok = client.start_activity(activity_type="console.charge", task_queue="console", input=[1999])
    print("activity ->", ok.result(timeout=30))
    refused = client.start_activity(activity_type="console.charge", task_queue="console", input=[50_000],
                                    retry_policy={"max_attempts": 1})
    try:
        refused.result(timeout=30)
    except errors.StandaloneActivityFailed as exc:
        print("activity failed ->", exc.failure_type, "|", exc.failure_message)


def shell(server_url: str) -> None:
    env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=server_url)
    for argv in (["workflow", "list", "--type", "console.ticket"], ["schedule", "list"],
                 ["workflow", "describe", "no-such-ticket"]):
        done = subprocess.run([sys.executable, "-m", "sync_worker.cli", *argv], env=env, capture_output=True,
                              text=True, timeout=60)
        print(f"$ sync-worker {' '.join(argv)}   (exit {done.returncode})")
        print((done.stdout or done.stderr).rstrip())


if __name__ == "__main__":
    main()
