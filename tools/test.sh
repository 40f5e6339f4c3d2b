#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The test command (README, .ci/run): install what the build and the tests
# need (tools/deps.sh --test), build a plain tree (build/), run the lint
# suite there (shellcheck, the bfs_ prefix of blockfs-core's globals),
# then "meson test" there and in an ASan+UBSan tree (build-asan/); then the
# unit suite in a ThreadSanitizer tree (build-tsan/) and the fuzz suite in
# a clang libFuzzer tree (build-fuzz/); end with one summary line counted
# from meson's testlog.json, lint included:
#   N passed, N failed[, N skipped]
# Exit status: 0 if nothing failed.

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# setup DIR MESON-OPTIONS...: configure DIR, or set the options on an
# existing DIR (ninja re-runs meson itself when meson.build changes).
setup() {
	local dir=$1
	shift
	if [[ -f "$dir/build.ninja" ]]; then
		if (($#)); then
			meson configure "$dir" "$@" >/dev/null
		fi
	elif [[ -d "$dir/meson-private" ]]; then
		meson setup --wipe "$dir" "$@"
	else
		meson setup "$dir" "$@"
	fi
}

# count LOG: print "passed failed skipped" from a meson testlog.json.
count() {
	python3 - "$1" <<'PY'
import json, sys
passed = failed = skipped = 0
with open(sys.argv[1]) as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:  # FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS, anything unknown
            failed += 1
print(passed, failed, skipped)
PY
}

PASSED=0
FAILED=0
SKIPPED=0

# Seconds each stage's "meson test" may take before it is stopped and
# counted as a failure, so that the run still ends with its summary: a
# daemon the kernel holds forever (and with it every later sync) would
# otherwise hold the whole run until CI's own limit, which prints nothing.
# On a 2-vCPU machine the stages' tests took 0.2, 5.1, 6.0, 0.6 and 0.8
# minutes (the log of tools/test.sh at 8533547, its tests' durations summed).
declare -A BUDGET=([lint]=300 [plain]=1200 [asan+ubsan]=2100 [tsan]=600 [fuzz]=600)

# run NAME DIR MESON-TEST-ARGS...: build and test one tree, add its counts.
run() {
	local name=$1 dir=$2 p f s rc
	shift 2
	echo "==== $name: meson test -C $dir"
	rm -f "$dir/meson-logs/testlog.json"
	if ! meson compile -C "$dir"; then
		echo "test.sh: $name: build failed"
		FAILED=$((FAILED + 1))
		return
	fi
	rc=0
	timeout -k 30 "${BUDGET[$name]}" meson test -C "$dir" --print-errorlogs "$@" || rc=$?
	if ((rc == 124 || rc == 137)); then
		echo "test.sh: $name: meson test did not end within ${BUDGET[$name]} s; stopped"
		FAILED=$((FAILED + 1))
	fi
	if [[ ! -s "$dir/meson-logs/testlog.json" ]]; then
		echo "test.sh: $name: meson test wrote no testlog.json"
		FAILED=$((FAILED + 1))
		return
	fi
	read -r p f s < <(count "$dir/meson-logs/testlog.json")
	echo "==== $name: $p passed, $f failed, $s skipped"
	PASSED=$((PASSED + p))
	FAILED=$((FAILED + f))
	SKIPPED=$((SKIPPED + s))
}

main() {
	tools/deps.sh --test
	if setup build; then
		# Lint first, and once: the other trees would only repeat it.
		run lint build --suite lint
		run plain build --no-suite lint
	else
		echo "test.sh: meson setup build failed"
		FAILED=$((FAILED + 1))
	fi
	# The sanitizer build inflates BGZF with zlib, the plain one with
	# libdeflate: between them CI covers both paths.
	if setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dlibdeflate=disabled; then
		run asan+ubsan build-asan --no-suite lint --timeout-multiplier 3
	else
		echo "test.sh: meson setup build-asan failed"
		FAILED=$((FAILED + 1))
	fi
	# ThreadSanitizer on the unit suite: the threaded parts (cache,
	# read-ahead, mappings) are exercised there without FUSE's threads.
	if setup build-tsan -Db_sanitize=thread; then
		run tsan build-tsan --suite unit --timeout-multiplier 3
	else
		echo "test.sh: meson setup build-tsan failed"
		FAILED=$((FAILED + 1))
	fi
	# clang + libFuzzer (-Dfuzz=true): replay every fuzz corpus, then fuzz
	# each target for 5 s. The long runs are tools/fuzz.sh.
	if CC=clang setup build-fuzz -Dfuzz=true; then
		run fuzz build-fuzz --suite fuzz
	else
		echo "test.sh: meson setup build-fuzz failed"
		FAILED=$((FAILED + 1))
	fi
	if ((SKIPPED > 0)); then
		echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
	else
		echo "$PASSED passed, $FAILED failed"
	fi
	((FAILED == 0))
}

main "$@"
