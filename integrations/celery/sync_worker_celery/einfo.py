"""``ExceptionInfo``: the ``einfo`` argument of Celery's failure and retry hooks and signals."""

from __future__ import annotations

import traceback as _traceback
from types import TracebackType
from typing import Optional, Tuple, Type

__all__ = ["ExceptionInfo"]


class ExceptionInfo:
    """An exception with its traceback: ``exception``, ``type``, ``tb``, ``traceback`` (text)."""

    def __init__(self, exception: BaseException) -> None:
        self.exception = exception
        self.type: Type[BaseException] = type(exception)
        self.tb: Optional[TracebackType] = exception.__traceback__
        self.traceback = "".join(_traceback.format_exception(self.type, exception, self.tb))
        self.internal = False

    @property
    def exc_info(self) -> Tuple[Type[BaseException], BaseException, Optional[TracebackType]]:
        return (self.type, self.exception, self.tb)

    def __str__(self) -> str:
        return self.traceback

    def __repr__(self) -> str:
        return f"<ExceptionInfo: {self.exception!r}>"
