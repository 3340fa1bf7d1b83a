"""nestjs-durable from blocking Python: the sync twin of the ``durable-worker`` SDK.

* Steps: a TypeScript workflow on the nestjs-durable engine calls ``ctx.step("payments.charge-card",
  input)``; a :class:`StepWorker` registered for that name runs a plain function and answers, over
  Redis/BullMQ (:class:`RedisTransport`), PostgreSQL or MySQL tables (:class:`PostgresTransport`,
  :class:`MysqlTransport`) or Amazon SQS (:class:`SqsTransport`).
* Workflows: a :class:`WorkflowWorker` authors whole workflows in Python, driven turn by turn by
  the engine (``engine.remote(name, {group})``) over Redis; ``ctx.step`` raises :class:`StepFailed`,
  a changed workflow under a run in flight :class:`NondeterminismError`.

Both run on threads or gevent, from one :class:`NestjsWorker`. See docs/nestjs.md.
"""

from __future__ import annotations

from typing import Any

from .runtime import NestjsWorker
from .steps import Cancelled, FatalError, StepContext, StepWorker, current_step
from .transport import Delivery, StepTransport, TurnTransport
from .workflow_context import (
    NondeterminismError,
    StepFailed,
    WorkflowCancelled,
    WorkflowContext,
    WorkflowError,
)
from .workflows import WorkflowWorker

__all__ = [
    "Cancelled",
    "Delivery",
    "FatalError",
    "MysqlTransport",
    "NestjsWorker",
    "NondeterminismError",
    "PostgresTransport",
    "RedisTransport",
    "SqsTransport",
    "StepContext",
    "StepFailed",
    "StepTransport",
    "StepWorker",
    "TurnTransport",
    "WorkflowCancelled",
    "WorkflowContext",
    "WorkflowError",
    "WorkflowWorker",
    "current_step",
    "transport_for_url",
]


def __getattr__(name: str) -> Any:  # the transports need the optional `nestjs` extra
    if name == "RedisTransport":
        from .redis_transport import RedisTransport

        return RedisTransport
    if name == "PostgresTransport":
        from .pg_transport import PostgresTransport

        return PostgresTransport
    if name == "MysqlTransport":
        from .mysql_transport import MysqlTransport

        return MysqlTransport
    if name == "SqsTransport":
        from .sqs_transport import SqsTransport

        return SqsTransport
    if name == "transport_for_url":
        from .urls import transport_for_url

        return transport_for_url
    raise AttributeError(name)
