#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# One short libFuzzer run of a harness, as a meson test (-Dfuzz=true):
#   run.sh FUZZER CORPUS SECONDS CRASH-DIR [LIBFUZZER-ARGS...]
# Starts from the committed CORPUS but writes new inputs only to a scratch
# directory (removed at exit), so the corpus is never modified; a crash
# input goes to CRASH-DIR, which is printed. Fixed seed. Fails when the
# fuzzer finds a crash, a leak or a timeout, or executes nothing.

set -euo pipefail

fuzzer=$1 corpus=$2 secs=$3 crashes=$4
shift 4
scratch=$(mktemp -d)
log=$scratch.log
trap 'rm -rf "$scratch" "$log"' EXIT
mkdir -p "$crashes"

rc=0
"$fuzzer" -seed=1 -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
	-artifact_prefix="$crashes/" "$@" "$scratch" "$corpus" >"$log" 2>&1 || rc=$?
tail -n 30 "$log"
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
echo "$(basename "$fuzzer"): ${execs:-0} executions in ${secs}s, exit status $rc"
if ((rc != 0)); then
	echo "crash input(s) in $crashes/:"
	ls -l "$crashes"
	echo "reproduce: $fuzzer $crashes/<file>; keep: cp it to $corpus/crash-<what>"
	exit 1
fi
if [[ -z "$execs" || "$execs" -eq 0 ]]; then
	echo "the fuzzer executed nothing"
	exit 1
fi
