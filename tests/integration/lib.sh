# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2034
#
# Helpers for tests/integration/mount.sh: TAP-style check counting, and
# starting, waiting for and stopping a foreground blockfs daemon.  Sourced,
# never run.  Everything that touches the mount runs under a timeout, so a
# hung daemon fails the check instead of hanging the suite.

T_PASS=0
T_FAIL=0
T_FAILED_NAMES=()
OP_TIMEOUT=${OP_TIMEOUT:-30}

# Daemon state, set by bfs_mount: pid, mountpoint, log file.
BFS_PID=
BFS_MNT=
BFS_LOG=
BFS_EXIT=

ok() {
	T_PASS=$((T_PASS + 1))
	printf 'ok %d - %s\n' "$((T_PASS + T_FAIL))" "$1"
}

not_ok() {
	T_FAIL=$((T_FAIL + 1))
	T_FAILED_NAMES+=("$1")
	printf 'not ok %d - %s\n' "$((T_PASS + T_FAIL))" "$1"
	shift
	local line
	for line in "$@"; do
		printf '%s\n' "$line" | sed 's/^/#   /'
	done
}

diag() {
	printf '%s\n' "$*" | sed 's/^/# /'
}

# skip WHY...: the whole test is skipped (TAP plan 1..0, meson's exit 77).
skip() {
	printf '1..0 # SKIP %s\n' "$*"
	exit 77
}

# bfs_require TOOL...: root, /dev/fuse and every TOOL, or skip the test.
bfs_require() {
	local tool
	[[ $(id -u) == 0 ]] || skip "needs root"
	[[ -c /dev/fuse ]] || skip "no /dev/fuse"
	for tool in "$@"; do
		command -v "$tool" >/dev/null 2>&1 || skip "no $tool"
	done
}

# t CMD...: run under the operation timeout.
t() {
	timeout -k 5 "$OP_TIMEOUT" "$@"
}

# check NAME CMD...: ok if CMD succeeds; on failure show its output.
check() {
	local name=$1 out
	shift
	if out=$(t "$@" 2>&1); then
		ok "$name"
	else
		not_ok "$name" "command: $*" "exit $?, output:" "${out:0:2000}"
	fi
}

# is NAME CMD...: like check, but CMD runs in this shell (functions, eval),
# without the timeout.
is() {
	local name=$1
	shift
	if "$@"; then
		ok "$name"
	else
		not_ok "$name" "command: $*"
	fi
}

# check_eq NAME EXPECTED GOT
check_eq() {
	if [[ "$2" == "$3" ]]; then
		ok "$1"
	else
		not_ok "$1" "expected: $2" "got:      $3"
	fi
}

# check_fails NAME MESSAGE CMD...: CMD must fail and print MESSAGE.
check_fails() {
	local name=$1 msg=$2 out rc=0
	shift 2
	out=$(t "$@" 2>&1) || rc=$?
	if ((rc != 0)) && [[ "$out" == *"$msg"* ]]; then
		ok "$name"
	else
		not_ok "$name" "command: $*" "expected: failure with \"$msg\"" \
			"got: exit $rc, output: ${out:0:1000}"
	fi
}

# tap_import CMD...: run a command that prints TAP lines; re-number and count.
tap_import() {
	local line out rc=0
	out=$("$@" 2>&1) || rc=$?
	while IFS= read -r line; do
		case $line in
		"ok - "*) ok "${line#ok - }" ;;
		"not ok - "*) not_ok "${line#not ok - }" ;;
		*) printf '%s\n' "$line" ;;
		esac
	done <<<"$out"
	if ((rc != 0)); then
		not_ok "$* exited $rc"
	fi
}

# bfs_sanitized BIN: BIN carries ASan's or TSan's runtime, whose shadow
# memory and allocator void RSS and mapping bounds. By symbol, not ldd:
# clang links the runtime in statically.
bfs_sanitized() {
	grep -qa -e __asan_init -e __tsan_init "$1"
}

# is_mounted DIR: without a request to the daemon (which may be hung), so
# from /proc/mounts, where space, tab, newline and backslash are \ooo.
is_mounted() {
	local m
	m=$(realpath -e "$1" 2>/dev/null) || m=$1
	m=${m//\\/\\134} m=${m// /\\040} m=${m//$'\t'/\\011} m=${m//$'\n'/\\012}
	M=$m awk '$2 == ENVIRON["M"] { found = 1 } END { exit !found }' /proc/mounts
}

daemon_alive() {
	[[ -n "$BFS_PID" ]] && kill -0 "$BFS_PID" 2>/dev/null
}

show_log() {
	if [[ -n "$BFS_LOG" && -s "$BFS_LOG" ]]; then
		diag "---- daemon log $BFS_LOG (last 60 lines) ----"
		tail -n 60 "$BFS_LOG" | sed 's/^/#   /'
	fi
}

# bfs_mount SRC MNT LOG OPTIONS: start "$BLOCKFS -f" in the background and
# wait up to 30 s for the mount.  Returns 1 if the daemon died (its exit
# status in BFS_EXIT) or the deadline passed (BFS_EXIT empty).
bfs_mount() {
	local src=$1 mnt=$2 log=$3 opts=$4 deadline
	BFS_MNT=$mnt
	BFS_LOG=$log
	BFS_EXIT=
	# shellcheck disable=SC2086 # command line prefixes: BFS_WRAP (e.g. prlimit ... --), VALGRIND
	${BFS_WRAP:-} ${VALGRIND:-} "$BLOCKFS" -f "$src" "$mnt" -o "$opts" >"$log" 2>&1 &
	BFS_PID=$!
	deadline=$((SECONDS + 30))
	while ! is_mounted "$mnt"; do
		if ! daemon_alive; then
			# shellcheck disable=SC2034 # read by mount.sh
			BFS_EXIT=0
			wait "$BFS_PID" 2>/dev/null || BFS_EXIT=$?
			BFS_PID=
			return 1
		fi
		if ((SECONDS >= deadline)); then
			diag "no mount after 30 s"
			return 1
		fi
		sleep 0.1
	done
	return 0
}

# bfs_umount: fusermount3 -u, then wait up to 30 s for the daemon and
# return its exit status (124 if it did not exit).
bfs_umount() {
	local deadline rc
	[[ -n "$BFS_PID" ]] || return 1
	if ! fusermount3 -u "$BFS_MNT" 2>&1; then
		diag "fusermount3 -u failed; trying lazy unmount"
		fusermount3 -uz "$BFS_MNT" 2>&1 || true
	fi
	deadline=$((SECONDS + 30))
	while daemon_alive && [[ "$(ps -o stat= -p "$BFS_PID" 2>/dev/null)" != Z* ]]; do
		if ((SECONDS >= deadline)); then
			diag "daemon still running 30 s after unmount"
			return 124
		fi
		sleep 0.1
	done
	rc=0
	wait "$BFS_PID" || rc=$?
	BFS_PID=
	return "$rc"
}

# bfs_kill: the EXIT-trap path; never fails.
bfs_kill() {
	if [[ -n "$BFS_MNT" ]] && is_mounted "$BFS_MNT"; then
		fusermount3 -uz "$BFS_MNT" >/dev/null 2>&1 || true
	fi
	if daemon_alive; then
		kill "$BFS_PID" 2>/dev/null || true
		sleep 0.2
		kill -9 "$BFS_PID" 2>/dev/null || true
		wait "$BFS_PID" 2>/dev/null || true
	fi
	BFS_PID=
}
