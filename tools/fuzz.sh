#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The long fuzzing run (tests/README.md, "Fuzzing"): build the libFuzzer harnesses
# of tests/fuzz with clang into build-fuzz/ (-Dfuzz=true: ASan + UBSan)
# and fuzz each target for SECONDS, starting from its committed corpus.
#
#   tools/fuzz.sh [TARGET|all] [SECONDS]      default: all, 180 s per target
#   FUZZ_JOBS=N tools/fuzz.sh ...             parallel fuzzers per target
#                                             (default: online CPUs)
#
# New interesting inputs go to build-fuzz/fuzz-work/TARGET/new/ (scratch:
# the committed corpus is never written), crash inputs and the logs to
# build-fuzz/fuzz-work/TARGET/, printed at the end with the executions of
# each target. Exit status: 0 when no target crashed.
#
# A crash: reproduce with   build-fuzz/tests/fuzz/fuzz_TARGET CRASH-FILE
# fix it, then keep it as a regression input that every build replays:
#   cp CRASH-FILE tests/fuzz/corpus/TARGET/crash-<what-it-was>
# and commit it with the fix.

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

TARGETS=(lz4 lz4_linked bgzf gzi seektable block hints opts gzip zstd xz bzip2)
target=${1:-all}
secs=${2:-180}
jobs=${FUZZ_JOBS:-$(nproc)}
B=build-fuzz

if [[ $target != all && " ${TARGETS[*]} " != *" $target "* ]]; then
	echo "fuzz.sh: unknown target '$target'; targets: all ${TARGETS[*]}" >&2
	exit 2
fi

# libFuzzer is part of clang's runtime (libclang-rt-dev on Debian 12).
tools/deps.sh --fuzz

if [[ -f $B/build.ninja ]]; then
	meson configure "$B" -Dfuzz=true >/dev/null
else
	CC=clang meson setup "$B" -Dfuzz=true
fi
ninja -C "$B" >/dev/null

[[ $target == all ]] || TARGETS=("$target")
summary=()
crashed=0
for t in "${TARGETS[@]}"; do
	w=$B/fuzz-work/$t
	rm -rf "$w"
	mkdir -p "$w/new"
	extra=()
	[[ $t == opts ]] && extra=(-close_fd_mask=2)	# blockfs explains every refusal on stderr
	echo "==== $t: $secs s, $jobs job(s); work dir $w"
	rc=0
	# -jobs: parallel fuzzers sharing new/; each writes $w/fuzz-N.log.
	(cd "$w" && "$OLDPWD/$B/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 \
		-print_final_stats=1 -jobs="$jobs" -workers="$jobs" -artifact_prefix=./ "${extra[@]}" \
		new "$OLDPWD/tests/fuzz/corpus/$t" >"run.log" 2>&1) || rc=$?
	execs=$(cat "$w"/fuzz-*.log 2>/dev/null | sed -n 's/^stat::number_of_executed_units: *//p' |
		awk '{ s += $1 } END { print s + 0 }')
	crashes=$(find "$w" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o \
		-name 'timeout-*' -o -name 'oom-*' \) | sort)
	line="$t: $execs executions in ${secs}s x $jobs job(s), $(find "$w/new" -type f | wc -l) new inputs"
	if [[ -n $crashes ]]; then
		crashed=1
		line+=", CRASHES:"$'\n'"$crashes"
	elif ((rc != 0)); then
		crashed=1
		line+=", fuzzer exit status $rc (see $w/fuzz-*.log)"
	fi
	echo "$line"
	summary+=("$line")
done

echo "==== summary"
printf '%s\n' "${summary[@]}"
if ((crashed)); then
	echo "Reproduce: $B/tests/fuzz/fuzz_TARGET CRASH; after the fix keep it:"
	echo "  cp CRASH tests/fuzz/corpus/TARGET/crash-<what-it-was>"
	exit 1
fi
