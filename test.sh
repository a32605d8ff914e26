#!/usr/bin/env bash
# test.sh — run eddy's whole test suite: every package's tests with the race
# detector, the integration tests against both the embedded broker and a real
# single-node Apache Kafka 4.1 (started from Maven Central jars by
# integration/kafka.sh, needs Java 17+ and Maven), and the PostgreSQL sink tests
# against a real PostgreSQL (integration/postgres.sh, Debian's postgresql package).
#
#   ./test.sh                         # cross-builds (darwin, windows), fuzzes briefly (3 s a target), then go test -race -timeout 45m ./...
#   ./test.sh -run TestFencing ./kafkatest/   # other go test arguments
#
# The broker listens on 127.0.0.1:19092 (EDDY_KAFKA_PORT to change). A broker
# this script starts is stopped on exit; one that was already running (from
# integration/kafka.sh start) is used and left running. If the broker cannot
# start, the script fails: it never falls back to the embedded broker alone.
# PostgreSQL listens on 127.0.0.1:15432 (EDDY_POSTGRES_PORT), started and stopped the
# same way; its DSN goes to the tests as EDDY_TEST_POSTGRES.
# The exit status is go test's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

t0=$SECONDS
step() { printf '== test.sh [%3ds] %s\n' $((SECONDS - t0)) "$*" >&2; }

step "go mod download"
go mod download

kafka=integration/kafka.sh
pg=integration/postgres.sh
# What this script started, it stops on exit.
started=()
cleanup() {
	local s
	for s in "${started[@]}"; do
		step "stopping $s"
		case $s in
		Kafka) $kafka stop || true ;;
		PostgreSQL) $pg stop || true ;;
		esac
	done
}
trap cleanup EXIT
# The broker also gets a SASL_SSL listener (SCRAM, StandardAuthorizer; the PLAINTEXT one
# stays) for TestSecuredKafka.
export EDDY_KAFKA_SECURE=${EDDY_KAFKA_SECURE:-1}
# The test brokers' JIT stops at C1 (every broker kafka.sh starts from here: this one, and
# the ones integration/eos starts of its own). The suite is CPU-bound on a 2-core machine
# and a broker spends much of its CPU compiling with C2 in its first minutes, which a
# test's broker never outlives: TestShortModePostgres (-race, one seed) took 213 CPU-s of
# the machine with Kafka's flags (two runs) and 177 with C1 only; eight of the root
# package's tests on a fresh broker (2 minutes), 115 and 125 against 95 and 101. Benchmarks
# run brokers with Kafka's own flags (kafka.sh's default).
export EDDY_KAFKA_JVM_OPTS=${EDDY_KAFKA_JVM_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:TieredStopAtLevel=1}
if $kafka status >/dev/null 2>&1; then
	step "using the Kafka broker that is already running ($($kafka status))"
	addr=$($kafka addr)
else
	step "starting Kafka ($kafka start)"
	if ! addr=$($kafka start); then
		echo "test.sh: FAILED: the real Kafka broker did not start (see the messages above and '$kafka logs')." >&2
		echo "test.sh: the integration tests need it; not running the tests against the embedded broker alone." >&2
		exit 1
	fi
	started+=(Kafka)
fi

if $pg status >/dev/null 2>&1; then
	step "using the PostgreSQL that is already running ($($pg status))"
	pgdsn=$($pg dsn)
else
	step "starting PostgreSQL ($pg start)"
	if ! pgdsn=$($pg start); then
		echo "test.sh: FAILED: PostgreSQL did not start (see the messages above and '$pg logs'); the sink tests need it." >&2
		exit 1
	fi
	started+=(PostgreSQL)
fi
export EDDY_TEST_POSTGRES=$pgdsn

# The secured listener's client settings go to the tests under EDDY_TEST_SECURE_*, not
# under the EDDY_TLS_* / EDDY_SASL_* names the CLI and the examples read: their own tests
# run against plaintext brokers.
if secure_env=$($kafka secure-env 2>/dev/null); then
	while IFS='=' read -r name value; do
		[[ $name == EDDY_* ]] && export "EDDY_TEST_SECURE_${name#EDDY_}=$value"
	done < <(grep -v '^export ' <<<"$secure_env")
	step "secured listener: $EDDY_TEST_SECURE_SECURE_BROKERS"
else
	step "no secured listener on this broker: TestSecuredKafka will fail (start it with EDDY_KAFKA_SECURE=1)"
fi

if (($# == 0)); then
	set -- ./...
	# eddy is a library: it must build wherever Go does (the integration harnesses are
	# Linux/Unix-only and say so with build tags). The cross builds run beside the fuzz
	# targets below: fuzz.sh runs one worker (-parallel 1), so one of the CI machine's two
	# cores was idle while it fuzzed, and the builds (about 2 minutes in a new checkout:
	# the module compiles afresh for each GOOS) had the machine to themselves before.
	crosslog=$(mktemp)
	step "GOOS=darwin and GOOS=windows go build ./... (in the background, beside the fuzzing)"
	(
		for goos in darwin windows; do
			GOOS=$goos go build ./... || {
				echo "GOOS=$goos go build ./... failed" >&2
				exit 1
			}
		done
	) >"$crosslog" 2>&1 &
	crosspid=$!
	# Every fuzz target briefly (FUZZTIME each, 3 s here; fuzz.sh's own default is 5 s);
	# the seed corpora also run in go test below. A failure leaves the input under the
	# package's testdata/fuzz/. 3 s: the suite ran 1,859 s in the last CI run against a
	# 30-minute budget, and 20 targets at 5 s took 173 s of it, each target's build and
	# start-up about 2-3 s of that. Longer fuzzing is its own command: FUZZTIME=3m
	# integration/fuzz.sh (README).
	export FUZZTIME=${FUZZTIME:-3s}
	step "integration/fuzz.sh (every fuzz target, $FUZZTIME each)"
	fuzzstatus=0
	integration/fuzz.sh || fuzzstatus=$?
	crossstatus=0
	wait "$crosspid" || crossstatus=$?
	step "cross builds done (exit $crossstatus)"
	if ((crossstatus != 0)); then
		cat "$crosslog" >&2
		echo "test.sh: FAILED: the module does not build for every GOOS (above)." >&2
		exit 1
	fi
	rm -f "$crosslog"
	if ((fuzzstatus != 0)); then
		exit "$fuzzstatus"
	fi
fi
# The root package is the longest (1153 s and 1271 s on the fresh-clone runs of
# 2026-12-04, two thirds of 30 m): a slower machine must not turn its length into a
# panic, so each package gets 45 m; CI's whole run stays far under its 90.
step "EDDY_TEST_BROKERS=$addr EDDY_TEST_POSTGRES=$pgdsn go test -race -timeout 45m $*"
set +e
EDDY_TEST_BROKERS=$addr go test -race -timeout 45m "$@"
status=$?
set -e
if ((status != 0)); then
	step "go test failed (exit $status); broker warnings and errors, last 20:"
	grep -E '^\[[^]]*\] (WARN|ERROR) ' "${EDDY_KAFKA_HOME:-integration/.kafka}/logs/server.log" 2>/dev/null | tail -n 20 >&2 || true
fi
step "go test done (exit $status)"
exit $status
