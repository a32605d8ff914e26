#!/usr/bin/env bash
# integration/postgres.sh — a real PostgreSQL for eddy's sink tests (package
# sink/pgsink), from Debian's `postgresql` package: its own data dir, a local port,
# max_prepared_transactions set (two-phase commit), no Docker.
#
# Usage: integration/postgres.sh <command>
#
#   start    initdb a FRESH data dir, start the server in the background, wait until
#            it accepts connections and print its DSN on stdout. If this script's
#            server is already running, just print the DSN.
#   stop     stop the server (pg_ctl stop -m fast); the data dir is kept.
#   crash    stop it at once (pg_ctl stop -m immediate: no checkpoint, as a power
#            cut would) and start it again on the same data dir: WAL recovery runs,
#            prepared transactions must survive (the sink tests' restart test).
#   restart  stop (fast) if running, then start again KEEPING the data dir.
#   purge    stop it at once if running and delete its data dir (a test's own server).
#   status   print "running pid N at DSN" (exit 0) or "stopped" (exit 1).
#   dsn      print the DSN (the superuser "postgres", trust auth on loopback).
#   logs     print the tail of the server log.
#
# The server listens on 127.0.0.1 only (no Unix socket), trusts every loopback
# connection except those of the role eddy_login (password "eddy-login", SCRAM), which
# the tests use to see a refused login. A database "eddy" is created; the DSN names it.
#
# As root (CI, a brand-new machine), initdb and the server run as the `postgres`
# user that Debian's package creates (initdb refuses root); if that user cannot reach
# EDDY_POSTGRES_HOME (a checkout under /root, mode 700), the data dir goes to
# /tmp/eddy-postgres-<port> instead, and `status` says where.
#
# Environment (all optional):
#   EDDY_POSTGRES_HOME          state dir      (default: integration/.postgres)
#   EDDY_POSTGRES_PORT          port           (default: 15432)
#   EDDY_POSTGRES_BIN           bin dir with initdb, pg_ctl, postgres
#                               (default: `pg_config --bindir`, else /usr/lib/postgresql/*/bin)
#   EDDY_POSTGRES_START_TIMEOUT seconds to wait for readiness (default: 60)
#   EDDY_POSTGRES_MAX_PREPARED  max_prepared_transactions (default: 64; 0 is
#                               PostgreSQL's default, where two-phase commit refuses)
set -euo pipefail

readonly HOST=127.0.0.1
readonly DB=eddy
readonly LOGIN_ROLE=eddy_login
readonly LOGIN_PASSWORD=eddy-login

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PHOME=${EDDY_POSTGRES_HOME:-$script_dir/.postgres}
PORT=${EDDY_POSTGRES_PORT:-15432}
START_TIMEOUT=${EDDY_POSTGRES_START_TIMEOUT:-60}
MAX_PREPARED=${EDDY_POSTGRES_MAX_PREPARED:-64}

log() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() {
	printf 'postgres.sh: ERROR: %s\n' "$*" >&2
	exit 1
}

[[ $PORT =~ ^[0-9]+$ ]] && ((PORT > 0 && PORT < 65536)) || die "EDDY_POSTGRES_PORT=$PORT is not a port"

bindir() {
	local d
	if [[ -n ${EDDY_POSTGRES_BIN:-} ]]; then
		[[ -x $EDDY_POSTGRES_BIN/initdb ]] || die "EDDY_POSTGRES_BIN=$EDDY_POSTGRES_BIN has no initdb"
		printf '%s\n' "$EDDY_POSTGRES_BIN"
		return
	fi
	if command -v pg_config >/dev/null 2>&1; then
		d=$(pg_config --bindir 2>/dev/null || true)
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			printf '%s\n' "$d"
			return
		fi
	fi
	# Debian puts the server binaries outside PATH; take the newest version.
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -V -r); do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			printf '%s\n' "$d"
			return
		fi
	done
	die "no PostgreSQL server binaries (initdb, pg_ctl): install Debian's 'postgresql' package, or set EDDY_POSTGRES_BIN"
}

