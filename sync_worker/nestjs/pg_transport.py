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

import logging
from typing import Any, Dict, List, Optional

from .sql_tables import ClaimedRow, TableTransport, now_ms
from .transport import Delivery

__all__ = ["PostgresTransport"]


class PostgresTransport(TableTransport):
    """The engine's SQL transport tables on PostgreSQL (9.5+), from blocking code."""

    kind = "postgresql"
    _logger = logging.getLogger("sync_worker.nestjs.postgres")

    def __init__(
        self,
        dsn: str,
        *,
        prefix: str = "durable",
        lock_duration: float = 30.0,
        poll_interval: float = 0.5,
        auto_create: bool = True,
    ) -> None:
        super().__init__(prefix=prefix, lock_duration=lock_duration, poll_interval=poll_interval,
                         auto_create=auto_create)
        self.dsn = dsn

    # -- the dialect -----------------------------------------------------------------------------

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)

    def _is_broken(self, conn: Any) -> bool:
        return bool(conn.closed or conn.broken)

    def _claim_row(self, conn: Any, groups: List[str], stale_before: int, claimed_by: str,
                   now: int) -> Optional[ClaimedRow]:
        sql = (
            f"WITH picked AS (SELECT step_id FROM {self.tasks_table} "
            "WHERE grp = ANY(%s) AND (claimed_at IS NULL OR claimed_at < %s) "
            "ORDER BY created_at ASC LIMIT 1 FOR UPDATE SKIP LOCKED) "
            f"UPDATE {self.tasks_table} AS t SET claimed_by = %s, claimed_at = %s FROM picked "
            "WHERE t.step_id = picked.step_id "
            "RETURNING t.step_id, t.run_id, t.seq, t.name, t.grp, t.input, t.attempt"
        )
        row: Optional[ClaimedRow] = conn.execute(sql, (groups, stale_before, claimed_by, now)).fetchone()
        return row

    def _write_outcome(self, conn: Any, delivery: Delivery, body: Dict[str, Any], output: Optional[str],
                       error: Optional[str]) -> None:
        with conn.transaction():
            conn.execute(
                f"INSERT INTO {self.results_table} (step_id, run_id, seq, status, output, error, "
                "started_at, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (step_id) DO NOTHING",
                (delivery.step_id, body.get("runId"), body.get("seq"), body.get("status"), output, error,
                 body.get("startedAt"), now_ms()))
            conn.execute(f"DELETE FROM {self.tasks_table} WHERE step_id = %s AND claimed_by = %s",
                         (delivery.step_id, delivery.handle))

    def _touch(self, conn: Any, live: List[Delivery], now: int) -> List[bool]:
        rows = conn.execute(
            f"UPDATE {self.tasks_table} SET claimed_at = %s WHERE claimed_by = ANY(%s) RETURNING claimed_by",
            (now, [d.handle for d in live])).fetchall()
        kept = {r[0] for r in rows}
        return [d.handle in kept for d in live]

    def _give_back(self, conn: Any, delivery: Delivery) -> None:
        conn.execute(f"UPDATE {self.tasks_table} SET claimed_by = NULL, claimed_at = NULL WHERE step_id = %s "
                     "AND claimed_by = %s", (delivery.step_id, delivery.handle))

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
