"""Adaptive activity slots: memory-hungry reports that never run the process out of memory.

Run it with no arguments: it starts an embedded dev server, a worker whose activity slots are
adaptive (``max_concurrent_activity_tasks={"max": 8, "start": 8}``: eight slots open, the memory
admission gate decides how many really run), starts twelve "report" activities that each build
a 64 MB buffer, and prints the concurrency/memory block of ``Worker.status()`` while they run::

    python examples/adaptive_concurrency.py
    python examples/adaptive_concurrency.py --ceiling-mb 400    # pretend the process may use 400 MB

``--ceiling-mb`` replaces the memory ceiling the gate reads (normally the cgroup limit, else RAM),
so the gate visibly defers on any machine; the usage it compares is still this process's real
working set. The same worker runs under ``sync-worker run examples.adaptive_concurrency:build
--autoscale 8`` (see docs/concurrency.md).
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from typing import Any, Optional

from sync_worker import activity
from sync_worker.client import Client
from sync_worker.runtime.admission import MemoryProbe
from sync_worker.worker import Worker

MIB = 1024 * 1024


@activity.defn(name="reports.build")
def build_report(rows: int) -> int:
    """A legacy report: the whole thing in memory (64 MB here), then a summary."""
    buffer = bytearray(64 * MIB)
    for offset in range(0, len(buffer), 4096):
        buffer[offset] = 1  # touch every page: really resident
    time.sleep(0.3)
    return rows


def build(client: Any, task_queue: str = "reports", concurrency: Any = None) -> Worker:
    return Worker(client, task_queue=task_queue, activities=[build_report], poll_timeout=5.0,
                  max_concurrent_activity_tasks=concurrency or {"max": 8, "start": 8})


def main(ceiling_mb: Optional[int]) -> None:
    from sync_worker.devserver import DevServer

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with DevServer(port=0, db=":memory:") as server:
        client = Client(server.url)
        worker = build(client)
        if ceiling_mb:
            probe = worker.activity_gate.probe  # demo only: a smaller ceiling than this machine's
            worker.activity_gate.probe = MemoryProbe(usage_reader=lambda: probe.usage().usage_bytes,
                                                 limit_reader=lambda: ceiling_mb * MIB)
        runner = threading.Thread(target=worker.run, daemon=True)
        runner.start()
        ids = [client.start_activity("reports.build", n, task_queue="reports")["activity_id"] for n in range(12)]
        done = 0
        while done < len(ids):
            done = sum(1 for i in ids if client.describe_activity(i).get("status") == "completed")
            status = worker.status().concurrency
            if status is not None:
                usage = f"{status.usage_bytes / MIB:.0f} MB" if status.usage_bytes else "?"
                print(f"done {done:2d}/12  running {status.in_flight}  limit {status.limit}  gate {status.gate:9}"
                      f"  usage {usage} of {(status.ceiling_bytes or 0) / MIB:.0f} MB ({status.memory_source})"
                      f"  deferrals {status.deferrals}")
            time.sleep(0.5)
        final = worker.status().concurrency
        assert final is not None
        print(f"learned costs: { {k: f'{v / MIB:.0f} MB' for k, v in final.step_cost_bytes.items()} }")
        worker.stop()
        runner.join(10)
        client.close()
        print("stopped")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ceiling-mb", type=int, default=None)
    main(parser.parse_args().ceiling_mb)
