"""What the engine's SQL table transports share, whatever the dialect (PostgreSQL, MySQL).

``@dudousxd/nestjs-durable-transport-db`` keeps one contract over both dialects: one row per
dispatched step in ``<prefix>_transport_tasks`` (``step_id`` primary key, ``grp`` = the routing
token), claimed with ``SELECT ... FOR UPDATE SKIP LOCKED`` (rows never claimed, or whose claim is
older than the lease) by stamping ``claimed_by`` / ``claimed_at``; an outcome row inserted
idempotently into ``<prefix>_transport_results`` and the task row deleted, in one transaction.

:class:`TableTransport` is that contract as a :class:`~sync_worker.nestjs.transport.StepTransport`:
the options, the connection pool, turning a claimed row into a :class:`Delivery`, the outcome's
columns, lease renewal bookkeeping and release. A dialect (:mod:`.pg_transport`,
:mod:`.mysql_transport`) supplies only its SQL: connect, prepare the tables, claim one row, write
an outcome, touch held claims, give one back.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..cancel import CancelToken
from .descriptor import routing_token
from .runtime import NestjsWorker
from .sql_pool import Connections
from .transport import Delivery

__all__ = ["ClaimedRow", "TableTransport", "now_ms"]

#: ``(step_id, run_id, seq, name, grp, input, attempt)``, the columns a claim reads back.
ClaimedRow = Tuple[Any, ...]


def now_ms() -> int:
    return int(time.time() * 1000)


class TableTransport:
    """The engine's SQL transport tables from blocking code; subclasses give the dialect's SQL."""

    kind = "sql"
    _logger = logging.getLogger("sync_worker.nestjs.sql")
    @staticmethod
    def quote(name: str) -> str:
        """How the dialect quotes a table name (PostgreSQL: bare; MySQL: backticks)."""
        return name

    def __init__(self, *, prefix: str = "durable", lock_duration: float = 30.0, poll_interval: float = 0.5,
                 auto_create: bool = True) -> None:
        if lock_duration <= 0 or poll_interval <= 0:
            raise ValueError("lock_duration and poll_interval must be > 0")
        if not prefix.replace("_", "").isalnum():
            raise ValueError(f"table prefix {prefix!r} must be letters, digits and underscores")
        self.prefix = prefix
        self.tasks_table = self.quote(f"{prefix}_transport_tasks")
        self.results_table = self.quote(f"{prefix}_transport_results")
        self.lease_seconds = float(lock_duration)
        self.poll_interval = float(poll_interval)
        self.auto_create = auto_create
        self._pool: Optional[Connections] = None
        self._groups: List[str] = []
        self._worker: Optional[NestjsWorker] = None

    # -- the dialect -----------------------------------------------------------------------------

    def _connect(self) -> Any:
        raise NotImplementedError

    def _is_broken(self, conn: Any) -> bool:
        raise NotImplementedError

    def _prepare(self, conn: Any) -> None:
        """Check (or, with ``auto_create``, create) both tables and the claim index."""
        raise NotImplementedError

    def _claim_row(self, conn: Any, groups: List[str], stale_before: int, claimed_by: str,
                   now: int) -> Optional[ClaimedRow]:
        """Claim the oldest claimable row of ``groups`` for ``claimed_by``; its columns, or None."""
        raise NotImplementedError

    def _write_outcome(self, conn: Any, delivery: Delivery, body: Dict[str, Any], output: Optional[str],
                       error: Optional[str]) -> None:
        """Insert the result row (idempotently) and delete the task row still claimed by us, together."""
        raise NotImplementedError

    def _touch(self, conn: Any, live: List[Delivery], now: int) -> List[bool]:
        """Renew each held claim; whether each one is still ours."""
        raise NotImplementedError

    def _give_back(self, conn: Any, delivery: Delivery) -> None:
        """Clear the claim of a row still claimed by ``delivery``."""
        raise NotImplementedError

    # -- StepTransport ---------------------------------------------------------------------------

    def open(self, names: Sequence[str], worker: NestjsWorker) -> None:
        self._worker = worker
        self._pool = Connections(self._connect, worker.backend.native_lock(), is_broken=self._is_broken)
        self._groups = [routing_token(name) for name in names]
        self._pool.run(self._prepare)  # fail fast: connect and check (or create) the tables

    def claim(self) -> Optional[Delivery]:
        worker = self._require_worker()
        if not self._groups:
            return None
        claimed_by = f"{worker.instance_id}/{uuid.uuid4().hex[:12]}"
        now = now_ms()
        stale_before = now - int(self.lease_seconds * 1000)
        row = self._pool_run(lambda conn: self._claim_row(conn, self._groups, stale_before, claimed_by, now))
        if row is None:
            return None
        step_id, run_id, seq, name, grp, raw_input, attempt = row
        try:
            data = None if raw_input is None else json.loads(raw_input)
        except ValueError:
            data = raw_input
        task = {"runId": run_id, "seq": int(seq), "name": name, "stepId": step_id, "group": grp,
                "input": data, "attempt": int(attempt)}
        return Delivery(task, claimed_by)

    def wait_for_work(self, timeout: float) -> None:
        self._require_worker().backend.sleep(min(timeout, self.poll_interval))

    def settle(self, delivery: Delivery, result: Dict[str, Any], payload: str) -> None:
        body = json.loads(payload)  # the bounded, encodable form
        output = json.dumps(body.get("output"), separators=(",", ":")) if "output" in body else None
        error = json.dumps(body["error"], separators=(",", ":")) if "error" in body else None
        self._pool_run(lambda conn: self._write_outcome(conn, delivery, body, output, error))

    def renew(self, deliveries: Sequence[Delivery]) -> None:
        live = [d for d in deliveries if not d.lost]
        if not live:
            return
        now = now_ms()
        for delivery, still_ours in zip(live, self._pool_run(lambda conn: self._touch(conn, live, now))):
            if not still_ours:
                delivery.lost = True
                self._logger.warning("step %s: its claim was taken over (lease lapsed); it may run again elsewhere",
                                     delivery.step_id)

    def beat(self, delivery: Delivery) -> None:
        self.renew([delivery])

    def progress(self, delivery: Delivery, event: Dict[str, Any]) -> None:
        """No live channel here: step events ride the result."""

    def maintain(self, now: float) -> None:
        """Nothing periodic: a lapsed claim is simply claimable again."""

    def release(self, delivery: Delivery) -> None:
        self._pool_run(lambda conn: self._give_back(conn, delivery))

    def background(self) -> List[Tuple[str, Callable[[CancelToken], None]]]:
        return []

    def close(self, *, clean: bool) -> None:
        if self._pool is not None:
            self._pool.close()

    # -- internals -------------------------------------------------------------------------------

    def _require_worker(self) -> NestjsWorker:
        if self._worker is None or self._pool is None:
            raise RuntimeError(f"{type(self).__name__} used before open()")
        return self._worker

    def _pool_run(self, fn: Callable[[Any], Any]) -> Any:
        self._require_worker()
        assert self._pool is not None
        return self._pool.run(fn)
