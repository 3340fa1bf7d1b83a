"""PostgreSQL transport: the tables of ``@dudousxd/nestjs-durable-transport-db`` (``DbTransport``).

The engine inserts one row per dispatched step into ``<prefix>_transport_tasks`` (``step_id``
primary key, ``grp`` = the routing token) and reads outcomes from ``<prefix>_transport_results``.
A worker claims rows with ``SELECT ... FOR UPDATE SKIP LOCKED`` -- rows never claimed, or whose
claim is older than the lease -- stamps ``claimed_by`` / ``claimed_at``, runs the step, inserts the
result (``ON CONFLICT (step_id) DO NOTHING``) and deletes the task row.

Compatible improvements over the TypeScript and asyncio workers, which keep the same contract:

* one claim per free slot (never a batch that waits behind itself while its lease runs);
* every registered step name in one query (``grp = ANY(...)``);
* the lease is renewed every ``lease/2`` s while the step runs (and on ``heartbeat_sync``), so a
  long step is not claimed a second time; a renewal or delete only touches a row still claimed by
  this claim (``claimed_by`` carries the instance id and a claim token);
* the result insert and the task delete commit together.

psycopg 3, autocommit, one connection per concurrent user from a small pool.
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

__all__ = ["PostgresTransport"]

logger = logging.getLogger("sync_worker.nestjs.postgres")


def _now_ms() -> int:
    return int(time.time() * 1000)


class PostgresTransport:
    """The engine's SQL transport tables on PostgreSQL (9.5+), from blocking code."""

    kind = "postgresql"

    def __init__(
        self,
        dsn: str,
        *,
        prefix: str = "durable",
        lock_duration: float = 30.0,
        poll_interval: float = 0.5,
        auto_create: bool = True,
    ) -> None:
        if lock_duration <= 0 or poll_interval <= 0:
            raise ValueError("lock_duration and poll_interval must be > 0")
        if not prefix.replace("_", "").isalnum():
            raise ValueError(f"table prefix {prefix!r} must be letters, digits and underscores")
        self.dsn = dsn
        self.prefix = prefix
        self.tasks_table = f"{prefix}_transport_tasks"
        self.results_table = f"{prefix}_transport_results"
        self.lease_seconds = float(lock_duration)
        self.poll_interval = float(poll_interval)
        self.auto_create = auto_create
        self._pool: Optional[Connections] = None
        self._groups: List[str] = []
        self._worker: Optional[NestjsWorker] = None

    # -- StepTransport ---------------------------------------------------------------------------

    def open(self, names: Sequence[str], worker: NestjsWorker) -> None:
        self._worker = worker
        self._pool = Connections(self._connect, worker.backend.native_lock(),
                                 is_broken=lambda conn: bool(conn.closed or conn.broken))
        self._groups = [routing_token(name) for name in names]
        self._pool.run(self._prepare)  # fail fast: connect and check (or create) the tables

    def claim(self) -> Optional[Delivery]:
        worker = self._require_worker()
        claimed_by = f"{worker.instance_id}/{uuid.uuid4().hex[:12]}"
        now = _now_ms()
        sql = (
            f"WITH picked AS (SELECT step_id FROM {self.tasks_table} "
            "WHERE grp = ANY(%s) AND (claimed_at IS NULL OR claimed_at < %s) "
            "ORDER BY created_at ASC LIMIT 1 FOR UPDATE SKIP LOCKED) "
            f"UPDATE {self.tasks_table} AS t SET claimed_by = %s, claimed_at = %s FROM picked "
            "WHERE t.step_id = picked.step_id "
            "RETURNING t.step_id, t.run_id, t.seq, t.name, t.grp, t.input, t.attempt"
        )
        row = self._pool_run(lambda c: c.execute(
            sql, (self._groups, now - int(self.lease_seconds * 1000), claimed_by, now)).fetchone())
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

        def write(conn: Any) -> None:
            with conn.transaction():
                conn.execute(
                    f"INSERT INTO {self.results_table} (step_id, run_id, seq, status, output, error, "
                    "started_at, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (step_id) DO NOTHING",
                    (delivery.step_id, body.get("runId"), body.get("seq"), body.get("status"), output, error,
                     body.get("startedAt"), _now_ms()))
                conn.execute(f"DELETE FROM {self.tasks_table} WHERE step_id = %s AND claimed_by = %s",
                             (delivery.step_id, delivery.handle))

        self._pool_run(write)

    def renew(self, deliveries: Sequence[Delivery]) -> None:
        live = [d for d in deliveries if not d.lost]
        if not live:
            return
        now = _now_ms()

        def touch(conn: Any) -> List[Any]:
            rows = conn.execute(
                f"UPDATE {self.tasks_table} SET claimed_at = %s WHERE claimed_by = ANY(%s) RETURNING claimed_by",
                (now, [d.handle for d in live])).fetchall()
            return [r[0] for r in rows]

        kept = set(self._pool_run(touch))
        for delivery in live:
            if delivery.handle not in kept:
                delivery.lost = True
                logger.warning("step %s: its claim was taken over (lease lapsed); it may run again elsewhere",
                               delivery.step_id)

    def beat(self, delivery: Delivery) -> None:
        self.renew([delivery])

    def progress(self, delivery: Delivery, event: Dict[str, Any]) -> None:
        """No live channel here: step events ride the result."""

    def maintain(self, now: float) -> None:
        """Nothing periodic: a lapsed claim is simply claimable again."""

    def release(self, delivery: Delivery) -> None:
        self._pool_run(lambda c: c.execute(
            f"UPDATE {self.tasks_table} SET claimed_by = NULL, claimed_at = NULL WHERE step_id = %s "
            "AND claimed_by = %s", (delivery.step_id, delivery.handle)))

    def background(self) -> List[Tuple[str, Callable[[CancelToken], None]]]:
        return []

    def close(self, *, clean: bool) -> None:
        if self._pool is not None:
            self._pool.close()

    # -- internals -------------------------------------------------------------------------------

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)

    def _require_worker(self) -> NestjsWorker:
        if self._worker is None or self._pool is None:
            raise RuntimeError("PostgresTransport used before open()")
        return self._worker

    def _pool_run(self, fn: Callable[[Any], Any]) -> Any:
        self._require_worker()
        assert self._pool is not None
        return self._pool.run(fn)

    def _prepare(self, conn: Any) -> None:
        if self.auto_create:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.tasks_table} (step_id varchar(191) PRIMARY KEY, "
                "run_id varchar(191) NOT NULL, seq integer NOT NULL, name varchar(191) NOT NULL, "
                "grp varchar(191) NOT NULL, input text, attempt integer NOT NULL, status varchar(32) NOT NULL, "
                "claimed_by varchar(191), claimed_at bigint, created_at bigint NOT NULL)")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.results_table} (step_id varchar(191) PRIMARY KEY, "
                "run_id varchar(191) NOT NULL, seq integer NOT NULL, status varchar(32) NOT NULL, "
                "output text, error text, started_at bigint, claimed_by varchar(191), claimed_at bigint, "
                "created_at bigint NOT NULL)")
            conn.execute(f"CREATE INDEX IF NOT EXISTS {self.tasks_table}_grp_idx ON {self.tasks_table} "
                         "(grp, status, created_at)")
        conn.execute(f"SELECT 1 FROM {self.tasks_table} LIMIT 0")
        conn.execute(f"SELECT 1 FROM {self.results_table} LIMIT 0")
