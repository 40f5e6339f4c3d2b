#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The test command (README, .ci/run): install what the build and the tests
# need, build a plain tree (build/) and an ASan+UBSan tree (build-asan/),
# run "meson test" in both; then the unit suite in a ThreadSanitizer tree
# (build-tsan/) and the fuzz suite in a clang libFuzzer tree (build-fuzz/);
# end with one summary line counted from meson's testlog.json:
#   N passed, N failed[, N skipped]
# Exit status: 0 if nothing failed.

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(meson ninja-build pkg-config gcc libfuse3-dev fuse3 liblz4-dev lz4 zlib1g-dev fio
	libcmocka-dev tabix attr libdeflate-dev strace clang libclang-rt-dev python3-lz4 pigz)

install_missing() {
	local p missing=()
	for p in "${PACKAGES[@]}"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
			missing+=("$p")
		fi
	done
	((${#missing[@]})) || return 0
	echo "test.sh: installing ${missing[*]}"
	local sudo=()
	if (($(id -u) != 0)); then
		sudo=(sudo)
	fi
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
}

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

# run NAME DIR MESON-TEST-ARGS...: build and test one tree, add its counts.
run() {
	local name=$1 dir=$2 p f s
	shift 2
	echo "==== $name: meson test -C $dir"
	rm -f "$dir/meson-logs/testlog.json"
	if ! meson compile -C "$dir"; then
		echo "test.sh: $name: build failed"
		FAILED=$((FAILED + 1))
		return
	fi
	meson test -C "$dir" --print-errorlogs "$@" || true
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
	install_missing
	if setup build; then
		run plain build
	else
		echo "test.sh: meson setup build failed"
		FAILED=$((FAILED + 1))
	fi
	# The sanitizer build inflates BGZF with zlib, the plain one with
	# libdeflate: between them CI covers both paths.
	if setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dlibdeflate=disabled; then
		run asan+ubsan build-asan --timeout-multiplier 3
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
