"""examples/devserver_schedules.py runs end to end: a namespace, schedules fired on the dev
server's clock, a paused cron schedule triggered by hand, a backfill."""

from __future__ import annotations

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_devserver_schedules_example_runs() -> None:
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "devserver_schedules.py")],
                            cwd=REPO, capture_output=True, text=True, timeout=90,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
                                REPO, os.environ.get("PYTHONPATH")]))))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "namespace reports: retention 14 days" in out
    assert "weekday-morning: paused, next_fire_at=None" in out
    assert "trigger while paused: skipped" in out
    assert re.search(r"weekday-morning next fire: \d{4}-\d\d-\d\dT0[56]:30:00\.000000Z", out)  # 07:30 Paris
    assert "manual trigger: triggered -> {'region': 'paris', 'report': 'paris is fine'}" in out
    assert "backfill of a week: 5 fires" in out  # Monday to Friday
    assert ("every-second audit: ScheduleCreated, ScheduleTriggered, ScheduleTriggered, ScheduleTriggered, "
            "ScheduleDeleted") in out
    assert len(re.findall(r"run \d at .*Z: \{'region': 'eu-west', 'report': 'eu-west is fine'\}", out)) == 3
