# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2034 # T, BFS_EXIT and others are read by the scripts
#
# The helpers every tests/integration/*.sh sources (never runs): a test is
#
#	bfs_begin NAME TOOL...		# skip (77) or: state dir $T, EXIT trap
#	... checks: check, checkf, is, check_eq, check_fails, ok, not_ok,
#	    tap_import
#	bfs_end				# the TAP plan and summary; the exit status
#
# plus starting, waiting for and stopping a foreground blockfs daemon
# (bfs_mount, bfs_umount). Output is TAP: "ok N - name" per check. Every
# command that touches a mount runs under a timeout (check, check_fails,
# t), so a hung daemon fails the check instead of hanging the suite.
# tests/README.md shows a whole script and when to use which check.

T_PASS=0
T_FAIL=0
T_FAILED_NAMES=()
OP_TIMEOUT=${OP_TIMEOUT:-30}

# Daemon state, set by bfs_mount: pid, mountpoint, log file.
BFS_PID=
BFS_MNT=
BFS_CONN=
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
	[[ $(id -u) == 0 ]] || skip "needs root"
	[[ -c /dev/fuse ]] || skip "no /dev/fuse"
	bfs_require_tools "$@"
}

# bfs_require_tools TOOL...: every TOOL on the PATH, or skip the test.
bfs_require_tools() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null 2>&1 || skip "no $tool"
	done
}

# ---- begin and end -------------------------------------------------------

T=			# the test's state directory (bfs_begin)
BFS_NAME=
BFS_START=$SECONDS
BFS_ENDED=
BFS_AT_EXIT=()

# bfs_begin [--no-fuse] NAME [TOOL...]: the first step of a test. Skips it
# (exit 77) unless it runs as root with /dev/fuse, fusermount3 and every
# TOOL (--no-fuse: the TOOLs only, for a test that mounts nothing); makes
# the state directory $T (${TMPDIR:-/tmp}/blockfs-NAME.XXXXXX), with the
# daemons' default index cache in it (XDG_CACHE_HOME), and sets the EXIT
# trap (bfs_cleanup) that unmounts, stops the daemon and removes $T
# however the script ends; INT and TERM end it through that trap too.
bfs_begin() {
	local fuse=1
	if [[ ${1:-} == --no-fuse ]]; then
		fuse=0
		shift
	fi
	BFS_NAME=${1:?usage: bfs_begin [--no-fuse] NAME [TOOL...]}
	shift
	if ((fuse)); then
		bfs_require fusermount3 "$@"
	else
		bfs_require_tools "$@"
	fi
	T=$(mktemp -d "${TMPDIR:-/tmp}/blockfs-$BFS_NAME.XXXXXX") ||
		{ echo "Bail out! cannot make a state directory"; exit 1; }
	# Daemons at default options keep indexes in $XDG_CACHE_HOME/blockfs:
	# each test its own, so that no run sees another's entries.
	export XDG_CACHE_HOME=$T/xdg-cache
	BFS_START=$SECONDS
	trap bfs_cleanup EXIT
	trap 'exit 130' INT TERM
}

# bfs_at_exit CMD [ARG...]: one more thing for the EXIT trap to undo (a
# mount the trap does not know of, processes the test started): CMD ARG...
# as given now, run before the daemon is stopped and $T removed; the last
# added runs first.
bfs_at_exit() {
	BFS_AT_EXIT+=("$(printf '%q ' "$@")")
}

# bfs_lazy_umount DIR: if something is mounted on DIR, detach it, lazily
# (a hung daemon cannot block that).
bfs_lazy_umount() {
	is_mounted "$1" || return 0
	fusermount3 -uz "$1" >/dev/null 2>&1 || umount -l "$1"
}

