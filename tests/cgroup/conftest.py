"""The real-cgroup suite runs in its own leg (scripts/suites.d/40-memory-gate-cgroup.sh).

It starts worker processes that allocate gigabytes inside a memory-limited cgroup; the leg sets
``SYNC_WORKER_CGROUP_LEG=1``. The main pytest run does not collect it (it is not skipped: it runs
in that leg, which ``scripts/test`` always runs).
"""

from __future__ import annotations

import os

collect_ignore = [] if os.environ.get("SYNC_WORKER_CGROUP_LEG") else ["test_memory_gate_cgroup.py"]
