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

import json
import logging
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple
from urllib.parse import parse_qs, unquote, urlsplit

from ..cancel import CancelToken
from .descriptor import routing_token
from .runtime import NestjsWorker
from .sql_pool import Connections
from .transport import Delivery

__all__ = ["MysqlTransport", "connect_args"]

logger = logging.getLogger("sync_worker.nestjs.mysql")

#: MySQL's "Duplicate key name" (an index that already exists).
_ER_DUP_KEYNAME = 1061


def _now_ms() -> int:
    return int(time.time() * 1000)


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


class MysqlTransport:
    """The engine's SQL transport tables on MySQL 8+ or MariaDB 10.6+, from blocking code."""

    kind = "mysql"

    def __init__(
        self,
        url: str,
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
        self.url = url
        self._connect_args = connect_args(url)
        self.prefix = prefix
        self.tasks_table = f"`{prefix}_transport_tasks`"
        self.results_table = f"`{prefix}_transport_results`"
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
                                 is_broken=lambda conn: not conn.open)
        self._groups = [routing_token(name) for name in names]
        self._pool.run(self._prepare)  # fail fast: connect and check (or create) the tables

    def claim(self) -> Optional[Delivery]:
        worker = self._require_worker()
        if not self._groups:
            return None
        claimed_by = f"{worker.instance_id}/{uuid.uuid4().hex[:12]}"
        now = _now_ms()
        marks = ", ".join(["%s"] * len(self._groups))
        select = (f"SELECT `step_id`, `run_id`, `seq`, `name`, `grp`, `input`, `attempt` FROM {self.tasks_table} "
                  f"WHERE `grp` IN ({marks}) AND (`claimed_at` IS NULL OR `claimed_at` < %s) "
                  "ORDER BY `created_at` ASC LIMIT 1 FOR UPDATE SKIP LOCKED")

        def pick(conn: Any) -> Any:
            conn.begin()
            try:
                with conn.cursor() as cur:
                    cur.execute(select, (*self._groups, now - int(self.lease_seconds * 1000)))
                    row = cur.fetchone()
                    if row is not None:
                        cur.execute(f"UPDATE {self.tasks_table} SET `claimed_by` = %s, `claimed_at` = %s "
                                    "WHERE `step_id` = %s", (claimed_by, now, row[0]))
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            return row

        row = self._pool_run(pick)
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
            conn.begin()
            try:
                with conn.cursor() as cur:
                    cur.execute(
                        f"INSERT IGNORE INTO {self.results_table} (`step_id`, `run_id`, `seq`, `status`, `output`, "
                        "`error`, `started_at`, `created_at`) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                        (delivery.step_id, body.get("runId"), body.get("seq"), body.get("status"), output, error,
                         body.get("startedAt"), _now_ms()))
                    cur.execute(f"DELETE FROM {self.tasks_table} WHERE `step_id` = %s AND `claimed_by` = %s",
                                (delivery.step_id, delivery.handle))
                conn.commit()
            except BaseException:
                conn.rollback()
                raise

        self._pool_run(write)

    def renew(self, deliveries: Sequence[Delivery]) -> None:
        live = [d for d in deliveries if not d.lost]
        if not live:
            return
        now = _now_ms()

        def touch(conn: Any) -> List[bool]:
            kept = []
            with conn.cursor() as cur:
                for delivery in live:
                    matched = cur.execute(f"UPDATE {self.tasks_table} SET `claimed_at` = %s WHERE `step_id` = %s "
                                          "AND `claimed_by` = %s", (now, delivery.step_id, delivery.handle))
                    kept.append(matched > 0)
            return kept

        for delivery, still_ours in zip(live, self._pool_run(touch)):
            if not still_ours:
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
        def give_back(conn: Any) -> None:
            with conn.cursor() as cur:
                cur.execute(f"UPDATE {self.tasks_table} SET `claimed_by` = NULL, `claimed_at` = NULL "
                            "WHERE `step_id` = %s AND `claimed_by` = %s", (delivery.step_id, delivery.handle))

        self._pool_run(give_back)

    def background(self) -> List[Tuple[str, Callable[[CancelToken], None]]]:
        return []

    def close(self, *, clean: bool) -> None:
        if self._pool is not None:
            self._pool.close()

    # -- internals -------------------------------------------------------------------------------

    def _connect(self) -> Any:
        import pymysql  # the nestjs-mysql extra; imported here so the module loads without it
        from pymysql.constants import CLIENT

        return pymysql.connect(**self._connect_args, autocommit=True, connect_timeout=10,
                               client_flag=CLIENT.FOUND_ROWS)

    def _require_worker(self) -> NestjsWorker:
        if self._worker is None or self._pool is None:
            raise RuntimeError("MysqlTransport used before open()")
        return self._worker

    def _pool_run(self, fn: Callable[[Any], Any]) -> Any:
        self._require_worker()
        assert self._pool is not None
        return self._pool.run(fn)

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
