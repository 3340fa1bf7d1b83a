"""``--transport URL``: a transport from a ``redis://``, ``postgresql://``, ``mysql://`` or ``sqs://`` URL.

``sqs://[REGION][?endpoint=http://HOST:PORT]``: the region and endpoint default to the AWS
configuration (``AWS_REGION``, ``AWS_ENDPOINT_URL_SQS``...); credentials always come from it.
"""

from __future__ import annotations

from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

__all__ = ["transport_for_url"]

_REDIS = ("redis://", "rediss://", "unix://")
_POSTGRES = ("postgresql://", "postgres://")
_MYSQL = ("mysql://", "mariadb://")


def transport_for_url(url: str, *, prefix: str = "durable", namespace: Optional[str] = None,
                      partition: Optional[str] = None, **options: Any) -> Any:
    """The transport for ``url`` (Redis, PostgreSQL, MySQL/MariaDB or SQS); ValueError otherwise."""
    if url.startswith(_REDIS):
        from .redis_transport import RedisTransport

        return RedisTransport(url, prefix=prefix, namespace=namespace, partition=partition, **options)
    if url.startswith(_POSTGRES):
        if namespace or partition:
            raise ValueError("the PostgreSQL transport has no namespace or partition "
                             "(the engine's DbTransport has none)")
        from .pg_transport import PostgresTransport

        return PostgresTransport(url, prefix=prefix, **options)
    if url.startswith(_MYSQL):
        if namespace or partition:
            raise ValueError("the MySQL transport has no namespace or partition "
                             "(the engine's DbTransport has none)")
        from .mysql_transport import MysqlTransport

        return MysqlTransport(url, prefix=prefix, **options)
    if url.startswith("sqs://"):
        if namespace or partition:
            raise ValueError("the SQS transport has no namespace or partition (the engine's SqsTransport has none)")
        from .sqs_transport import SqsTransport

        parts = urlsplit(url)
        endpoint = parse_qs(parts.query).get("endpoint", [None])[0]
        return SqsTransport(prefix=prefix, region=parts.netloc or None, endpoint_url=endpoint, **options)
    scheme = url.split("://", 1)[0] if "://" in url else url
    raise ValueError(f"unsupported nestjs transport {scheme!r}: use redis://HOST:PORT, postgresql://..., "
                     "mysql://... or sqs://")
