"""Redis / BullMQ transport: the queues ``@dudousxd/nestjs-durable-transport-bullmq`` dispatches to.

Names (``P`` = the prefix, ``durable`` by default, plus ``-<namespace>`` for a non-default one):

* tasks: one BullMQ queue per step name, ``P-tasks-<token>`` (jobs named ``task``), consumed here
  with BullMQ's job semantics (:mod:`sync_worker.nestjs.bullmq`): lock on fetch, renewed every
  ``lock_duration/2`` while the step runs, a stalled check every ``stalled_interval`` that puts a
  crashed worker's job back in wait (after ``max_stalled_count`` stalls it fails, and that failure is
  bridged to the engine as a retryable step failure so the run does not hang);
* results: ``P-results``, one ``result`` job per step outcome (``removeOnComplete/removeOnFail``);
* workflow turns (a :class:`~sync_worker.nestjs.WorkflowWorker`): ``workflow`` jobs on the group's
  ``P-tasks-<group>``, consumed with the same job semantics; each decision is a ``decision`` job on
  ``P-decisions``; a turn job that stalls out is failed without a bridge (the engine re-drives a
  turn itself when ``remoteAdvanceSilenceMs`` passes without a decision);
* ``P-control`` (pub/sub): ``{"kind": "cancel", "runId"}`` feeds ``ctx.cancelled``; step events are
  published there live as ``{"kind": "event", "from", "event": {"type": "step.progress", runId, seq,
  name, event, at}}``, as the published Redis runner does;
* ``P-heartbeat`` (pub/sub): ``heartbeat_sync`` publishes ``{runId, seq, stepId}``, which re-arms the
  engine's liveness window for the step; a turn being replayed publishes ``{runId, seq: 0, group}``
  at once and every 5 s (no ``stepId``: the engine re-arms the run's decision deadline);
* ``P-worker-heartbeat:<token>:<instanceId>`` and ``P-worker-descriptor:<token>:<instanceId>``,
  refreshed every 10 s with a 35 s TTL: how the engine finds live workers.

Engine retries are new ``task`` jobs with the same ``stepId`` and a higher ``attempt``; BullMQ's own
job retries are unused (``attempts: 0``).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import __version__
from ..cancel import CancelToken
from .bullmq import BullJob, BullQueue, wait_for_marker
from .descriptor import (
    HEARTBEAT_INTERVAL_SECONDS,
    HEARTBEAT_TTL_SECONDS,
    build_descriptor,
    descriptor_hash,
    heartbeat_value,
    routing_token,
)
from .runtime import NestjsWorker, new_token
from .transport import Delivery
from .workflows import is_workflow_task

__all__ = ["RedisTransport"]

logger = logging.getLogger("sync_worker.nestjs.redis")

_RESULT_OPTS = {"removeOnComplete": True, "removeOnFail": True}


def _now_ms() -> int:
    return int(time.time() * 1000)


class RedisTransport:
    """BullMQ over a synchronous ``redis`` client (threads and gevent alike)."""

    kind = "redis"

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "durable",
        namespace: Optional[str] = None,
        partition: Optional[str] = None,
        lock_duration: float = 30.0,
        stalled_interval: float = 30.0,
        max_stalled_count: int = 1,
        client: Any = None,
    ) -> None:
        if lock_duration <= 0 or stalled_interval <= 0 or max_stalled_count < 0:
            raise ValueError("lock_duration and stalled_interval must be > 0, max_stalled_count >= 0")
        self.url = url
        self.prefix = f"{prefix}-{namespace}" if namespace and namespace != "default" else prefix
        self.namespace = namespace
        self.partition = partition
        self.lease_seconds = float(lock_duration)
        self.stalled_interval = float(stalled_interval)
        self.max_stalled_count = int(max_stalled_count)
        self._client = client
        self._redis: Any = None
        self._blocking: Any = None
        self._queues: List[BullQueue] = []
        self._tokens: List[str] = []
        self._results: Optional[BullQueue] = None
        self._turns: Optional[BullQueue] = None
        self._decisions: Optional[BullQueue] = None
        self._turn_group = ""
        self._worker: Optional[NestjsWorker] = None
        self._next = 0
        self._next_stalled_check = 0.0
        self._next_heartbeat = 0.0
        self._descriptor: Dict[str, Any] = {}
        self._hash = ""

    # -- names -----------------------------------------------------------------------------------

    def tasks_queue(self, token: str) -> str:
        return f"{self.prefix}-tasks-{token}"

    @property
    def results_queue(self) -> str:
        return f"{self.prefix}-results"

    @property
    def decisions_queue(self) -> str:
        return f"{self.prefix}-decisions"

    @property
    def control_channel(self) -> str:
        return f"{self.prefix}-control"

    @property
    def heartbeat_channel(self) -> str:
        return f"{self.prefix}-heartbeat"

    def heartbeat_key(self, token: str, instance_id: str) -> str:
        return f"{self.prefix}-worker-heartbeat:{token}:{instance_id}"

    def descriptor_key(self, token: str, instance_id: str) -> str:
        return f"{self.prefix}-worker-descriptor:{token}:{instance_id}"

    # -- StepTransport ---------------------------------------------------------------------------

    def open(self, names: Sequence[str], worker: NestjsWorker) -> None:
        import redis  # the nestjs extra; imported here so the module loads without it

        self._worker = worker
        block = max(1.0, worker.idle_wait)
        if self._client is not None:
            self._redis = self._client
        else:
            self._redis = redis.Redis.from_url(self.url, decode_responses=True, socket_timeout=30.0,
                                               socket_connect_timeout=10.0, health_check_interval=30)
        # BZPOPMIN holds its connection for up to `block` seconds: give it its own pool (same server,
        # credentials and TLS, a socket timeout longer than the block).
        pool = self._redis.connection_pool
        self._blocking = redis.Redis(connection_pool=redis.ConnectionPool(
            connection_class=pool.connection_class,
            **{**pool.connection_kwargs, "socket_timeout": block + 10.0}))
        self._redis.ping()  # fail fast: a worker that cannot reach Redis does not start
        self._tokens = [routing_token(name, self.partition) for name in names]
        self._queues = [BullQueue(self._redis, self.tasks_queue(token)) for token in self._tokens]
        self._results = BullQueue(self._redis, self.results_queue)
        workflows = worker.workflows
        if workflows is not None:
            self._turn_group = workflows.token
            self._turns = BullQueue(self._redis, self.tasks_queue(self._turn_group))
            self._decisions = BullQueue(self._redis, self.decisions_queue)
            if self._turn_group not in self._tokens:
                self._tokens.append(self._turn_group)
        self._descriptor = build_descriptor(
            instance_id=worker.instance_id, steps=names, sdk_version=__version__, started_at_ms=_now_ms(),
            partition=self.partition, namespace=self.namespace,
            workflows=workflows.names if workflows is not None else (),
            registrations=workflows.registrations() if workflows is not None else None)
        self._hash = descriptor_hash(self._descriptor)
        self._write_heartbeats()
        self._next_heartbeat = worker.backend.monotonic() + HEARTBEAT_INTERVAL_SECONDS
        for queue in self._all_queues():  # recover what a previous (crashed) incarnation held
            self._check_stalled(queue)
        self._next_stalled_check = worker.backend.monotonic() + self.stalled_interval

    def claim(self) -> Optional[Delivery]:
        worker = self._require_worker()
        # Start at the queue that last had work (or whose marker woke us); rotate on a miss.
        for _ in range(len(self._queues)):
            queue = self._queues[self._next % len(self._queues)]
            job = queue.fetch(new_token(), int(self.lease_seconds * 1000), worker.instance_id, _now_ms())
            if job is None:
                self._next += 1
                continue
            delivery = self._delivery(job)
            if delivery is not None:
                return delivery
        return None

    def wait_for_work(self, timeout: float) -> None:
        # The fetcher calls this while it holds a free slot, so a popped marker is acted on at once;
        # fetch re-arms the marker when more jobs wait, waking a sibling blocked on the same queue.
        woke = wait_for_marker(self._blocking, self._queues, timeout)
        if woke is not None:
            self._next = [q.name for q in self._queues].index(woke)

    def claim_turn(self) -> Optional[Delivery]:
        worker = self._require_worker()
        if self._turns is None:
            return None
        job = self._turns.fetch(new_token(), int(self.lease_seconds * 1000), worker.instance_id, _now_ms())
        return None if job is None else self._turn_delivery(job)

    def wait_for_turn(self, timeout: float) -> None:
        if self._turns is None:
            self._require_worker().backend.sleep(timeout)
            return
        wait_for_marker(self._blocking, [self._turns], timeout)

    def settle_turn(self, delivery: Delivery, decision: Dict[str, Any], payload: str) -> None:
        job: BullJob = delivery.handle
        assert self._decisions is not None
        pipe = self._redis.pipeline(transaction=False)
        self._decisions.add("decision", payload, _RESULT_OPTS, _now_ms(), pipe=pipe)
        job.queue.finish(job.id, job.token, completed=True, value="null", now_ms=_now_ms(), pipe=pipe)
        outcome = int(pipe.execute()[-1])
        if outcome != 0:
            logger.warning("turn %s: its job %s was no longer ours when it finished (%d); the decision was "
                           "sent and the engine applies a turn's decision at most once", delivery.step_id,
                           job.id, outcome)

    def beat_run(self, delivery: Delivery) -> None:
        beat = {"runId": delivery.task.get("runId"), "seq": 0, "group": self._turn_group}
        self._redis.publish(self.heartbeat_channel, json.dumps(beat, separators=(",", ":")))

    def progress(self, delivery: Delivery, event: Dict[str, Any]) -> None:
        worker = self._require_worker()
        task = delivery.task
        message = {"kind": "event", "from": worker.instance_id, "event": {
            "type": "step.progress", "runId": task.get("runId"), "seq": task.get("seq"), "name": task.get("name"),
            "event": event, "at": event.get("at")}}
        self._redis.publish(self.control_channel, json.dumps(message, separators=(",", ":"), default=str))

    def settle(self, delivery: Delivery, result: Dict[str, Any], payload: str) -> None:
        job: BullJob = delivery.handle
        assert self._results is not None
        # One round trip: the result job, then the task job's completion (the engine ignores a
        # duplicate result, so the result goes out even when the lock was lost meanwhile).
        pipe = self._redis.pipeline(transaction=False)
        self._results.add("result", payload, _RESULT_OPTS, _now_ms(), pipe=pipe)
        job.queue.finish(job.id, job.token, completed=True, value="null", now_ms=_now_ms(), pipe=pipe)
        outcome = int(pipe.execute()[-1])
        if outcome != 0:
            logger.warning("step %s: its job %s was no longer ours when it finished (%d); the result was "
                           "sent and the engine ignores a duplicate", delivery.step_id, job.id, outcome)

    def renew(self, deliveries: Sequence[Delivery]) -> None:
        lock_ms = int(self.lease_seconds * 1000)
        for delivery in deliveries:
            job: BullJob = delivery.handle
            if delivery.lost:
                continue
            if not job.queue.extend_lock(job.id, job.token, lock_ms):
                delivery.lost = True
                logger.warning("step %s: lost the lock of job %s (it stalled and may run again elsewhere)",
                               delivery.step_id, job.id)

    def beat(self, delivery: Delivery) -> None:
        self.renew([delivery])
        task = delivery.task
        beat = {"runId": task.get("runId"), "seq": task.get("seq"), "stepId": delivery.step_id}
        self._redis.publish(self.heartbeat_channel, json.dumps(beat, separators=(",", ":")))

    def maintain(self, now: float) -> None:
        if now >= self._next_heartbeat:
            self._next_heartbeat = now + HEARTBEAT_INTERVAL_SECONDS
            self._write_heartbeats()
        if now >= self._next_stalled_check:
            self._next_stalled_check = now + self.stalled_interval
            for queue in self._all_queues():
                self._check_stalled(queue)

    def release(self, delivery: Delivery) -> None:
        job: BullJob = delivery.handle
        job.queue.release(job.id, job.token)

    def background(self) -> List[Tuple[str, Callable[[CancelToken], None]]]:
        return [("control", self._control_loop)]

    def close(self, *, clean: bool) -> None:
        worker = self._worker
        try:
            if clean and worker is not None and self._redis is not None:
                keys = [self.heartbeat_key(t, worker.instance_id) for t in self._tokens]
                keys += [self.descriptor_key(t, worker.instance_id) for t in self._tokens]
                if keys:
                    self._redis.delete(*keys)
        finally:
            for client in (self._blocking, None if self._client is not None else self._redis):
                if client is not None:
                    client.close()

    # -- internals -------------------------------------------------------------------------------

    def _require_worker(self) -> NestjsWorker:
        if self._worker is None:
            raise RuntimeError("RedisTransport used before open()")
        return self._worker

    def _all_queues(self) -> List[BullQueue]:
        return self._queues + ([self._turns] if self._turns is not None else [])

    def _turn_delivery(self, job: BullJob) -> Optional[Delivery]:
        failure = job.deferred_failure
        if failure is not None:  # the stalled check gave up on it; the engine re-drives a silent turn
            job.queue.finish(job.id, job.token, completed=False, value=failure, now_ms=_now_ms())
            logger.warning("workflow turn job %s failed at the broker (%s); the engine re-drives the run when "
                           "its decision deadline passes", job.id, failure)
            return None
        if not is_workflow_task(job.data) or not isinstance(job.data.get("runId"), str):
            reason = "not a nestjs-durable workflow task"
            logger.error("job %s on %s is %s; failing it", job.id, job.queue.name, reason)
            job.queue.finish(job.id, job.token, completed=False, value=reason, now_ms=_now_ms())
            return None
        return Delivery(job.data, job, kind="workflow")

    def _delivery(self, job: BullJob) -> Optional[Delivery]:
        task = job.data
        failure = job.deferred_failure
        if failure is not None:  # the stalled check gave up on it: fail the job, bridge the failure
            job.queue.finish(job.id, job.token, completed=False, value=failure, now_ms=_now_ms())
            if isinstance(task, dict) and {"runId", "seq", "stepId"} <= set(task):
                self._bridge_failure(task, failure)
            return None
        if not isinstance(task, dict) or not isinstance(task.get("runId"), str) or "seq" not in task:
            reason = "not a nestjs-durable step task"
            logger.error("job %s on %s is %s; failing it", job.id, job.queue.name, reason)
            job.queue.finish(job.id, job.token, completed=False, value=reason, now_ms=_now_ms())
            return None
        return Delivery(task, job)

    def _bridge_failure(self, task: Dict[str, Any], reason: str) -> None:
        assert self._results is not None
        result = {"runId": task["runId"], "seq": task["seq"], "stepId": task["stepId"], "status": "failed",
                  "error": {"message": f"remote step worker failed: {reason}", "retryable": True}}
        self._results.add("result", json.dumps(result, separators=(",", ":")), _RESULT_OPTS, _now_ms())
        logger.warning("step %s: its job failed at the broker (%s); reported as a retryable failure",
                       task["stepId"], reason)

    def _check_stalled(self, queue: BullQueue) -> None:
        stalled = queue.check_stalled(self.max_stalled_count, int(self.stalled_interval * 1000), _now_ms())
        if stalled:
            logger.warning("%s: %d stalled job(s) moved back to wait: %s", queue.name, len(stalled),
                           ", ".join(stalled))

    def _write_heartbeats(self) -> None:
        worker = self._require_worker()
        value = heartbeat_value(self._hash, worker.heartbeat_status())
        descriptor = json.dumps(self._descriptor, separators=(",", ":"))
        pipe = self._redis.pipeline(transaction=False)
        for token in self._tokens:
            pipe.set(self.heartbeat_key(token, worker.instance_id), value, ex=HEARTBEAT_TTL_SECONDS)
            pipe.set(self.descriptor_key(token, worker.instance_id), descriptor, ex=HEARTBEAT_TTL_SECONDS)
        pipe.execute()

    def _control_loop(self, cancel: CancelToken) -> None:
        worker = self._require_worker()
        pubsub = None
        while not cancel.cancelled:
            try:
                if pubsub is None:
                    pubsub = self._blocking.pubsub(ignore_subscribe_messages=True)
                    pubsub.subscribe(self.control_channel)
                message = pubsub.get_message(timeout=1.0)
            except Exception as error:
                logger.warning("control channel %s: %s; resubscribing", self.control_channel, type(error).__name__)
                if pubsub is not None:
                    pubsub.close()
                pubsub = None
                cancel.wait(1.0)
                continue
            if not message or message.get("type") != "message":
                continue
            try:
                body = json.loads(message.get("data") or "null")
            except ValueError:
                continue
            if isinstance(body, dict) and body.get("kind") == "cancel" and isinstance(body.get("runId"), str):
                logger.info("run %s cancelled by the engine", body["runId"])
                worker.cancel_run(body["runId"])
        if pubsub is not None:
            pubsub.close()
