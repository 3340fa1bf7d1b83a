"""``examples/gevent_worker.py`` runs end to end: patched first, activities overlap on greenlets."""

from __future__ import annotations

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_gevent_worker_example_runs_activities_concurrently() -> None:
    count, seconds = 40, 0.5
    env = {k: v for k, v in os.environ.items() if k != "SYNC_WORKER_POOL"}
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "gevent_worker.py"), "--activities", str(count),
         "--seconds", str(seconds)],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=dict(env, PYTHONPATH=REPO),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "worker pool: gevent" in out
    match = re.search(rf"{count} activities of {seconds} s each finished in ([0-9.]+) s", out)
    assert match, out
    # one after the other they would need count * seconds; overlapping on greenlets, a fraction of it
    assert float(match.group(1)) < count * seconds / 2, out
    assert "state=running ready=True live=True" in out
    assert out.rstrip().endswith("worker stopped")
