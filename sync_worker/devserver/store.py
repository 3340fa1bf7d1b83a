"""SQLite persistence: one connection guarded by the engine lock, rows kept as JSON documents.

Each table keeps a handful of indexed columns (what the scheduler and pollers select on) plus
``data``, the whole row as JSON. Writers always store the full document, so reading a row is
one ``json.loads``. Durability: a file database runs in WAL mode and every engine operation is
one transaction, so a killed server restarts on a consistent state.
"""

from __future__ import annotations

import sqlite3
import threading
from operator import itemgetter
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from .checkpoint import Checkpointer
from .encoding import compact_encoder, decode_stored

Row = Dict[str, Any]


# table -> (primary key column, indexed columns copied out of the document)
TABLES: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "runs": ("run_id", ("namespace", "workflow_id", "status", "is_current", "created_order")),
    "wf_tasks": ("task_id", ("namespace", "task_queue", "run_id", "state", "due_at", "workflow_type")),
    "activities": ("execution_id", ("namespace", "task_queue", "run_id", "state", "due_at", "task_id",
                                    "activity_type")),
    "timers": ("timer_id", ("namespace", "run_id", "state", "fire_at")),
    "workers": ("key", ("namespace", "worker_id", "task_queue")),
    "worker_sessions": ("key", ("namespace", "status", "lease_owner")),
    "kv": ("key", ("namespace", "kind")),
    "namespaces": ("name", ("status", "created_at")),
    "schedules": ("key", ("namespace", "schedule_id", "state", "next_fire_at")),
    "schedule_events": ("key", ("namespace", "schedule_id", "seq")),
}

#: table -> its indexed columns' values out of a row, in one C call (every table has two or more
#: columns, so the getter returns a tuple); a row that lacks one raises ``KeyError``: see :func:`_columns`.
_GETTERS: Dict[str, Any] = {table: itemgetter(*columns) for table, (_, columns) in TABLES.items()}


def _columns(table: str, row: Row) -> Tuple[Any, ...]:
    """``row``'s indexed columns of ``table`` (``None`` for one it lacks), as the store writes them."""
    try:
        return _GETTERS[table](row)  # type: ignore[no-any-return]
    except KeyError:  # a row without one of the columns (none of the hot kinds: their writers set them all)
        return tuple([row.get(c) for c in TABLES[table][1]])


#: Tables written once per activity or more whose rows are small: kept in their primary key's b-tree
#: (``WITHOUT ROWID``), so an insert writes one b-tree, not a rowid table plus the key's own index (two
#: fewer WAL pages per commit). A file an older dev server created keeps its rowid tables; both work.
_TABLE_OPTIONS = {"kv": " WITHOUT ROWID"}

#: Indexes an older file may still carry that nothing reads any more (the partial ``acts_*`` below serve them).
_RETIRED_INDEXES = ("acts_q", "acts_due", "acts_claim", "acts_task", "runs_wf", "runs_id", "tasks_due")

#: The leased workflow tasks, said so the partial ``tasks_waiting`` index serves the query (SQLite uses a
#: partial index only when the query's WHERE holds its condition's terms).
LEASED_WF_TASKS = "state IN ('delayed', 'leased') AND state = 'leased'"

