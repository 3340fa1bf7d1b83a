#!/usr/bin/env bash
# The memory admission gate in a real memory-limited cgroup (tests/cgroup): real `sync-worker run`
# processes allocating 16 x 200 MB inside a 700 MB cgroup, threads and gevent, about a minute.
# Needs root and a cgroup memory controller (v1 or v2); the tests say why when there is none.
set -euo pipefail
cd "$(dirname "$0")/../.."
SYNC_WORKER_CGROUP_LEG=1 python3 -m pytest -q -p no:cacheprovider tests/cgroup "$@"
