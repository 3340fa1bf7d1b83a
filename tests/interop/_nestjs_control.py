"""The control: the published asyncio ``durable-worker`` 0.26.1 serving the same steps.

Run by the interpreter of its own virtualenv (``SYNC_WORKER_NESTJS_CONTROL_PYTHON``, made by
``scripts/prepare.d/40-nestjs.sh``), never imported by the test process:

    python _nestjs_control.py redis://HOST:PORT/DB PREFIX [LOCK_SECONDS [CONCURRENCY]]
    python _nestjs_control.py postgresql://... PREFIX [LEASE_SECONDS]   (tables made by the harness)
    python _nestjs_control.py mysql://... PREFIX [LEASE_SECONDS]        (the same, MySQL dialect)
    python _nestjs_control.py sqs+http://HOST:PORT PREFIX [VISIBILITY_SECONDS]   (moto; dot-free names)

LOCK_SECONDS shortens the BullMQ lock and stalled-check interval of the published worker (its
defaults are 30 s) the same way our worker is configured in the kill test, so both recover a killed
worker's step on the same clock. Everything else is the SDK's default behaviour.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _nestjs_steps import install
from _nestjs_workflows import GROUP
from _nestjs_workflows import install as install_workflows
from durable_worker import FatalError, StepFailed, Worker, WorkflowWorker

GROUPS = ["payments.charge-card", "payments.declined", "payments.flaky", "payments.slow", "payments.progress",
          "bench.echo", "bench.sleep"]


def build(sep: str = ".") -> Worker:
    worker = Worker()
    install(lambda name: worker.step(name, blocking=True), FatalError, sep)
    return worker


def serve_sqs(endpoint: str, prefix: str, visibility: float) -> None:
    import threading

    import boto3
    from durable_worker.sqs_runner import run_sqs_worker

    worker = build("-")
    # run_sqs_worker only resolves queue URLs; make the queues first (as the engine's autoCreate does).
    client = boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint)
    for name in [f"{prefix}-tasks-{g.replace('.', '-')}" for g in GROUPS] + [f"{prefix}-results"]:
        client.create_queue(QueueName=name)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    loops = [threading.Thread(target=run_sqs_worker, args=(worker,), daemon=True, kwargs=dict(
        group=g.replace(".", "-"), prefix=prefix, region="us-east-1", endpoint_url=endpoint,
        wait_time_seconds=1, visibility_timeout=int(visibility), stop=stop)) for g in GROUPS]
    for loop in loops:
        loop.start()
    print("control ready", flush=True)
    while not stop.wait(0.2):
        pass
    for loop in loops:
        loop.join(5)


async def serve_redis(url: str, prefix: str, lock_seconds: float, concurrency: int) -> None:
    import bullmq
    from durable_worker import redis_runner

    base = bullmq.Worker  # run_redis_worker imports it by name at call time

    class TunedWorker(base):  # type: ignore[misc, valid-type]
        def __init__(self, name, processor, opts=None):  # type: ignore[no-untyped-def]
            opts = dict(opts or {})
            opts.setdefault("lockDuration", int(lock_seconds * 1000))
            opts.setdefault("stalledInterval", int(lock_seconds * 1000))
            super().__init__(name, processor, opts)

    bullmq.Worker = TunedWorker
    handle = await redis_runner.run_redis_worker(build(), connection=url, prefix=prefix,
                                                concurrency=concurrency)
    # The split WorkflowWorker on the group the engine's `engine.remote(name, {group})` dispatches to.
    workflows = WorkflowWorker(group=GROUP, auto_register=False)
    install_workflows(workflows.workflow, StepFailed, step_group="default")
    turns = await redis_runner.run_redis_workflow_worker(workflows, group=GROUP, connection=url, prefix=prefix)
    print("control ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await turns.close()
    await handle.close()


async def serve_db(dsn: str, prefix: str, lease_seconds: float, dialect: str) -> None:
    from durable_worker.db_runner import run_db_worker

    worker = build()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    groups = GROUPS
    print("control ready", flush=True)
    await asyncio.gather(*(run_db_worker(worker, group=g, dsn=dsn, dialect=dialect, prefix=prefix,
                                         poll_ms=100, lease_ms=int(lease_seconds * 1000), stop=stop,
                                         auto_create=False)  # five loops would race on CREATE TABLE
                           for g in groups))


def main() -> None:
    url, prefix = sys.argv[1], sys.argv[2]
    lease = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
    concurrency = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    if url.startswith("sqs+"):
        serve_sqs(url[len("sqs+"):], prefix, lease)
    elif url.startswith("redis"):
        asyncio.run(serve_redis(url, prefix, lease, concurrency))
    else:
        asyncio.run(serve_db(url, prefix, lease, "mysql" if url.startswith("mysql") else "postgres"))


if __name__ == "__main__":
    main()