_INDEXES = (
    # One index serves a workflow id's runs in a namespace (``namespace = ? AND workflow_id = ?``, newest
    # first) and the cross-namespace fence (``namespaces.reserved_elsewhere``: ``workflow_id = ? AND
    # namespace != ?``, asked on every start; without an index led by the workflow id that is a scan of
    # every run): one index entry, one WAL page fewer per run created than two indexes.
    "CREATE INDEX IF NOT EXISTS runs_wid ON runs(workflow_id, namespace, created_order)",
    "CREATE INDEX IF NOT EXISTS tasks_q ON wf_tasks(namespace, task_queue, state, due_at)",
    # The scheduler's deadline scan and the lease lookups: only the workflow tasks waiting on a deadline
    # (delayed or leased). A task queued ready (every start) writes no entry here, and a finished one
    # leaves it (one WAL page fewer per start and per workflow task completed). A query uses it only
    # when its WHERE holds the same ``state IN (...)`` term: :data:`LEASED_WF_TASKS`.
    "CREATE INDEX IF NOT EXISTS tasks_waiting ON wf_tasks(state, due_at) WHERE state IN ('delayed', 'leased')",
    # Partial indexes hold only the rows their readers look for, so an activity's claim and completion
    # move fewer index entries (each a page in the commit's WAL frames): a done activity leaves the
    # claim and deadline indexes instead of moving within them.
    # The scheduler's due scan (``due_at <= ?`` implies ``due_at IS NOT NULL``).
    "CREATE INDEX IF NOT EXISTS acts_deadline ON activities(state, due_at) WHERE due_at IS NOT NULL",
    # The activity claim's "oldest ready on this queue": an indexed lookup, not a sort of every ready row.
    "CREATE INDEX IF NOT EXISTS acts_ready ON activities(namespace, task_queue, execution_id) WHERE state = 'ready'",
    "CREATE INDEX IF NOT EXISTS acts_task_id ON activities(task_id) WHERE task_id IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS acts_run ON activities(run_id)",
    "CREATE INDEX IF NOT EXISTS timers_due ON timers(state, fire_at)",
    "CREATE INDEX IF NOT EXISTS timers_run ON timers(run_id, state)",
    "CREATE INDEX IF NOT EXISTS schedules_due ON schedules(state, next_fire_at)",
    "CREATE INDEX IF NOT EXISTS schedule_events_seq ON schedule_events(namespace, schedule_id, seq)",
)


_encode = compact_encoder(ensure_ascii=True)  # built once, not per call (what json.dumps did, ASCII)

#: How many rows per table (and runs' event counts) the store remembers the stored columns of.
_REMEMBER_ROWS = 20000

#: Tables whose documents the store keeps the JSON text of (read on every poll and completion: a
#: worker's row, a run's, the activity or workflow task a completion reports on), so a
#: :meth:`Store.get` of a row written or read lately costs a ``json.loads``, not a ``SELECT``; at
#: most :data:`_CACHED_DOCS` rows per table, none longer than :data:`_CACHED_TEXT`.
_CACHED_TABLES = ("runs", "workers", "activities", "wf_tasks")
_CACHED_DOCS = 4096
_CACHED_TEXT = 16 * 1024

#: The WAL is moved into the database file after this many commits (or every second).
_CHECKPOINT_EVERY_COMMITS = 200


