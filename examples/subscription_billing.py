"""Subscription billing: workflows that wait for days, tested in milliseconds on a virtual clock.

    python examples/subscription_billing.py        # runs each workflow in a time-skipping environment

* ``billing.renewal`` waits a month (a durable timer), then charges the card;
* ``billing.trial`` waits up to 7 days for an ``upgrade`` signal, else ends the trial;
* ``billing.collect`` charges a card that declines twice; the server retries hours apart;
* ``billing.daily_report`` is what a schedule starts every day.

``tests/e2e/test_time_skipping_examples.py`` tests each of them with the pytest plugin's
``durable_env`` fixture; docs/testing.md walks through it. A month-long workflow in production
also needs a run timeout longer than a month: the client's defaults (600 s run, 3600 s
execution, as in the published SDK) are deadlines like any other, and the virtual clock reaches them.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from sync_worker import activity, workflow

DAY = 86_400
HOUR = 3_600
#: Timeouts for runs that last weeks (the start defaults would end them after 10 minutes).
LONG_RUN = {"execution_timeout_seconds": 90 * DAY, "run_timeout_seconds": 90 * DAY}

#: Card numbers whose charge declines on the first attempts (a stand-in for a payment provider).
FLAKY_CARDS: Dict[str, int] = {}


@activity.defn(name="billing.charge")
def charge(account: str, cents: int) -> str:
    attempt = activity.context().info.attempt_number
    declines = FLAKY_CARDS.get(account, 0)
    if attempt <= declines:
        raise RuntimeError(f"card of {account} declined (attempt {attempt})")
    return f"receipt-{account}-{cents}-attempt-{attempt}"


@activity.defn(name="billing.email")
def email(account: str, text: str) -> str:
    return f"to {account}: {text}"


@workflow.defn(name="billing.renewal")
class Renewal:
    """Renew a subscription after a month."""

    def run(self, ctx: Any, account: str, cents: int) -> Any:
        yield ctx.sleep(30 * DAY)
        receipt = yield ctx.schedule_activity("billing.charge", [account, cents], start_to_close_timeout=60)
        return {"account": account, "receipt": receipt}


@workflow.defn(name="billing.trial")
class Trial:
    """A 7-day trial that ends early when the customer upgrades."""

    def __init__(self) -> None:
        self.plan: Optional[str] = None

    @workflow.signal("upgrade")
    def upgrade(self, plan: str) -> None:
        self.plan = plan

    @workflow.query("plan")
    def current_plan(self) -> Optional[str]:
        return self.plan

    def run(self, ctx: Any, account: str) -> Any:
        upgraded = yield ctx.wait_condition(lambda: self.plan is not None, key="upgrade", timeout=7 * DAY)
        if not upgraded:
            yield ctx.schedule_activity("billing.email", [account, "your trial ended"], start_to_close_timeout=60)
            return {"account": account, "outcome": "trial ended"}
        return {"account": account, "outcome": f"upgraded to {self.plan}"}


@workflow.defn(name="billing.collect")
class Collect:
    """Charge a card; a decline is retried by the server after 1, then 2, then 4 hours."""

    def run(self, ctx: Any, account: str, cents: int) -> Any:
        receipt = yield ctx.schedule_activity(
            "billing.charge", [account, cents], start_to_close_timeout=60,
            retry_policy=workflow.ActivityRetryPolicy(max_attempts=4, backoff_seconds=[HOUR, 2 * HOUR, 4 * HOUR]))
        return receipt


@workflow.defn(name="billing.daily_report")
class DailyReport:
    """What the daily schedule starts: a report stamped with the run's start day."""

    def run(self, ctx: Any, region: str) -> Any:
        day = ctx.now().date().isoformat()  # the run's recorded start time: the virtual clock's
        text = yield ctx.schedule_activity("billing.email", ["finance", f"{region} report for {day}"],
                                           start_to_close_timeout=60)
        return {"day": day, "sent": text}


WORKFLOWS: List[type] = [Renewal, Trial, Collect, DailyReport]
ACTIVITIES = [charge, email]


def main() -> None:
    from sync_worker.client import ScheduleAction, ScheduleSpec
    from sync_worker.testing import WorkflowEnvironment

    with WorkflowEnvironment.start_time_skipping() as env, \
            env.worker(workflows=WORKFLOWS, activities=ACTIVITIES):
        client, queue = env.client, env.task_queue

        started = time.perf_counter()
        renewal = client.start_workflow("billing.renewal", "acct-1", 1999, task_queue=queue, **LONG_RUN)
        print("renewal:", renewal.result(), f"({time.perf_counter() - started:.2f} s of wall time)")

        trial = client.start_workflow("billing.trial", "acct-2", task_queue=queue, **LONG_RUN)
        env.sleep(3 * DAY)
        trial.signal("upgrade", ["pro"])
        print("trial after 3 days:", trial.result())

        FLAKY_CARDS["acct-3"] = 2
        before = env.time()
        collect = client.start_workflow("billing.collect", "acct-3", 500, task_queue=queue, **LONG_RUN)
        print("collect:", collect.result(), f"after {(env.time() - before) / HOUR:.1f} virtual hours")

        client.create_schedule(schedule_id="daily-report", spec=ScheduleSpec(intervals=[{"every": "P1D"}]),
                               action=ScheduleAction("billing.daily_report", task_queue=queue, input=["eu"]))
        env.sleep(7 * DAY)
        reports = [run for run in client.list_workflows(workflow_type="billing.daily_report").executions]
        print(f"daily reports after a week: {len(reports)}")
        print(f"virtual time skipped: {env.time_skipped / DAY:.1f} days")


if __name__ == "__main__":
    main()
