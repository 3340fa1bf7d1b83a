"""The checks of option values, written once: what each kind of value must be, and its wording.

Each rule takes the value (and whether it came as text, from an environment variable) and
returns it converted, or raises :class:`Invalid` with the requirement ("must be a positive
int"). :class:`~sync_worker.host.OptionsError` puts the key, where it came from and the value
around it, so every door words a bad setting the same way::

    CONCURRENCY (settings.SYNC_WORKER['CONCURRENCY']) must be a positive int, got 0

Secrets (tokens) are never echoed back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Optional, Tuple
from urllib.parse import urlsplit

__all__ = [
    "Invalid",
    "Rule",
    "activity_slots",
    "name",
    "non_negative_int",
    "non_negative_seconds",
    "optional_secret",
    "optional_text",
    "pool_name",
    "positive_int",
    "positive_seconds",
    "sequence",
    "server_url",
    "ttl_seconds",
]

#: ``rule(value, from_text)`` → the converted value, or :class:`Invalid`.
Rule = Callable[[Any, bool], Any]


class Invalid(ValueError):
    """A value that breaks its rule; ``requirement`` says what it must be."""

    def __init__(self, requirement: str, *, show_value: bool = True) -> None:
        super().__init__(requirement)
        self.requirement = requirement
        self.show_value = show_value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value: Any, from_text: bool, minimum: int, requirement: str) -> int:
    if from_text and isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise Invalid(requirement) from None
    if not _is_int(value) or value < minimum:
        raise Invalid(requirement)
    return int(value)


def positive_int(value: Any, from_text: bool = False) -> int:
    return _int(value, from_text, 1, "must be a positive int")


def non_negative_int(value: Any, from_text: bool = False) -> int:
    return _int(value, from_text, 0, "must be an int of at least 0")


def optional_non_negative_int(value: Any, from_text: bool = False) -> Optional[int]:
    """``None`` (the default is chosen elsewhere) or an int of at least 0."""
    if value is None or (from_text and isinstance(value, str) and not value.strip()):
        return None
    return _int(value, from_text, 0, "must be an int of at least 0 (or unset for the default)")


def _seconds(value: Any, positive: bool) -> float:
    requirement = f"must be a {'positive' if positive else 'non-negative'} number of seconds"
    if isinstance(value, bool):
        raise Invalid(requirement)
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise Invalid(requirement) from None
    else:
        raise Invalid(requirement)
    if number != number or (number <= 0 if positive else number < 0):  # NaN is no number of seconds
        raise Invalid(requirement)
    return number


def positive_seconds(value: Any, from_text: bool = False) -> float:
    return _seconds(value, True)


def non_negative_seconds(value: Any, from_text: bool = False) -> float:
    return _seconds(value, False)


def optional_text(value: Any, from_text: bool = False) -> Optional[str]:
    """None, or a non-empty string (shown back when wrong)."""
    if value is not None and (not isinstance(value, str) or not value):
        raise Invalid("must be a non-empty string or None")
    return value


def optional_secret(value: Any, from_text: bool = False) -> Optional[str]:
    """None, or a non-empty string that is never shown back (tokens)."""
    if value is not None and (not isinstance(value, str) or not value):
        raise Invalid("must be a non-empty string or None", show_value=False)
    return value


def name(value: Any, from_text: bool = False) -> str:
    """A non-empty string (a namespace)."""
    if not isinstance(value, str) or not value:
        raise Invalid("must be a non-empty string", show_value=False)
    return value


def pool_name(value: Any, from_text: bool = False) -> Optional[str]:
    """None (the process's default pool), ``threads`` / ``gevent`` (canonical name), or ``prefork``
    (the worker commands' process pool, :mod:`sync_worker.host.prefork`; its children run threads)."""
    from ..runtime.backend import normalize_pool

    requirement = "must be 'threads', 'gevent' or 'prefork'"
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(requirement)
    if value.strip().lower() in ("prefork", "processes"):
        return "prefork"
    try:
        return normalize_pool(value)
    except ValueError:
        raise Invalid(requirement) from None


def activity_slots(value: Any, from_text: bool = False) -> Any:
    """Activity slots: a positive int, ``"adaptive"``, or a dict of adaptive knobs (docs/concurrency.md).

    A numeric string is a fixed N (as ``-c 8`` on the command line).
    """
    from ..runtime.admission import resolve_concurrency

    requirement = "must be a positive int, 'adaptive' or a dict of adaptive knobs"
    if isinstance(value, str):
        text = value.strip().lower()
        value = int(text) if text.isdigit() else text
    if isinstance(value, bool) or not isinstance(value, (int, str, Mapping)):
        raise Invalid(requirement)
    try:
        resolve_concurrency(value)
    except (ValueError, TypeError) as error:
        raise Invalid(f"{requirement} ({error})" if isinstance(value, Mapping) else requirement) from None
    return dict(value) if isinstance(value, Mapping) else value


def ttl_seconds(value: Any, from_text: bool = False) -> int:
    """Whole seconds from 1 to 3600 (the sticky cache's TTL)."""
    number = _int(value, from_text, 1, "must be a whole number of seconds from 1 to 3600")
    if number > 3600:
        raise Invalid("must be a whole number of seconds from 1 to 3600")
    return number


def sequence(value: Any, from_text: bool = False) -> Tuple[Any, ...]:
    """A list or tuple (of workflows, activities, interceptors), kept as a tuple."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise Invalid("must be a list")
    return tuple(value)


def server_url(value: Any, from_text: bool = False) -> Optional[str]:
    """None (not chosen yet), or the server's http(s) origin, without ``/api``; trailing slash dropped."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid("must be a string", show_value=False)
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise Invalid("must be an http(s) origin")
    if parts.path.rstrip("/").endswith("/api"):
        raise Invalid("is the server origin; leave out the trailing /api", show_value=False)
    return value.rstrip("/")


def optional_positive_int(value: Any, from_text: bool = False) -> Optional[int]:
    """None, or a positive int."""
    return None if value is None or (from_text and value == "") else positive_int(value, from_text)


def external_storage(value: Any, from_text: bool = False) -> Any:
    """None, a driver (``put``/``get``/``delete``), or a URI naming one (docs/external-storage.md).

    ``file:///shared/payloads`` or a plain path: ``LocalFilesystemExternalStorage``;
    ``s3://bucket/prefix``: ``S3ExternalStorage`` on boto3's default credentials (the ``s3`` extra).
    """
    if value is None or (from_text and value == ""):
        return None
    if isinstance(value, str):
        from ..external_storage import LocalFilesystemExternalStorage, S3ExternalStorage

        parts = urlsplit(value)
        if parts.scheme == "s3":
            if not parts.netloc:
                raise Invalid("must name a bucket: s3://bucket/prefix")
            return S3ExternalStorage(bucket=parts.netloc, prefix=parts.path)
        if parts.scheme == "file":
            return LocalFilesystemExternalStorage(parts.path)
        if parts.scheme:
            raise Invalid("must be a file:// or s3:// URI, a directory, or a driver object")
        return LocalFilesystemExternalStorage(value)
    if not all(callable(getattr(value, method, None)) for method in ("put", "get", "delete")):
        raise Invalid("must be an external storage driver (put/get/delete) or a URI")
    return value


def optional_object(value: Any, from_text: bool = False) -> Any:
    """Any object (validated where it is used); never from text."""
    if from_text and value is not None:
        raise Invalid("cannot be set from text")
    return value