class Store:
    """Thin typed wrapper over one sqlite3 connection (callers hold the engine lock)."""

    def __init__(self, path: str, writer_lock: Any = None) -> None:
        """``writer_lock``: the lock every writer of this store holds (the engine's)."""
        self.path = path
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._depth = 0
        self._lock = threading.RLock()
        # Group commit: a finished transaction may leave its batch open (``end(True, defer=True)``);
        # later transactions join it as savepoints and one COMMIT makes the whole batch durable.
        #: the id of the newest batch (open or not) and of the newest committed one
        self.batch_id = 0
        self.committed_id = 0
        self.batch_open = False
        self._joined = False  # the running transaction is a savepoint inside an open batch
        self._begun = False  # the running transaction has written (its BEGIN or SAVEPOINT was executed)
        self._checkpointer: Optional[Checkpointer] = None
        self._commits = 0
        # What each row's indexed columns hold in the file, for rows read or written lately: a
        # put then rewrites only the columns that changed (an index not touched, a page not
        # dirtied) instead of INSERT OR REPLACE, which deletes and re-inserts every index entry.
        self._stored: Dict[str, Dict[str, Tuple[Any, ...]]] = {table: {} for table in TABLES}
        self._updates: Dict[Tuple[str, Tuple[int, ...]], str] = {}
        self._last_seq: Dict[str, int] = {}  # run_id -> its newest event's seq (saves a MAX() per append)
        #: table -> primary key -> the document's JSON text, as in the file (``_CACHED_TABLES`` only)
        self._docs: Dict[str, Dict[str, str]] = {table: {} for table in _CACHED_TABLES}
        #: table -> primary key -> (the text in ``_docs``, its decoded row) handed to :meth:`get_shared`
        self._shared: Dict[str, Dict[str, Tuple[str, Row]]] = {}
        if path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        for table, (key, columns) in TABLES.items():
            cols = ", ".join([f"{key} TEXT PRIMARY KEY"] + [f"{c}" for c in columns] + ["data TEXT NOT NULL"])
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS {table} ({cols}){_TABLE_OPTIONS.get(table, '')}")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "data TEXT NOT NULL, PRIMARY KEY (run_id, seq))")
        self._add_missing_columns()
        for statement in _INDEXES:
            self._conn.execute(statement)
        for retired in _RETIRED_INDEXES:
            self._conn.execute(f"DROP INDEX IF EXISTS {retired}")
        if path != ":memory:" and self._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
            self._conn.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer thread does it
            self._checkpointer = Checkpointer(path, writer_lock if writer_lock is not None else self._lock)

    def _add_missing_columns(self) -> None:
        """A file written by an older dev server: add the indexed columns it lacks, filled from the documents.

        Open tasks only need it (the claims select on ``workflow_type`` / ``activity_type``); a
        workflow task's type is its run's, which older task documents did not copy.
        """
        for table, (_, columns) in TABLES.items():
            present = {str(row[1]) for row in self._conn.execute(f"PRAGMA table_info({table})")}
            for column in columns:
                if column in present:
                    continue
                self.begin()
                try:
                    self._write()
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
                    for (data,) in self._conn.execute(f"SELECT data FROM {table}").fetchall():
                        row = decode_stored(data)
                        if row.get(column) is None and table == "wf_tasks":
                            found = self.get("runs", str(row.get("run_id")))
                            row[column] = found.get("workflow_type") if found else None
                        if row.get(column) is not None:
                            self.put(table, row)
                except BaseException:
                    self.end(False)
                    raise
                self.end(True)

    def close(self) -> None:
        with self._lock:
            self.flush()
            if self._checkpointer is not None:
                self._checkpointer.close()
                self._checkpointer = None
            self._conn.close()  # the last connection to close checkpoints and removes the WAL

    # -- transactions -------------------------------------------------------------------
    def begin(self, lazy: bool = False) -> None:
        """Open a transaction. ``lazy``: its ``BEGIN`` (or ``SAVEPOINT``, in an open batch) waits for its
        first write, so one that only reads (a long poll's round that finds nothing) executes no transaction
        statement; its reads need none, as every writer holds the engine lock, as the transaction does, so
        nothing changes between its statements (an open batch's rows included). Not lazy: at once (a read
        outside a transaction takes and drops a read snapshot per statement)."""
        with self._lock:
            if self._depth == 0:
                self._begun = False
                if not lazy:
                    self._begin_now()
            self._depth += 1

    def _write(self) -> None:
        """Before a write: the running transaction's ``BEGIN`` / ``SAVEPOINT``, if not executed yet."""
        if not self._begun and self._depth:
            self._begin_now()

    def _begin_now(self) -> None:
        self._begun = True
        if self.batch_open:
            self._conn.execute("SAVEPOINT grouped")
            self._joined = True
        else:
            self._conn.execute("BEGIN IMMEDIATE")
            self.batch_open, self._joined = True, False
            self.batch_id += 1

    def end(self, commit: bool, defer: bool = False) -> None:
        """Close a transaction; ``defer`` leaves a successful one's batch open for :meth:`flush`.

        A failed transaction undoes only its own work: the batch's savepoint when it joined an
        open batch, else the batch it began (which holds nothing else).
        """
        with self._lock:
            self._depth -= 1
            if self._depth != 0:
                return
            if not self._begun:  # it wrote nothing: nothing to undo; a read of an open batch may commit it
                if commit and not defer:
                    self.flush()
                return
            if not commit:
                self._forget()  # the cached column values may be what was just rolled back
                if self._joined:
                    self._conn.execute("ROLLBACK TO grouped")
                    self._conn.execute("RELEASE grouped")
                else:
                    self._conn.execute("ROLLBACK")
                    self.batch_open = False
                return
            if self._joined:
                self._conn.execute("RELEASE grouped")
            if not defer:
                self.flush()

    def flush(self) -> None:
        """Commit the open batch, if any (the caller holds the engine lock)."""
        with self._lock:
            if not self.batch_open or self._depth:
                return
            self._conn.execute("COMMIT")
            self.batch_open = False
            self.committed_id = self.batch_id
            self._commits += 1
            if self._checkpointer is not None and self._commits % _CHECKPOINT_EVERY_COMMITS == 0:
                self._checkpointer.wake()

    def _forget(self) -> None:
        for known in self._stored.values():
            known.clear()
        for docs in self._docs.values():
            docs.clear()
        self._shared.clear()
        self._last_seq.clear()

    def _keep_text(self, table: str, pk: str, text: str) -> None:
        docs = self._docs.get(table)
        if docs is None:
            return
        if len(text) > _CACHED_TEXT:
            docs.pop(pk, None)
            return
        if len(docs) >= _CACHED_DOCS and pk not in docs:
            del docs[next(iter(docs))]  # the oldest
        docs[pk] = text

    def _remember(self, table: str, row: Row) -> None:
        """Note what ``row`` (just read from the file) holds in its indexed columns.

        A row the store remembers already needs nothing: every write goes through :meth:`put`,
        :meth:`delete` or :meth:`delete_where`, which keep the note true, and a rollback forgets
        every note; so a remembered row's note is what the file holds.
        """
        known = self._stored[table]
        pk = row[TABLES[table][0]]
        if pk in known:
            return
        if len(known) >= _REMEMBER_ROWS:
            known.clear()
        known[pk] = _columns(table, row)

    # -- documents ----------------------------------------------------------------------
    def put(self, table: str, row: Row) -> None:
        key, columns = TABLES[table]
        pk = row[key]
        values = _columns(table, row)
        data = _encode(row)
        known = self._stored[table]
        docs = self._docs.get(table)
        if docs is not None and docs.get(pk) == data:  # the file holds this very document (a run saved twice)
            if len(known) >= _REMEMBER_ROWS:
                known.clear()
            known[pk] = values
            return
        self._write()
        before = known.get(pk)
        if before is not None:
            changed = tuple([i for i, (old, new) in enumerate(zip(before, values))
                             if old != new or type(old) is not type(new)])
            sql = self._updates.get((table, changed))
            if sql is None:
                sets = "".join(f"{columns[i]} = ?, " for i in changed)
                sql = self._updates[(table, changed)] = f"UPDATE {table} SET {sets}data = ? WHERE {key} = ?"
            cur = self._conn.execute(sql, [*[values[i] for i in changed], data, pk])
            if cur.rowcount == 1:
                known[pk] = values
                self._keep_text(table, pk, data)
                return
        names = [key, *columns, "data"]
        marks = ", ".join("?" for _ in names)
        self._conn.execute(f"INSERT OR REPLACE INTO {table} ({', '.join(names)}) VALUES ({marks})",
                           [pk, *values, data])
        if len(known) >= _REMEMBER_ROWS:
            known.clear()
        known[pk] = values
        self._keep_text(table, pk, data)

    def get(self, table: str, key: str) -> Optional[Row]:
        docs = self._docs.get(table)
        text = docs.get(key) if docs is not None else None
        if text is None:
            pk = TABLES[table][0]
            found = self._conn.execute(f"SELECT data FROM {table} WHERE {pk} = ?", (key,)).fetchone()
            if found is None:
                return None
            text = found[0]
            self._keep_text(table, key, text)
        row = decode_stored(text)
        self._remember(table, row)
        return row

    def get_shared(self, table: str, key: str) -> Optional[Row]:
        """:meth:`get` for a reader that does not change the row (a poll's look at its worker's): the same
        decoded object while the stored text is the same one (``_CACHED_TABLES`` only). Never mutate it."""
        row = self.get(table, key) if key not in self._docs[table] else None
        text = self._docs[table].get(key)
        if text is None:
            return row
        shared = self._shared.get(table)
        if shared is None:
            shared = self._shared[table] = {}
        found = shared.get(key)
        if found is not None and found[0] is text:
            return found[1]
        if row is None:
            row = decode_stored(text)
            self._remember(table, row)
        if len(shared) >= _CACHED_DOCS:
            shared.clear()
        shared[key] = (text, row)
        return row

    def stored_column(self, table: str, key: str, column: str) -> Any:
        """An indexed column's value as the file holds it, when the store remembers the row (read or
        written lately, in this or a committed transaction); ``None`` when it does not: then ask :meth:`get`."""
        known = self._stored[table].get(key)
        if known is None:
            return None
        return known[TABLES[table][1].index(column)]

    def run_status(self, run_id: str) -> Optional[str]:
        """A run's ``status`` column (``None``: no such run), without decoding its document.

        When the store does not remember the run, one statement reads the column, the document's
        text (kept, not decoded: the next :meth:`get` of the run asks nothing) and the run's event
        count (the next :meth:`event_count` asks nothing either).
        """
        known = self._stored["runs"].get(run_id)
        if known is not None and run_id in self._last_seq:
            return str(known[TABLES["runs"][1].index("status")])
        found = self._conn.execute(
            "SELECT status, data, (SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?1) FROM runs "
            "WHERE run_id = ?1", (run_id,)).fetchone()
        if found is None:
            return None
        self._keep_text("runs", run_id, found[1])
        if run_id not in self._last_seq:
            if len(self._last_seq) >= _REMEMBER_ROWS:
                self._last_seq.clear()
            self._last_seq[run_id] = int(found[2])
        return str(found[0])

    def delete(self, table: str, key: str) -> None:
        self._write()
        pk = TABLES[table][0]
        self._conn.execute(f"DELETE FROM {table} WHERE {pk} = ?", (key,))
        self._stored[table].pop(key, None)
        if table in self._docs:
            self._docs[table].pop(key, None)

    def delete_where(self, table: str, where: str, params: Sequence[Any] = ()) -> int:
        """Delete every matching row (``events`` included); returns how many went."""
        self._write()
        cur = self._conn.execute(f"DELETE FROM {table} WHERE {where}", tuple(params))
        if table == "events":
            self._last_seq.clear()
        else:
            self._stored[table].clear()
            if table in self._docs:
                self._docs[table].clear()
        return int(cur.rowcount)

    def select(self, table: str, where: str = "1=1", params: Sequence[Any] = (), *,
               order: str = "", limit: Optional[int] = None, offset: int = 0) -> List[Row]:
        sql = f"SELECT data FROM {table} WHERE {where}"
        if order:
            sql += f" ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)} OFFSET {int(offset)}"
        rows = [decode_stored(r[0]) for r in self._conn.execute(sql, tuple(params))]
        for row in rows:
            self._remember(table, row)
        return rows

    def count(self, table: str, where: str = "1=1", params: Sequence[Any] = ()) -> int:
        cur = self._conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}", tuple(params))
        return int(cur.fetchone()[0])

    def max_value(self, table: str, column: str) -> int:
        """The largest integer ``column`` of ``table`` (0 when empty)."""
        cur = self._conn.execute(f"SELECT COALESCE(MAX({column}), 0) FROM {table}")
        return int(cur.fetchone()[0])

    def minimum(self, table: str, column: str, where: str = "1=1", params: Sequence[Any] = ()) -> Optional[float]:
        """``MIN(column)`` over the matching rows (an indexed column), or ``None`` when none match."""
        cur = self._conn.execute(f"SELECT MIN({column}) FROM {table} WHERE {where}", tuple(params))
        found = cur.fetchone()[0]
        return None if found is None else float(found)

    # -- history ------------------------------------------------------------------------
    def event_count(self, run_id: str) -> int:
        known = self._last_seq.get(run_id)
        if known is not None:
            return known
        cur = self._conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?", (run_id,))
        return int(cur.fetchone()[0])

    def new_history(self, run_id: str) -> None:
        """``run_id`` is a run created in this transaction: it has no events yet (no ``MAX()`` to ask)."""
        if len(self._last_seq) >= _REMEMBER_ROWS:
            self._last_seq.clear()
        self._last_seq[run_id] = 0

    def add_event(self, run_id: str, seq: int, event: Row) -> None:
        self._write()
        self._conn.execute("INSERT INTO events (run_id, seq, data) VALUES (?, ?, ?)",
                           (run_id, seq, _encode(event)))
        if len(self._last_seq) >= _REMEMBER_ROWS:
            self._last_seq.clear()
        if seq > self._last_seq.get(run_id, 0):
            self._last_seq[run_id] = seq

    def events(self, run_id: str, offset: int = 0, limit: Optional[int] = None) -> List[Row]:
        return [decode_stored(text) for text in self.event_texts(run_id, offset, limit)]

    def event_texts(self, run_id: str, offset: int = 0, limit: Optional[int] = None) -> List[str]:
        """A run's events from the ``offset``-th on (at most ``limit``), as the JSON text the store wrote."""
        sql = "SELECT data FROM events WHERE run_id = ? ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)} OFFSET {int(offset)}"
        elif offset:
            sql += f" LIMIT -1 OFFSET {int(offset)}"
        return [r[0] for r in self._conn.execute(sql, (run_id,))]

    def iter_all(self, table: str) -> Iterator[Row]:
        for r in self._conn.execute(f"SELECT data FROM {table}"):
            yield decode_stored(r[0])
