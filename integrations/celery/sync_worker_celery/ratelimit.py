"""``rate_limit="10/m"``: honoured per worker process and task type, as in Celery.

A token bucket per task name: a task over its rate waits in its slot until a token is free
(Celery holds it in the consumer instead). Limits are per worker process, not cluster-wide.
"""

from __future__ import annotations

import threading
import time
from typing import Dict, Optional, Union

__all__ = ["TokenBucket", "acquire", "parse_rate"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_rate(rate: Union[int, float, str, None]) -> Optional[float]:
    """Tasks per second from ``"100/s"``, ``"10/m"``, ``"1/h"`` or a number (per second); None = unlimited."""
    if rate is None or rate == "":
        return None
    if isinstance(rate, (int, float)) and not isinstance(rate, bool):
        return float(rate) if rate > 0 else None
    text = str(rate).strip()
    count, _, unit = text.partition("/")
    try:
        per = float(count)
    except ValueError:
        raise ValueError(f"invalid rate_limit {rate!r}: expected like '10/m'") from None
    if unit and unit[0] not in _UNITS:
        raise ValueError(f"invalid rate_limit {rate!r}: unit must be s, m or h")
    return per / _UNITS[unit[0] if unit else "s"] if per > 0 else None


class TokenBucket:
    def __init__(self, per_second: float) -> None:
        self.rate = per_second
        self.capacity = max(1.0, per_second)
        self.tokens = self.capacity
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def wait_time(self) -> float:
        """Take a token, or return how long to wait before trying again."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= 1:
                self.tokens -= 1
                return 0.0
            return (1 - self.tokens) / self.rate


_buckets: Dict[str, TokenBucket] = {}
_lock = threading.Lock()


def acquire(name: str, rate: Union[int, float, str, None]) -> float:
    """Block until task ``name`` may start under ``rate``; returns the seconds waited."""
    per_second = parse_rate(rate)
    if per_second is None:
        return 0.0
    with _lock:
        bucket = _buckets.get(name)
        if bucket is None or bucket.rate != per_second:
            bucket = _buckets[name] = TokenBucket(per_second)
    waited = 0.0
    while True:
        delay = bucket.wait_time()
        if delay <= 0:
            return waited
        time.sleep(delay)
        waited += delay
