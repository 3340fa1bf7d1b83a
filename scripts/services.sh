#!/usr/bin/env bash
# Starts the services the integration tests talk to -- PostgreSQL and Redis -- on loopback
# only, in a scratch folder, and prints `export` lines for the tests to find them:
#   SYNC_WORKER_TEST_PG_DSN     postgresql://postgres@127.0.0.1:55432/postgres
#   SYNC_WORKER_TEST_REDIS_URL  redis://127.0.0.1:56379/0
# Idempotent: a service already answering on its port is reused. Installs the Debian
# packages when they are missing and we are root (CI, a fresh machine); otherwise says why
# a service is unavailable, and the tests that need it say so when they skip.
#
# Use:  eval "$(scripts/services.sh)"
set -uo pipefail
PG_PORT=${SYNC_WORKER_PG_PORT:-55432}
REDIS_PORT=${SYNC_WORKER_REDIS_PORT:-56379}
ROOT=${SYNC_WORKER_SERVICES_DIR:-/tmp/sync-worker-services}
mkdir -p "$ROOT"
log() { echo "services: $*" >&2; }

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$pg_bin" ] || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing ${need_apt[*]}"
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need_apt[@]}") >"$ROOT/apt.log" 2>&1 \
      || log "apt-get failed (see $ROOT/apt.log)"
    pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  else
    log "missing ${need_apt[*]} and not root: those tests will say they do not apply"
  fi
fi

# -- Redis ------------------------------------------------------------------------------------
if command -v redis-server >/dev/null 2>&1; then
  if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
      --daemonize yes --dir "$ROOT" --logfile "$ROOT/redis.log" --pidfile "$ROOT/redis.pid" >/dev/null
    for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && echo "export SYNC_WORKER_TEST_REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0" \
    || log "redis did not start (see $ROOT/redis.log)"
fi

# -- PostgreSQL -------------------------------------------------------------------------------
if [ -n "$pg_bin" ]; then
  data="$ROOT/pg"
  as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
  if ! "$pg_bin/pg_isready" -h 127.0.0.1 -p "$PG_PORT" -q 2>/dev/null; then
    if [ ! -s "$data/PG_VERSION" ]; then
      mkdir -p "$data"; [ "$(id -u)" = 0 ] && chown postgres "$data" "$ROOT"
      as_pg "'$pg_bin/initdb' -D '$data' -U postgres --auth=trust -E UTF8 >'$data.initdb.log' 2>&1" || log "initdb failed"
    fi
    [ "$(id -u)" = 0 ] && chown -R postgres "$data"
    as_pg "'$pg_bin/pg_ctl' -D '$data' -l '$ROOT/pg.log' -w -t 30 -o \"-c listen_addresses=127.0.0.1 -p $PG_PORT -c unix_socket_directories='$ROOT' -c fsync=off -c max_connections=300\" start >/dev/null" \
      || log "postgres did not start (see $ROOT/pg.log)"
  fi
  "$pg_bin/pg_isready" -h 127.0.0.1 -p "$PG_PORT" -q 2>/dev/null \
    && echo "export SYNC_WORKER_TEST_PG_DSN=postgresql://postgres@127.0.0.1:$PG_PORT/postgres"
fi
exit 0
