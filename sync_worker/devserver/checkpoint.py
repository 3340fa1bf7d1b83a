"""The WAL's checkpoints, beside the writer: a second connection on its own thread (see :class:`Checkpointer`)."""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import Any

__all__ = ["Checkpointer"]

log = logging.getLogger("sync_worker.devserver")


class Checkpointer:
    """Copies the WAL into the database file on its own connection and thread.

    SQLite's automatic checkpoint runs inside the ``COMMIT`` that crosses 1,000 WAL pages, i.e.
    under the engine lock: a few milliseconds of page copies and (with ``synchronous=NORMAL``)
    an ``fsync`` during which every request waits. A ``PASSIVE`` checkpoint from a second
    connection runs beside the writer instead (``sqlite3`` releases the GIL while it works).
    """

    def __init__(self, path: str, writer_lock: Any, every_seconds: float = 1.0) -> None:
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._writer_lock = writer_lock
        self._every = every_seconds
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="devserver-checkpoint", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stop:
            self._wake.wait(self._every)
            self._wake.clear()
            if self._stop:
                return
            try:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()  # the bulk, beside the writer
                with self._writer_lock:  # the few frames since: the next write restarts the WAL at its start
                    self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error as exc:  # busy or closing: the next round catches up
                log.debug("WAL checkpoint skipped: %s", exc)

    def close(self) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join(10)
        self._conn.close()