# bfs_cleanup: the EXIT trap of bfs_begin; keeps the script's exit status
# (1 if a check failed but the script exited 0 before bfs_end). A script
# that stops early (exit 1 after a failed mount) still gets its TAP plan.
# BFS_KEEP=1 keeps $T for a post-mortem.
# shellcheck disable=SC2317 # invoked by the EXIT trap
bfs_cleanup() {
	local rc=$? i
	if [[ -z $BFS_ENDED && $rc != 77 ]] && ! bfs_end && ((rc == 0)); then
		rc=1
	fi
	for ((i = ${#BFS_AT_EXIT[@]} - 1; i >= 0; i--)); do
		eval "${BFS_AT_EXIT[i]}" || true
	done
	bfs_kill
	if [[ -n $T && -d $T ]]; then
		if [[ ${BFS_KEEP:-0} != 0 ]]; then
			diag "state kept in $T"
		else
			rm -rf --one-file-system "$T"
		fi
	fi
	exit "$rc"
}

# bfs_end: the last line of a test. Prints the TAP plan (1..N) and a
# summary: how many checks passed and failed, the failed ones' names and,
# if any failed, the end of the daemon's log. Returns 0 if none failed.
bfs_end() {
	BFS_ENDED=1
	echo "1..$((T_PASS + T_FAIL))"
	diag "${BFS_NAME:-$0}: $T_PASS passed, $T_FAIL failed in $((SECONDS - BFS_START)) s"
	((T_FAIL == 0)) && return 0
	diag "failed:"
	printf '#   %s\n' "${T_FAILED_NAMES[@]}"
	show_log
	return 1
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

# checkf NAME FUNCTION...: like check, for shell functions (no timeout(1));
# on failure shows what FUNCTION printed. It runs in a subshell: for a
# function that must set variables here, use is.
checkf() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		ok "$name"
	else
		not_ok "$name" "function: $*" "output:" "${out:0:2000}"
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

# tap_import CMD...: run a command that prints TAP lines ("ok - name" or
# "ok N - name", as the Python helpers and lib.sh's ok print them);
# re-number and count them here.
tap_import() {
	local line out rc=0 re='^(not )?ok( [0-9]+)? - (.*)$'
	out=$("$@" 2>&1) || rc=$?
	while IFS= read -r line; do
		if [[ $line =~ $re ]]; then
			if [[ -n ${BASH_REMATCH[1]} ]]; then
				not_ok "${BASH_REMATCH[3]}"
			else
				ok "${BASH_REMATCH[3]}"
			fi
		else
			printf '%s\n' "$line"
		fi
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

# bfs_small_and_big WANT SRC N LINES SEED: a tree to read back, plain in
# WANT and as blockfs shows it from SRC: N small text files of 10-900 words
# (WANT/small/fNNN.txt, each lz4 -B4 in SRC/small/), and LINES numbered
# lines of text (WANT/big.txt) as a stock lz4 file of 4 MiB blocks
# (SRC/big.txt.lz4) and as BGZF (SRC/big.vcf.gz, shown as big.vcf).
bfs_small_and_big() {
	local want=$1 src=$2 n=$3 lines=$4 seed=$5 f
	mkdir -p "$want/small" "$src/small"
	python3 - "$want/small" "$n" "$seed" <<'EOF'
import os, random, sys
r = random.Random(int(sys.argv[3]))
words = [b"alpha", b"beta", b"gamma", b"delta", b"zigzag", b"\n", b"lorem", b"ipsum"]
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], "f%03d.txt" % i), "wb") as f:
        f.write(b" ".join(r.choice(words) for _ in range(r.randint(10, 900))))
EOF
	for f in "$want"/small/*.txt; do
		lz4 -q -B4 "$f" "$src/small/${f##*/}.lz4"
	done
	python3 -c 'import sys, random; r = random.Random(int(sys.argv[2])); sys.stdout.write("".join("%08d %s\n" % (i, "x" * r.randint(0, 60)) for i in range(int(sys.argv[1]))))' \
		"$lines" "$seed" >"$want/big.txt"
	lz4 -q "$want/big.txt" "$src/big.txt.lz4"
	bgzip -c "$want/big.txt" >"$src/big.vcf.gz"
	cp "$want/big.txt" "$want/big.vcf"
}

# bfs_dirs: the usual directories under $T, made: $S the source, $M the
# mountpoint, $W plain files to compare with, $C an index cache (mode 0700)
bfs_dirs() {
	S=$T/src M=$T/mnt W=$T/work C=$T/cache
	mkdir -p "$S" "$M" "$W" "$C"
	chmod 700 "$C"
}

# bfs_words OUT BYTES SEED K WORD...: BYTES bytes of seeded text into OUT,
# lines of K random WORDs (a WORD may be a newline) and a random number:
# reproducible, and compresses as text does
bfs_words() {
	python3 - "$@" <<'EOF'
import random, sys
out, size, seed, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
r = random.Random(seed); w = [a.encode() for a in sys.argv[5:]]
text = bytearray()
while len(text) < size: text += b" ".join(r.choices(w, k=k)) + b"%d\n" % r.randrange(1 << 30)
open(out, "wb").write(text[:size])
EOF
}

# bfs_fixture TOOL FILE REF: a fixture's check; the test bails out
# (exit 1) unless "TOOL -dc FILE" gives REF's bytes
bfs_fixture() {
	cmp -s <("$1" -dc "$2") "$3" && return 0
	echo "Bail out! fixture $2 does not round-trip ($1 -dc)"
	exit 1
}

# bfs_flip FILE OFFSET: damage FILE in place, its byte at OFFSET made 0x55
bfs_flip() {
	printf '\x55' | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

# For a test of one source $S mounted at $M, its log in $T/daemon.log:
# root_stat KEY: the mount's counter KEY (user.blockfs.stats of $M)
root_stat() {
	t getfattr --only-values -n user.blockfs.stats "$M" | awk -v k="$1" '$1 == k { print $2 }'
}

# file_stat KEY FILE: FILE's counter KEY
file_stat() {
	xattr stats "$2" | awk -v k="$1" '$1 == k { print $2 }'
}

# xattr NAME FILE: user.blockfs.NAME of FILE under $M (empty if none)
xattr() {
	t getfattr --only-values -n "user.blockfs.$1" "$M/$2" 2>/dev/null
}

# reads FILE: backing reads of FILE's version so far
reads() {
	xattr stats "$1" | awk '$1 == "backing_syscalls" { print $2 }'
}

# mount_o OPTIONS: mount $S at $M, or fail the test
mount_o() {
	bfs_mount "$S" "$M" "$T/daemon.log" "$1" || {
		not_ok "mount -o $1"
		show_log
		exit 1
	}
}

# umount_o: unmount, and check the daemon exits 0
umount_o() {
	bfs_umount
	check_eq "unmount; daemon exits 0" 0 "$?"
}

# bfs_mount SRC MNT LOG OPTIONS [ARG...]: start "$BLOCKFS -f [ARG...]" in
# the background and wait up to 30 s for the mount.  Returns 1 if the
# daemon died (its exit status in BFS_EXIT) or the deadline passed
# (BFS_EXIT empty).
bfs_mount() {
	local src=$1 mnt=$2 log=$3 opts=$4 deadline
	shift 4
	BFS_MNT=$mnt
	BFS_LOG=$log
	BFS_EXIT=
	# shellcheck disable=SC2086 # command line prefixes: BFS_WRAP (e.g. prlimit ... --), VALGRIND
	${BFS_WRAP:-} ${VALGRIND:-} "$BLOCKFS" -f "$@" "$src" "$mnt" -o "$opts" >"$log" 2>&1 &
	BFS_PID=$!
	BFS_CONN=
	deadline=$((SECONDS + 30))
	while ! is_mounted "$mnt"; do
		if ! daemon_alive; then
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
	BFS_CONN=$(bfs_conn "$mnt")
	return 0
}

# bfs_conn DIR: the number fusectl (/sys/fs/fuse/connections) gives the
# FUSE mount on DIR: the kernel's dev_t of its superblock.
bfs_conn() {
	local maj min
	read -r maj min < <(stat -c '%Hd %Ld' "$1" 2>/dev/null) || return 0
	echo $((maj << 20 | min))
}

# bfs_exited PID SECONDS: wait up to SECONDS for child PID to end (or be
# a zombie); return 0 if it has.
bfs_exited() {
	local deadline=$((SECONDS + $2))
	while kill -0 "$1" 2>/dev/null && [[ "$(ps -o stat= -p "$1" 2>/dev/null)" != Z* ]]; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# bfs_reap PID SECONDS: wait up to SECONDS for the daemon, child PID, and
# return its exit status. If it has not ended: 124, after aborting its
# FUSE connection (BFS_CONN) and killing it. A daemon the kernel holds in
# an uninterruptible wait cannot be reaped, and a bare "wait" would hang
# the suite (and its mount would hang every later sync): never waited for
# unless it has ended.
bfs_reap() {
	local pid=$1 rc=0
	if ! bfs_exited "$pid" "$2"; then
		diag "daemon $pid still running after $2 s: aborting its connection ${BFS_CONN:-?}"
		grep -s . /proc/"$pid"/task/*/wchan | sed 's/^/#   /' || true
		mountpoint -q /sys/fs/fuse/connections ||
			mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null || true
		if [[ -n $BFS_CONN && -e /sys/fs/fuse/connections/$BFS_CONN/abort ]]; then
			echo 1 >"/sys/fs/fuse/connections/$BFS_CONN/abort" || true
		fi
		kill -9 "$pid" 2>/dev/null || true
		bfs_exited "$pid" 10 && wait "$pid" 2>/dev/null
		return 124
	fi
	wait "$pid" || rc=$?
	return "$rc"
}

# bfs_sigterm: SIGTERM to the daemon, reaped (bfs_reap, 30 s); its exit
# status in BFS_TERM_RC, and its log shown unless that is 0.
BFS_TERM_RC=
bfs_sigterm() {
	BFS_TERM_RC=0
	kill -TERM "$BFS_PID"
	bfs_reap "$BFS_PID" 30 || BFS_TERM_RC=$?
	BFS_PID=
	((BFS_TERM_RC == 0)) || show_log
}

# bfs_end_readers PID...: give each reader (a child) up to 30 s to end,
# then kill it; reap them all.
bfs_end_readers() {
	local p
	for p in "$@"; do
		bfs_exited "$p" 30 || kill -9 "$p"
	done
	wait "$@" 2>/dev/null
}

# bfs_umount: fusermount3 -u, then wait up to 30 s for the daemon and
# return its exit status (124 if it did not exit: bfs_reap).
bfs_umount() {
	local rc=0
	[[ -n "$BFS_PID" ]] || return 1
	if ! fusermount3 -u "$BFS_MNT" 2>&1; then
		diag "fusermount3 -u failed; trying lazy unmount"
		fusermount3 -uz "$BFS_MNT" 2>&1 || true
	fi
	bfs_reap "$BFS_PID" 30 || rc=$?
	BFS_PID=
	return "$rc"
}

# bfs_kill: the EXIT-trap path; never fails, never hangs.
bfs_kill() {
	if [[ -n "$BFS_MNT" ]] && is_mounted "$BFS_MNT"; then
		fusermount3 -uz "$BFS_MNT" >/dev/null 2>&1 || true
	fi
	if daemon_alive; then
		kill "$BFS_PID" 2>/dev/null || true
		bfs_reap "$BFS_PID" 5 || true
	fi
	BFS_PID=
}