# As root everything runs as the postgres user; otherwise as the caller.
as_pg() {
	if (($(id -u) == 0)); then
		id postgres >/dev/null 2>&1 || die "running as root, and there is no 'postgres' user to run the server as (initdb refuses root): install Debian's 'postgresql' package, or run as another user"
		# From /: the caller's directory (a checkout under /root) may be closed to the
		# postgres user, and initdb and pg_ctl change back to it.
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

# state_dir is where the data dir, log and lock live: EDDY_POSTGRES_HOME, or as root a
# directory under /tmp when the postgres user cannot reach EDDY_POSTGRES_HOME.
state_dir() {
	mkdir -p "$PHOME"
	PHOME=$(cd "$PHOME" && pwd) # absolute: the server runs from /
	if (($(id -u) == 0)) && ! runuser -u postgres -- test -x "$PHOME" 2>/dev/null; then
		printf '/tmp/eddy-postgres-%s\n' "$PORT"
	else
		printf '%s\n' "$PHOME"
	fi
}

STATE=$(state_dir)
DATA=$STATE/data
LOGFILE=$STATE/postgres.log

dsn() { printf 'postgres://postgres@%s:%s/%s?sslmode=disable\n' "$HOST" "$PORT" "$DB"; }

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# running_pid prints the server's pid and succeeds if it runs on this data dir.
running_pid() {
	local pid
	[[ -f $DATA/postmaster.pid ]] || return 1
	pid=$(head -n 1 "$DATA/postmaster.pid")
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	printf '%s\n' "$pid"
}

psql_admin() {
	"$(bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PORT" -U postgres "$@"
}

init_data() {
	local bin
	bin=$(bindir)
	rm -rf "$DATA"
	mkdir -p "$STATE"
	if (($(id -u) == 0)); then
		chown postgres: "$STATE"
		chmod 700 "$STATE"
	fi
	log "initdb $DATA ($bin)"
	as_pg "$bin/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync >"$STATE/initdb.log" 2>&1 ||
		as_pg "$bin/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --locale=C --no-sync >"$STATE/initdb.log" 2>&1 ||
		{
			cat "$STATE/initdb.log" >&2
			die "initdb failed (output above)"
		}
	# fsync off: a test server; a crash of the server process (crash, kill -9) keeps
	# everything in the OS's page cache, which is what the tests exercise. Commits
	# stay synchronous, so a stop -m immediate loses no committed transaction.
	as_pg tee -a "$DATA/postgresql.conf" >/dev/null <<EOF

# integration/postgres.sh
listen_addresses = '$HOST'
port = $PORT
unix_socket_directories = ''
max_connections = 200
max_prepared_transactions = $MAX_PREPARED
fsync = off
full_page_writes = off
shared_buffers = 64MB
log_min_messages = warning
log_line_prefix = '%m [%p] %u@%d '
EOF
	as_pg tee "$DATA/pg_hba.conf" >/dev/null <<EOF
# integration/postgres.sh: the login role with a password (refused-login tests), every
# other loopback connection trusted.
host all $LOGIN_ROLE 127.0.0.1/32 scram-sha-256
host all all 127.0.0.1/32 trust
EOF
}

launch() {
	local bin start=$SECONDS
	bin=$(bindir)
	if port_open "$HOST" "$PORT"; then
		die "port $HOST:$PORT is already in use by another process (not this script's server on $DATA); stop it or set EDDY_POSTGRES_PORT"
	fi
	log "starting PostgreSQL ($bin) on $HOST:$PORT, data $DATA"
	# pg_ctl start -w waits until the server accepts connections; setsid keeps the
	# server out of the caller's terminal signals.
	if ! as_pg setsid "$bin/pg_ctl" start -D "$DATA" -l "$LOGFILE" -w -t "$START_TIMEOUT" -s </dev/null >/dev/null 9>&-; then
		tail -n 30 "$LOGFILE" >&2 || true
		die "PostgreSQL did not start within ${START_TIMEOUT}s (log above, full log in $LOGFILE)"
	fi
	log "PostgreSQL started in $((SECONDS - start)) s (pid $(running_pid))"
}

cmd_start() {
	if running_pid >/dev/null; then
		log "already running (pid $(running_pid)) on $DATA"
		dsn
		return 0
	fi
	init_data
	launch
	psql_admin -d postgres -c "CREATE DATABASE $DB" \
		-c "CREATE ROLE $LOGIN_ROLE LOGIN PASSWORD '$LOGIN_PASSWORD'" \
		-c "GRANT ALL ON DATABASE $DB TO $LOGIN_ROLE" >/dev/null
	dsn
}

stop_server() {
	local mode=$1
	if ! running_pid >/dev/null; then
		log "not running"
		return 0
	fi
	log "stopping (pg_ctl stop -m $mode)"
	as_pg "$(bindir)/pg_ctl" stop -D "$DATA" -m "$mode" -w -t 60 -s
}

cmd_crash() {
	running_pid >/dev/null || die "not running: nothing to crash"
	stop_server immediate
	launch
}

cmd_purge() {
	if running_pid >/dev/null; then
		stop_server immediate
	fi
	rm -rf "$DATA" "$LOGFILE" "$STATE/initdb.log"
	rmdir "$STATE" 2>/dev/null || true
}

cmd_restart() {
	[[ -f $DATA/PG_VERSION ]] || die "no data dir at $DATA: use start"
	stop_server fast
	launch
	dsn
}

cmd_status() {
	local pid
	if pid=$(running_pid); then
		printf 'running pid %s at %s (data %s)\n' "$pid" "$(dsn)" "$DATA"
	else
		printf 'stopped (data %s)\n' "$DATA"
		return 1
	fi
}

cmd_logs() {
	[[ -f $LOGFILE ]] || die "no log yet at $LOGFILE"
	tail -n "${EDDY_POSTGRES_LOG_LINES:-100}" "$LOGFILE"
}

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

# with_lock serialises the commands that change the server's state.
with_lock() {
	mkdir -p "$PHOME"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$PHOME/.lock"
		flock -w 120 9 || die "could not lock $PHOME/.lock within 120 s"
	fi
	"$@"
}

main() {
	local cmd=${1:-}
	[[ $# -gt 0 ]] && shift
	case $cmd in
	start) with_lock cmd_start ;;
	stop) with_lock stop_server fast ;;
	crash) with_lock cmd_crash ;;
	restart) with_lock cmd_restart ;;
	purge) with_lock cmd_purge ;;
	status) cmd_status ;;
	dsn) dsn ;;
	logs) cmd_logs ;;
	*) usage ;;
	esac
}

main "$@"
