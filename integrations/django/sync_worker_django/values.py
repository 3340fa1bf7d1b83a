"""Django values that must not cross the wire: model instances, datetimes, Decimals.

Payloads are Avro Values (null, bool, long, double, string, bytes, list, map). A Django
codebase reaches for a model instance, a ``DateTimeField`` value or a ``DecimalField``
value as an argument all the time; the generic encoder would refuse them with a bare type
name. :func:`check_wire_values` refuses them *before anything is sent*, with the path of
the offending value and what to pass instead. The same check runs on what an activity
returns (:class:`~sync_worker_django.db.DjangoTaskInterceptor`): a ``Decimal`` result fails
that attempt at once, non-retryably, instead of timing out unreported.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any, Optional

from sync_worker.errors import PayloadEncodeError

__all__ = ["DjangoValueNotAllowed", "check_wire_values", "find_django_value"]


class DjangoValueNotAllowed(PayloadEncodeError, TypeError):
    """A model instance, datetime, date, time, Decimal or UUID where a payload value was expected."""


def _hint(value: Any, role: str) -> Optional[str]:
    from django.db.models import Model, QuerySet

    if isinstance(value, Model):
        label = f"{type(value)._meta.app_label}.{type(value).__name__}"
        return (f"is a Django model instance ({label}); pass the primary key (obj.pk) and load the row "
                "inside the activity, so it reads the current data")
    if isinstance(value, QuerySet):
        return "is a QuerySet; pass a list of primary keys (list(qs.values_list('pk', flat=True)))"
    if isinstance(value, datetime.datetime):
        return "is a datetime; pass value.isoformat() (or a UNIX timestamp) and parse it on the other side"
    if isinstance(value, (datetime.date, datetime.time)):
        return f"is a {type(value).__name__}; pass value.isoformat() and parse it on the other side"
    if isinstance(value, datetime.timedelta):
        return "is a timedelta; pass value.total_seconds()"
    if isinstance(value, decimal.Decimal):
        action = "return" if role == "result" else "pass"
        return (f"is a Decimal (a DecimalField value?); {action} str(value) to keep every digit "
                "(or int cents), and convert back with Decimal(text)")
    if isinstance(value, uuid.UUID):
        return "is a UUID; pass str(value)"
    return None


def find_django_value(value: Any, path: str = "$", role: str = "argument", _depth: int = 0) -> Optional[str]:
    """The first refused value as ``"<path> <why>; <what to do>"``, else ``None``."""
    if value is None or isinstance(value, (bool, int, float, str, bytes, bytearray)):
        return None
    if _depth > 64:
        return None  # the encoder reports "nested too deeply" with its own path
    hint = _hint(value, role)
    if hint is not None:
        return f"{path} {hint}"
    if isinstance(value, dict):
        for key, item in value.items():
            step = f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{key!r}]"
            found = find_django_value(item, path + step, role, _depth + 1)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = find_django_value(item, f"{path}[{index}]", role, _depth + 1)
            if found:
                return found
    return None


def check_wire_values(values: Any, *, what: str, role: str = "argument") -> None:
    """Raise :class:`DjangoValueNotAllowed` when ``values`` holds a Django value the wire cannot carry.

    ``what`` names the call for the message (``"start_workflow('checkout')"``).
    """
    found = find_django_value(values, "$", role)
    if found is not None:
        path = found.split(" ", 1)[0]
        raise DjangoValueNotAllowed(f"{what}: {role} {found}", reason="unsupported_value_type", path=path)

