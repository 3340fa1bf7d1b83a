#!/usr/bin/env bash
# Celery 5.6.3's own integration suite through sync_worker_celery (scripts/celery-suite,
# tests/celery_suite/run.py): three test processes (pytest-xdist), each with its own dev server,
# in-process worker and private redis-server. Fails when fewer of real Celery's passes pass than
# the ratchet FLOOR in run.py, or when a test fails without being refused by name or listed in
# docs/celery.md. About 10 minutes on the shared 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec bash scripts/celery-suite "$@"
