"""Amazon SQS transport: the queues of ``@dudousxd/nestjs-durable-transport-sqs`` (``SqsTransport``).

The engine sends each task as a message (body = the task JSON) to ``<prefix>-tasks-<token>`` and
reads results from ``<prefix>-results``. A worker receives a task with a visibility timeout (its
lease), runs it, sends the result (body = the result JSON) and deletes the task message.

SQS queue names allow only letters, digits, ``-`` and ``_``: a dotted step name such as
``payments.charge-card`` has no queue of its own name (SQS refuses it). Use dot-free step names, or
map names to queue URLs with ``task_queue_urls`` (the engine's ``taskQueueUrl`` option).

Compared with the TypeScript and asyncio workers (same contract): one message per free slot (not a
batch of 10 whose visibility runs while the earlier ones execute), the visibility is **extended**
every ``lock_duration/2`` s while the step runs (and on ``heartbeat_sync``), so a long step is not
redelivered, and a cold stop makes an unfinished message visible again at once. ``marker`` works as
theirs: a message without that attribute is released at once (a legacy consumer on a shared queue
takes it) and results carry it.

boto3 (blocking, thread-safe clients; cooperative under a gevent-patched process through urllib3).
Region, credentials and endpoint come from the usual AWS configuration (``AWS_REGION``,
``AWS_ENDPOINT_URL_SQS`` ...), or ``region`` / ``endpoint_url`` / ``client``.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..cancel import CancelToken
from .descriptor import routing_token
from .runtime import Delivery, NestjsWorker

__all__ = ["SqsTransport"]

logger = logging.getLogger("sync_worker.nestjs.sqs")


class _Message:
    def __init__(self, queue_url: str, receipt: str) -> None:
        self.queue_url = queue_url
        self.receipt = receipt


class SqsTransport:
    """The engine's SQS queues from blocking code."""

    kind = "sqs"

    def __init__(
        self,
        *,
        prefix: str = "durable",
        region: Optional[str] = None,
        endpoint_url: Optional[str] = None,
        lock_duration: float = 60.0,
        auto_create: bool = True,
        marker: Optional[str] = None,
        task_queue_urls: Optional[Mapping[str, str]] = None,
        results_queue_url: Optional[str] = None,
        client: Any = None,
    ) -> None:
        if not 1 <= lock_duration <= 43200:
            raise ValueError("lock_duration (the SQS visibility timeout) must be within 1..43200 s")
        self.prefix = prefix
        self.region = region
        self.endpoint_url = endpoint_url
        self.lease_seconds = float(int(lock_duration))
        self.auto_create = auto_create
        self.marker = marker
        self.task_queue_urls = dict(task_queue_urls or {})
        self.results_queue_url = results_queue_url
        self._client = client
        self._sqs: Any = None
        self._urls: List[str] = []
        self._results_url = ""
        self._next = 0
        self._stash: Optional[Tuple[str, Dict[str, Any]]] = None
        self._worker: Optional[NestjsWorker] = None

    # -- StepTransport ---------------------------------------------------------------------------

    def open(self, names: Sequence[str], worker: NestjsWorker) -> None:
        self._worker = worker
        if self._client is not None:
            self._sqs = self._client
        else:
            import boto3  # type: ignore[import-untyped]  # the nestjs-sqs extra

            self._sqs = boto3.client("sqs", region_name=self.region, endpoint_url=self.endpoint_url)
        # Fail fast: every queue resolves (or is created) before the worker says it is serving.
        self._urls = [self.task_queue_urls.get(name) or self._resolve(f"{self.prefix}-tasks-{routing_token(name)}")
                      for name in names]
        self._results_url = self.results_queue_url or self._resolve(f"{self.prefix}-results")

    def claim(self) -> Optional[Delivery]:
        if self._stash is not None:
            (stashed_url, stashed), self._stash = self._stash, None
            return self._delivery(stashed_url, stashed)
        for _ in range(len(self._urls)):
            url = self._urls[self._next % len(self._urls)]
            message = self._receive(url, wait=0)
            if message is None:
                self._next += 1
                continue
            delivery = self._delivery(url, message)
            if delivery is not None:
                return delivery
        return None

    def wait_for_work(self, timeout: float) -> None:
        """One long poll on the next queue; a message it returns is handed out by the next claim."""
        url = self._urls[self._next % len(self._urls)]
        message = self._receive(url, wait=max(1, min(20, int(timeout))))
        if message is not None:
            self._stash = (url, message)
        else:
            self._next += 1

    def settle(self, delivery: Delivery, result: Dict[str, Any], payload: str) -> None:
        message: _Message = delivery.handle
        self._sqs.send_message(QueueUrl=self._results_url, MessageBody=payload, **self._marker_attributes())
        self._sqs.delete_message(QueueUrl=message.queue_url, ReceiptHandle=message.receipt)

    def renew(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            if delivery.lost:
                continue
            message: _Message = delivery.handle
            try:
                self._sqs.change_message_visibility(QueueUrl=message.queue_url, ReceiptHandle=message.receipt,
                                                    VisibilityTimeout=int(self.lease_seconds))
            except Exception as error:
                if _error_code(error) in ("ReceiptHandleIsInvalid", "MessageNotInflight",
                                          "AWS.SimpleQueueService.MessageNotInflight"):
                    delivery.lost = True
                    logger.warning("step %s: its message is visible again (it may run elsewhere)",
                                   delivery.step_id)
                    continue
                raise

    def beat(self, delivery: Delivery) -> None:
        self.renew([delivery])

    def progress(self, delivery: Delivery, event: Dict[str, Any]) -> None:
        """No live channel here: step events ride the result."""

    def maintain(self, now: float) -> None:
        """Nothing periodic: SQS redelivers a message whose visibility lapsed."""

    def release(self, delivery: Delivery) -> None:
        message: _Message = delivery.handle
        self._sqs.change_message_visibility(QueueUrl=message.queue_url, ReceiptHandle=message.receipt,
                                            VisibilityTimeout=0)

    def background(self) -> List[Tuple[str, Callable[[CancelToken], None]]]:
        return []

    def close(self, *, clean: bool) -> None:
        stash, self._stash = self._stash, None
        if stash is not None and self._sqs is not None:  # received during the last wait: give it back
            self._sqs.change_message_visibility(QueueUrl=stash[0], ReceiptHandle=stash[1]["ReceiptHandle"],
                                                VisibilityTimeout=0)
        if self._client is None and self._sqs is not None:
            self._sqs.close()

    # -- internals -------------------------------------------------------------------------------

    def _resolve(self, name: str) -> str:
        try:
            return str(self._sqs.get_queue_url(QueueName=name)["QueueUrl"])
        except Exception as error:
            if not self.auto_create or "NonExistentQueue" not in str(_error_code(error)) + type(error).__name__:
                raise
        return str(self._sqs.create_queue(QueueName=name)["QueueUrl"])

    def _marker_attributes(self) -> Dict[str, Any]:
        if not self.marker:
            return {}
        return {"MessageAttributes": {self.marker: {"DataType": "String", "StringValue": "1"}}}

    def _receive(self, url: str, *, wait: int) -> Optional[Dict[str, Any]]:
        extra: Dict[str, Any] = {"MessageAttributeNames": ["All"]} if self.marker else {}
        reply = self._sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=wait,
                                          VisibilityTimeout=int(self.lease_seconds), **extra)
        messages = reply.get("Messages") or []
        return messages[0] if messages else None

    def _delivery(self, url: str, message: Dict[str, Any]) -> Optional[Delivery]:
        import json

        receipt = message["ReceiptHandle"]
        if self.marker and self.marker not in (message.get("MessageAttributes") or {}):
            self._sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=receipt, VisibilityTimeout=0)
            return None
        try:
            task = json.loads(message.get("Body") or "null")
        except ValueError:
            task = None
        if not isinstance(task, dict) or not isinstance(task.get("runId"), str) or "seq" not in task:
            # Not a step task: it would come back forever. Drop it (SQS has no failed set; a
            # dead-letter queue on the task queue catches such messages before they reach us).
            logger.error("message %s on %s is not a nestjs-durable step task; deleting it",
                         message.get("MessageId"), url)
            self._sqs.delete_message(QueueUrl=url, ReceiptHandle=receipt)
            return None
        return Delivery(task, _Message(url, receipt))


def _error_code(error: BaseException) -> str:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Code") or "")
    return ""
