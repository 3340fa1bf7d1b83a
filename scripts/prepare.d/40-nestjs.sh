#!/usr/bin/env bash
# nestjs-durable interop peers (tests/interop/test_nestjs_*.py, bench/nestjs_steps.py):
#   1. the real engine from npm, pinned by tests/interop/nestjs/package-lock.json (npm ci);
#   2. the published asyncio durable-worker 0.26.1 (the control) in its own venv, /tmp/nestjs-venv,
#      with its redis, postgres, mysql and sqs extras.
# Idempotent; prints the export line the tests read, chatter on stderr.
set -uo pipefail
cd "$(dirname "$0")/../.."
log() { echo "prepare nestjs: $*" >&2; }

if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing nodejs + npm"
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm) >&2 \
      || log "apt-get nodejs npm failed"
  else
    log "npm missing and not root: the nestjs interop tests will say so"
  fi
fi

dir=tests/interop/nestjs
if command -v npm >/dev/null 2>&1; then
  stamp="$dir/node_modules/.package-lock.json"
  if [ ! -d "$dir/node_modules/@dudousxd/nestjs-durable-core" ] || [ "$dir/package-lock.json" -nt "$stamp" ]; then
    log "npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2 || log "npm ci failed"
  fi
fi

venv=${SYNC_WORKER_NESTJS_VENV:-/tmp/nestjs-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import durable_worker, bullmq, asyncpg, aiomysql, boto3" >/dev/null 2>&1; then
  log "creating $venv with durable-worker[redis,postgres,mysql,sqs]==0.26.1"
  python3 -m venv "$venv" >&2 && "$venv/bin/pip" install -q --disable-pip-version-check \
    "durable-worker[redis,postgres,mysql,sqs]==0.26.1" >&2 || log "the control venv could not be made"
fi
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import durable_worker" >/dev/null 2>&1; then
  echo "export SYNC_WORKER_NESTJS_CONTROL_PYTHON=$venv/bin/python"
fi
exit 0
