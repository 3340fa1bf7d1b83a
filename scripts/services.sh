#!/usr/bin/env bash
# Starts the services the integration tests talk to -- PostgreSQL and Redis, and MariaDB when it
# is installed (scripts/prepare.d/41-mariadb.sh installs it) -- on loopback only, in a scratch
# folder, and prints `export` lines for the tests to find them:
#   SYNC_WORKER_TEST_PG_DSN     postgresql://postgres@127.0.0.1:55432/postgres
#   SYNC_WORKER_TEST_REDIS_URL  redis://127.0.0.1:56379/0
#   SYNC_WORKER_TEST_MYSQL_URL  mysql://sw@127.0.0.1:53306/sw_nestjs
# Idempotent: a service already answering on its port is reused. Installs the Debian
# packages when they are missing and we are root (CI, a fresh machine); otherwise says why
# a service is unavailable, and the tests that need it say so when they skip.
#
# Use:  eval "$(scripts/services.sh)"
set -uo pipefail
PG_PORT=${SYNC_WORKER_PG_PORT:-55432}
REDIS_PORT=${SYNC_WORKER_REDIS_PORT:-56379}
MYSQL_PORT=${SYNC_WORKER_MYSQL_PORT:-53306}
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
# -- MariaDB (the nestjs MySQL transport's tests) ----------------------------------------------
if command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; then
  mdb=$(command -v mariadbd || echo /usr/sbin/mariadbd)
  mdata="$ROOT/mariadb"
  msock="$mdata/mariadb.sock"  # inside the data folder: the server runs as mysql
  mping() { mariadb-admin --no-defaults --protocol=tcp -h 127.0.0.1 -P "$MYSQL_PORT" -u sw ping >/dev/null 2>&1; }
  if ! mping; then
    if [ ! -d "$mdata/mysql" ]; then
      mkdir -p "$mdata"; [ "$(id -u)" = 0 ] && chown mysql "$mdata"
      mariadb-install-db --no-defaults --datadir="$mdata" --auth-root-authentication-method=socket \
        $( [ "$(id -u)" = 0 ] && echo --user=mysql ) >"$ROOT/mariadb.install.log" 2>&1 || log "mariadb-install-db failed"
    fi
    [ "$(id -u)" = 0 ] && chown -R mysql "$mdata"
    "$mdb" --no-defaults --datadir="$mdata" --bind-address=127.0.0.1 --port="$MYSQL_PORT" --socket="$msock" \
      --pid-file="$mdata/mariadb.pid" --log-error="$mdata/mariadb.log" --skip-log-bin --innodb-flush-log-at-trx-commit=0 \
      --max-connections=300 $( [ "$(id -u)" = 0 ] && echo --user=mysql ) >/dev/null 2>&1 &
    # crash recovery on a busy machine can take tens of seconds: wait up to 90 s for the socket
    for _ in $(seq 900); do [ -S "$msock" ] && break; sleep 0.1; done
    # a password-less test user reachable over loopback TCP (root only logs in on the socket)
    mariadb --no-defaults --socket="$msock" -u root -e "CREATE USER IF NOT EXISTS 'sw'@'127.0.0.1'; \
      GRANT ALL ON *.* TO 'sw'@'127.0.0.1'; CREATE DATABASE IF NOT EXISTS sw_nestjs" >/dev/null 2>&1 \
      || log "mariadb did not start (see $mdata/mariadb.log)"
  fi
  mping && echo "export SYNC_WORKER_TEST_MYSQL_URL=mysql://sw@127.0.0.1:$MYSQL_PORT/sw_nestjs"
fi
exit 0
