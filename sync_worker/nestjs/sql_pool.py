"""A small pool of blocking SQL connections for the table transports (PostgreSQL, MySQL).

Each caller gets a connection of its own (a DB-API connection serialises its users), and gives it
back; a connection whose statement failed is closed rather than reused, since it may be broken
or mid-transaction. At most ``keep`` idle connections are kept.
"""

from __future__ import annotations

from typing import Any, Callable, List

__all__ = ["Connections"]


class Connections:
    def __init__(self, connect: Callable[[], Any], lock: Any, *, is_broken: Callable[[Any], bool] = lambda c: False,
                 keep: int = 16) -> None:
        self._connect = connect
        self._is_broken = is_broken
        self._lock = lock
        self._keep = keep
        self._idle: List[Any] = []
        self._closed = False

    def get(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def put(self, conn: Any, *, broken: bool = False) -> None:
        if broken or self._is_broken(conn):
            _close(conn)
            return
        with self._lock:
            if not self._closed and len(self._idle) < self._keep:
                self._idle.append(conn)
                return
        _close(conn)

    def run(self, fn: Callable[[Any], Any]) -> Any:
        """``fn(connection)`` on a pooled connection; an exception closes that connection."""
        conn = self.get()
        try:
            value = fn(conn)
        except Exception:
            self.put(conn, broken=True)
            raise
        self.put(conn)
        return value

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            _close(conn)


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # closing a broken connection may fail again; it is gone either way
        pass
