"""Run nestjs-durable steps from blocking Python: the sync twin of the ``durable-worker`` SDK.

A TypeScript workflow on the nestjs-durable engine calls ``ctx.step("payments.charge-card", input)``;
a :class:`StepWorker` registered for that name runs a plain function and answers, over Redis/BullMQ
(:class:`RedisTransport`), PostgreSQL tables (:class:`PostgresTransport`) or Amazon SQS
(:class:`SqsTransport`), on threads or gevent.
See docs/nestjs.md.
"""

from __future__ import annotations

from typing import Any

from .runtime import Delivery, NestjsWorker, StepTransport
from .steps import Cancelled, FatalError, StepContext, StepWorker, current_step

__all__ = [
    "Cancelled",
    "Delivery",
    "FatalError",
    "NestjsWorker",
    "PostgresTransport",
    "RedisTransport",
    "SqsTransport",
    "StepContext",
    "StepTransport",
    "StepWorker",
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
    if name == "SqsTransport":
        from .sqs_transport import SqsTransport

        return SqsTransport
    if name == "transport_for_url":
        from .urls import transport_for_url

        return transport_for_url
    raise AttributeError(name)
