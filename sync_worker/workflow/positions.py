"""Where workflow code stands in a replay (what a non-determinism report points at)."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from ..errors import CodePosition

__all__ = ["code_position"]


def code_position(generator: Any, last_line: Optional[Tuple[Any, int]], cls: type) -> CodePosition:
    """The innermost suspended ``yield`` of ``generator`` (through ``yield from``), else where ``run`` ended.

    ``last_line`` is ``(code, line)`` of ``run``'s latest yield, for a run that returned; a
    plain-function ``run`` (no generator) points at its ``def``.
    """
    frame: Any = None
    while generator is not None and getattr(generator, "gi_frame", None) is not None:
        frame = generator.gi_frame
        generator = getattr(generator, "gi_yieldfrom", None)
    if frame is not None:
        return CodePosition(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
    if last_line is not None:
        code, line = last_line
        return CodePosition(code.co_filename, line, code.co_name, after=True)
    code = getattr(getattr(cls, "run", None), "__code__", None)
    if code is None:
        return CodePosition("<unknown>", 0, "run")
    return CodePosition(code.co_filename, code.co_firstlineno, code.co_name, after=True)
