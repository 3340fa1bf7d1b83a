"""MySQL / MariaDB transport: the ``DbTransport`` tables in the engine's MySQL dialect.

``@dudousxd/nestjs-durable-transport-db`` picks its MySQL dialect for every non-PostgreSQL typeorm
or MikroORM connection: backtick-quoted names, ``longtext`` JSON columns, ``?`` placeholders,
``INSERT IGNORE`` for idempotent inserts. The contract is the PostgreSQL one
(:mod:`sync_worker.nestjs.pg_transport`): the engine inserts one row per dispatched step into
``<prefix>_transport_tasks``; a worker claims rows with ``SELECT ... FOR UPDATE SKIP LOCKED``
(MySQL 8.0+, MariaDB 10.6+) -- never claimed, or claimed longer ago than the lease --, stamps
``claimed_by`` / ``claimed_at``, runs the step, inserts the result row into
``<prefix>_transport_results`` and deletes the task row.

The same compatible improvements as on PostgreSQL: one claim per free slot, every step name in
one query, the lease renewed every ``lease/2`` s while the step runs, renewals and the delete
touching only a row still claimed by this claim, the result insert and the delete in one
transaction. MySQL has no ``UPDATE ... RETURNING``, so a renewal is one ``UPDATE`` per held claim,
read back by its matched-row count (the connection asks for ``FOUND_ROWS``).

PyMySQL (pure Python, so a gevent-patched process cooperates on its sockets), autocommit, one
connection per concurrent user from a small pool.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional
from urllib.parse import parse_qs, unquote, urlsplit

from .sql_tables import ClaimedRow, TableTransport, now_ms
from .transport import Delivery

__all__ = ["MysqlTransport", "connect_args"]

#: MySQL's "Duplicate key name" (an index that already exists).
_ER_DUP_KEYNAME = 1061


def connect_args(url: str) -> Dict[str, Any]:
    """PyMySQL connection arguments from ``mysql://user:password@host:port/database[?charset=...]``."""
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mariadb") or not parts.path.strip("/"):
        raise ValueError(f"a MySQL URL looks like mysql://user:password@host:3306/database, not {url!r}")
    args: Dict[str, Any] = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "database": unquote(parts.path.strip("/")),
        "charset": parse_qs(parts.query).get("charset", ["utf8mb4"])[0],
    }
    return args


class MysqlTransport(TableTransport):
    """The engine's SQL transport tables on MySQL 8+ or MariaDB 10.6+, from blocking code."""

    kind = "mysql"
    _logger = logging.getLogger("sync_worker.nestjs.mysql")
    @staticmethod
    def quote(name: str) -> str:
        return f"`{name}`"

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "durable",
        lock_duration: float = 30.0,
        poll_interval: float = 0.5,
        auto_create: bool = True,
    ) -> None:
        super().__init__(prefix=prefix, lock_duration=lock_duration, poll_interval=poll_interval,
                         auto_create=auto_create)
        self.url = url
        self._connect_args = connect_args(url)

    # -- the dialect -----------------------------------------------------------------------------

    def _connect(self) -> Any:
        import pymysql  # the nestjs-mysql extra; imported here so the module loads without it
        from pymysql.constants import CLIENT

        return pymysql.connect(**self._connect_args, autocommit=True, connect_timeout=10,
                               client_flag=CLIENT.FOUND_ROWS)

    def _is_broken(self, conn: Any) -> bool:
        return not conn.open

    def _claim_row(self, conn: Any, groups: List[str], stale_before: int, claimed_by: str,
                   now: int) -> Optional[ClaimedRow]:
        marks = ", ".join(["%s"] * len(groups))
        select = (f"SELECT `step_id`, `run_id`, `seq`, `name`, `grp`, `input`, `attempt` FROM {self.tasks_table} "
                  f"WHERE `grp` IN ({marks}) AND (`claimed_at` IS NULL OR `claimed_at` < %s) "
                  "ORDER BY `created_at` ASC LIMIT 1 FOR UPDATE SKIP LOCKED")
        conn.begin()
        try:
            with conn.cursor() as cur:
                cur.execute(select, (*groups, stale_before))
                row: Optional[ClaimedRow] = cur.fetchone()
                if row is not None:
                    cur.execute(f"UPDATE {self.tasks_table} SET `claimed_by` = %s, `claimed_at` = %s "
                                "WHERE `step_id` = %s", (claimed_by, now, row[0]))
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        return row

    def _write_outcome(self, conn: Any, delivery: Delivery, body: Dict[str, Any], output: Optional[str],
                       error: Optional[str]) -> None:
        conn.begin()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    f"INSERT IGNORE INTO {self.results_table} (`step_id`, `run_id`, `seq`, `status`, `output`, "
                    "`error`, `started_at`, `created_at`) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (delivery.step_id, body.get("runId"), body.get("seq"), body.get("status"), output, error,
                     body.get("startedAt"), now_ms()))
                cur.execute(f"DELETE FROM {self.tasks_table} WHERE `step_id` = %s AND `claimed_by` = %s",
                            (delivery.step_id, delivery.handle))
            conn.commit()
        except BaseException:
            conn.rollback()
            raise

    def _touch(self, conn: Any, live: List[Delivery], now: int) -> List[bool]:
        # no UPDATE ... RETURNING here: one UPDATE per held claim, read back by its matched-row count
        kept = []
        with conn.cursor() as cur:
            for delivery in live:
                matched = cur.execute(f"UPDATE {self.tasks_table} SET `claimed_at` = %s WHERE `step_id` = %s "
                                      "AND `claimed_by` = %s", (now, delivery.step_id, delivery.handle))
                kept.append(matched > 0)
        return kept

    def _give_back(self, conn: Any, delivery: Delivery) -> None:
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {self.tasks_table} SET `claimed_by` = NULL, `claimed_at` = NULL "
                        "WHERE `step_id` = %s AND `claimed_by` = %s", (delivery.step_id, delivery.handle))

    def _prepare(self, conn: Any) -> None:
        with conn.cursor() as cur:
            if self.auto_create:
                cur.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.tasks_table} (`step_id` varchar(191) PRIMARY KEY, "
                    "`run_id` varchar(191) NOT NULL, `seq` integer NOT NULL, `name` varchar(191) NOT NULL, "
                    "`grp` varchar(191) NOT NULL, `input` longtext, `attempt` integer NOT NULL, "
                    "`status` varchar(32) NOT NULL, `claimed_by` varchar(191), `claimed_at` bigint, "
                    "`created_at` bigint NOT NULL)")
                cur.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.results_table} (`step_id` varchar(191) PRIMARY KEY, "
                    "`run_id` varchar(191) NOT NULL, `seq` integer NOT NULL, `status` varchar(32) NOT NULL, "
                    "`output` longtext, `error` longtext, `started_at` bigint, `claimed_by` varchar(191), "
                    "`claimed_at` bigint, `created_at` bigint NOT NULL)")
                try:
                    cur.execute(f"CREATE INDEX `{self.prefix}_transport_tasks_grp_idx` ON {self.tasks_table} "
                                "(`grp`, `status`, `created_at`)")
                except Exception as error:  # MySQL has no CREATE INDEX IF NOT EXISTS
                    if getattr(error, "args", (None,))[0] != _ER_DUP_KEYNAME:
                        raise
            cur.execute(f"SELECT 1 FROM {self.tasks_table} LIMIT 0")
            cur.execute(f"SELECT 1 FROM {self.results_table} LIMIT 0")
