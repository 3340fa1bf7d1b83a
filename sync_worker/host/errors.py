"""The errors of the host's options: a bad value, or a key no option has."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from ..errors import DurableWorkflowError

__all__ = ["OptionsError", "UnknownOption"]


class OptionsError(DurableWorkflowError, ValueError):
    """An option, setting or environment variable with a value it cannot take.

    ``key`` is the name as it was written (``"CONCURRENCY"``, ``"max_concurrent_activity_tasks"``,
    ``"SYNC_WORKER_POOL"``), ``value`` what it held, ``requirement`` what it must be, ``source``
    where it was read (``settings.SYNC_WORKER['CONCURRENCY']``, ``environment``); None when given
    as a keyword argument. Secrets (tokens) are left out of the message.
    """

    def __init__(self, key: str, value: Any, requirement: str, *, source: Optional[str] = None,
                 show_value: bool = True) -> None:
        self.key = key
        self.value = value
        self.requirement = requirement
        self.source = source
        where = f" ({source})" if source else ""
        shown = f", got {value!r}" if show_value else ""
        super().__init__(f"{key}{where} {requirement}{shown}")


class UnknownOption(OptionsError, KeyError):
    """A key that names no option (a typo is reported, never ignored)."""

    def __init__(self, key: str, value: Any, known: Iterable[str], *, source: Optional[str] = None) -> None:
        self.known = sorted(known)
        super().__init__(key, value, f"is not a known option; known: {', '.join(self.known)}", source=source,
                         show_value=False)

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])
