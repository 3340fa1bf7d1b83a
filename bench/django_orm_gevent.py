"""Django ORM activities on gevent against PostgreSQL: do connections stay bounded and get closed?

Usage::

    eval "$(scripts/services.sh)"            # PostgreSQL on loopback (SYNC_WORKER_TEST_PG_DSN)
    python3 bench/django_orm_gevent.py       # --activities 1000 --slots 100

The process patches for gevent on its first lines (as ``durable_worker -P gevent`` does), sets
up the example project (``examples/django_shop``) on a fresh database ``sw_django_bench``,
creates one row per activity and runs an embedded dev server. ``build_workers()`` then builds
the project's worker on the gevent pool with N slots; every activity reads its row, holds its
connection ``--hold`` seconds (``pg_sleep``, default 1) and writes the row back through the
ORM, so the slots really hold connections at once. A sampler on its own connection reads
``pg_stat_activity`` every 20 ms. Printed: completions, wall time, the peak number of the
worker's connections (it must stay within slots + a small constant: the hygiene closes each
slot's connection when its task ends) and the connections left open after the worker stopped
(0). Nothing is asserted; the figures are for the reader (bench/README.md).
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any, Dict, List  # noqa: E402
from urllib.parse import urlsplit, urlunsplit  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "django_shop")
BENCH_DB = "sw_django_bench"


def _dsn_for(dsn: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, parts.fragment))


def _count_connections(cursor: Any) -> int:
    cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (BENCH_DB,))
    return int(cursor.fetchone()[0])


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--activities", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=100)
    parser.add_argument("--hold", type=float, default=1.0,
                        help="seconds each activity holds its connection (SELECT pg_sleep) between read and write")
    args = parser.parse_args(argv)
    dsn = os.environ.get("SYNC_WORKER_TEST_PG_DSN")
    if not dsn:
        print("django orm bench: SYNC_WORKER_TEST_PG_DSN is not set (eval \"$(scripts/services.sh)\")")
        return 2
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {BENCH_DB}")

    sys.path[:0] = [EXAMPLE, ROOT, os.path.join(ROOT, "integrations", "django")]
    os.environ["DJANGO_SETTINGS_MODULE"] = "shopsite.settings"
    os.environ["SHOP_PG_DSN"] = _dsn_for(dsn, BENCH_DB)
    os.environ["SYNC_WORKER_POOL"] = "gevent"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, connections
    from orders.models import Order
    from sync_worker_django import autodiscover, build_workers
    from sync_worker_django.runner import WorkerGroup

    from sync_worker import activity
    from sync_worker.devserver import DevServer

    @activity.defn(name="bench.charge")
    def charge(order_id: int, hold: float) -> int:
        order = Order.objects.get(pk=order_id)  # read
        with connection.cursor() as cursor:  # the connection stays checked out meanwhile
            cursor.execute("SELECT pg_sleep(%s)", [hold])
        Order.objects.filter(pk=order_id).update(status="charged", price_cents=order.price_cents + 1)  # write
        return order.quantity * order.price_cents

    call_command("migrate", verbosity=0)
    Order.objects.bulk_create([Order(customer=f"bench{i}", quantity=1 + i % 5) for i in range(args.activities)])
    ids = list(Order.objects.values_list("pk", flat=True))
    connections.close_all()

    server = DevServer(long_poll_max_seconds=5).start()
    sampler = psycopg.connect(dsn, autocommit=True)  # on the "postgres" database: not counted
    peak = {"value": 0}
    sampling = threading.Event()

    def sample() -> None:
        with sampler.cursor() as cursor:
            while not sampling.is_set():
                peak["value"] = max(peak["value"], _count_connections(cursor))
                time.sleep(0.02)

    try:
        from django.test import override_settings

        with override_settings(SYNC_WORKER={"SERVER_URL": server.url, "TASK_QUEUES": ["orders"],
                                            "CONCURRENCY": args.slots, "POLL_TIMEOUT": 5,
                                            "SHUTDOWN_TIMEOUT": 30}):
            found = autodiscover(("workflows", "activities", "tasks"))
            found.activities["bench.charge"] = (charge, __name__)
            group = WorkerGroup(build_workers(pool="gevent", discovered=found))
            client = group.workers[0].client
            activity_ids = [client.start_activity("bench.charge", pk, args.hold, task_queue="orders")["activity_id"]
                            for pk in ids]
            sampler_thread = threading.Thread(target=sample, daemon=True)
            sampler_thread.start()
            runner = threading.Thread(target=group.run, daemon=True)
            started = time.monotonic()
            runner.start()
            done: Dict[str, Any] = {}
            while len(done) < len(activity_ids) and time.monotonic() - started < 600:
                listed = client.list_activities(status="completed", page_size=1000)
                done = {a["activity_id"]: a for a in listed.get("activities", [])}
                time.sleep(0.2)
            wall = time.monotonic() - started
            group.stop()
            runner.join(60)
            sampling.set()
            sampler_thread.join(5)
        charged = Order.objects.filter(status="charged").count()
        connections.close_all()
        with sampler.cursor() as cursor:
            time.sleep(0.5)  # a closed backend leaves pg_stat_activity a moment after the close
            left = _count_connections(cursor)
    finally:
        sampler.close()
        server.stop()
        connections.close_all()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
    print(f"django orm bench: {len(done)}/{len(activity_ids)} ORM activities completed ({charged} rows written) "
          f"in {wall:.1f} s ({len(done) / wall:.0f}/s) on {args.slots} gevent slots, PostgreSQL")
    print(f"django orm bench: peak worker connections in pg_stat_activity: {peak['value']} "
          f"(slots {args.slots}; bound slots + small constant)")
    print(f"django orm bench: connections left open after the run: {left}")
    return 0 if len(done) == len(activity_ids) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
