#!/usr/bin/env bash
# fuzz.sh — run every go test fuzz target of the module (func FuzzXxx in a _test.go
# file) for a while each. go test -fuzz takes one target per invocation, so this finds
# them and runs them one by one.
#
#   integration/fuzz.sh                    # each target for FUZZTIME (default 5s): CI
#   FUZZTIME=3m integration/fuzz.sh        # a longer session
#   integration/fuzz.sh FuzzJSON FuzzCheckpoint   # only these targets
#
# Each target runs with -parallel ${FUZZ_PARALLEL:-1} workers (the CI machine has two
# cores, shared). A failure leaves the minimised input under the package's
# testdata/fuzz/<target>/; commit it with the fix, as a regression seed. The seed
# corpora there also run in every plain `go test`. At the end a table gives each
# target's executions and new interesting inputs; the exit status is 1 if any failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fuzztime=${FUZZTIME:-5s}
parallel=${FUZZ_PARALLEL:-1}

# package dir, target name — one per line.
targets=$(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(' . |
	grep -v '^./integration/\.' | sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+)\($#\1 \2#' | sort)
if (($# > 0)); then
	want=" $* "
	targets=$(while read -r dir name; do if [[ $want == *" $name "* ]]; then echo "$dir $name"; fi; done <<<"$targets")
fi
if [[ -z $targets ]]; then
	echo "fuzz.sh: no fuzz targets found${1:+ named $*}" >&2
	exit 1
fi

t0=$SECONDS
failed=()
summary=()
while read -r dir name; do
	log=$(mktemp)
	printf '== fuzz.sh [%3ds] %s %s for %s\n' $((SECONDS - t0)) "$dir" "$name" "$fuzztime" >&2
	# -fuzzminimizetime bounds the minimisation of each new interesting input, which
	# for inputs of some KB (a bbolt file) otherwise takes most of a short run.
	# A failure the fuzzer found writes its input ("Failing input written to ..."). The
	# fuzzing engine itself can also end a short run with "context deadline exceeded"
	# and no input (a slow target whose worker is mid-call when -fuzztime runs out:
	# seen with FuzzCheckpoint, 900 execs in 5 s, under load): that is retried once,
	# and reported, not counted as a failure, if it happens again.
	status=""
	for try in 1 2; do
		if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 5s -parallel "$parallel" "$dir" </dev/null >"$log" 2>&1; then
			status=ok
			break
		fi
		if grep -q 'Failing input written to' "$log"; then
			status=FAILED
			break
		fi
		printf 'fuzz.sh: %s %s ended without a failing input (try %d):\n' "$dir" "$name" "$try" >&2
		grep -v '^fuzz: elapsed' "$log" | head -n 10 >&2
		status=ENGINE
	done
	if [[ $status == FAILED ]]; then
		failed+=("$dir $name")
		grep -v '^fuzz: elapsed' "$log" | head -n 60 >&2
	fi
	last=$(grep '^fuzz: elapsed' "$log" | tail -n 1 || true)
	execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
	fresh=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
	summary+=("$(printf '%-7s %-32s %-14s execs %-10s new interesting %s' "$status" "$name" "$dir" "${execs:-?}" "${fresh:-?}")")
	rm -f "$log"
done <<<"$targets"

printf '== fuzz.sh [%3ds] done\n' $((SECONDS - t0)) >&2
printf '%s\n' "${summary[@]}"
if ((${#failed[@]} > 0)); then
	printf 'fuzz.sh: FAILED: %s\n' "${failed[@]}" >&2
	exit 1
fi
