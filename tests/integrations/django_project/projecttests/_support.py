"""Helpers of the project's tests."""

import os
import time

from django.db import connection


def open_worker_connections(settle=0.0):
    """Connections other than this test's own that are open to the test database right now.

    PostgreSQL: counted in pg_stat_activity. SQLite has no server, so the hygiene is proven by
    the activities themselves (``open_at_start``); report 0 there.
    """
    if connection.vendor != "postgresql":
        return 0
    deadline = time.monotonic() + settle
    while True:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            count = int(cursor.fetchone()[0])
        if count == 0 or time.monotonic() >= deadline:
            return count
        time.sleep(0.1)  # a closed connection's backend leaves pg_stat_activity a moment later


def project_dir():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
