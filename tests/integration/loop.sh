#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The FUSE loop (src/loop.c): one thread reads /dev/fuse at a time and
# answers quick requests itself; a request about to wait hands the
# reader's role over first. Checked:
# - the default loop, -s (one thread), -o loop=libfuse and -o busy_poll=0
#   each read a tree of small lz4 files, a stock lz4 file and a BGZF file
#   exactly, with four readers at once, and unmount cleanly;
# - a READ stuck in its backing file does not hold the mount up: SOURCE
#   is itself a FUSE mount (a second blockfs, stopped with SIGSTOP; the
#   log says SOURCE is taken as remote, which a local one is not), a cat
#   of a file there waits, and meanwhile the mount answers getfattr on
#   its root; with -s, the control, the same getfattr waits for the cat;
#   after SIGCONT the cat's bytes are exact;
# - SIGTERM while four readers keep the loop busy and a file and a
#   directory are held open: the daemon exits 0 (and, under ASan, leaks
#   nothing);
# - bad loop= and busy_poll= values are refused before anything mounts.
#
# Usage: loop.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: loop.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin loop lz4 bgzip python3 getfattr

S=$T/src M=$T/mnt W=$T/want
mkdir -p "$M"
bfs_small_and_big "$W" "$S" 300 400000 5
not_mounted() { ! is_mounted "$1"; }
not_remote() { ! grep -q "taken as remote" "$BFS_LOG"; }
sums() { (cd "$1" && md5sum small/*.txt big.txt big.vcf); }
sums "$W" >"$T/want.md5"

# read_all OPTIONS NAME [ARG...]: mount with OPTIONS and ARGs; four
# readers at once, each checking every file.
read_all() {
	local opts=$1 name=$2 bad=0 pids=()
	shift 2
	bfs_mount "$S" "$M" "$T/daemon.log" "$opts" "$@" || { not_ok "$name: mount"; show_log; return; }
	for i in 1 2 3 4; do
		(cd "$M" && t md5sum --quiet -c "$T/want.md5") >"$T/check-$i.out" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || bad=$((bad + 1))
	done
	check_eq "$name: four readers at once read every file exactly" 0 "$bad"
	is "$name: a local SOURCE is not taken as remote" not_remote
	is "$name: the daemon is alive" daemon_alive
	is "$name: unmount, exit 0" bfs_umount
}

read_all "index_cache=off" "default loop"
read_all "index_cache=off" "-s (one thread)" -s
read_all "index_cache=off,loop=libfuse" "loop=libfuse"
read_all "index_cache=off,busy_poll=0" "busy_poll=0"
read_all "index_cache=off,loop=libfuse" "loop=libfuse -s" -s

# --- a READ stuck in the backing filesystem ---------------------------------
# SOURCE is an inner blockfs mount of plain files (shown unchanged), which
# RWF_NOWAIT cannot probe: every backing read may wait, and hands over.
R=$T/raw I=$T/inner
mkdir -p "$R" "$I"
head -c $((16 << 20)) /dev/urandom >"$R/big.bin"
"$BLOCKFS" -f "$R" "$I" -o index_cache=off,kernel_readahead=0 >"$T/inner.log" 2>&1 &
INNER=$!
bfs_at_exit kill -CONT "$INNER"
bfs_at_exit bfs_lazy_umount "$I"
for _ in $(seq 300); do
	is_mounted "$I" && break
	sleep 0.1
done
is "inner mount for the stuck-read checks" is_mounted "$I"

# stuck_read [ARG...]: a cat of big.bin through a mount of the inner one
# while the inner daemon is stopped. Sets STUCK to "answered" if getfattr
# on the outer root answered meanwhile (within 5 s), else to "waited";
# ", wrong bytes" or ", unclean exit" follow if the cat or the unmount
# then failed.
stuck_read() {
	local cat_pid
	STUCK=waited
	bfs_mount "$I" "$M" "$T/daemon.log" "index_cache=off" "$@" || { STUCK="no mount"; return; }
	stat "$M/big.bin" >/dev/null		# looked up while the inner mount answers
	kill -STOP "$INNER"
	cat "$M/big.bin" >"$T/stuck.out" 2>/dev/null &
	cat_pid=$!
	sleep 1
	if kill -0 "$cat_pid" 2>/dev/null &&
		timeout 5 getfattr --only-values -n user.blockfs.stats "$M" 2>/dev/null | grep -q '^reads '; then
		STUCK=answered
	fi
	kill -CONT "$INNER"
	wait "$cat_pid"
	cmp -s "$R/big.bin" "$T/stuck.out" || STUCK="$STUCK, wrong bytes"
	bfs_umount || STUCK="$STUCK, unclean exit"
}
stuck_read
check_eq "a READ stuck in the backing filesystem: the mount answers meanwhile" answered "$STUCK"
check "a FUSE SOURCE is taken as remote, and the log says so" \
	grep -q "taken as remote" "$T/daemon.log"
stuck_read -s
check_eq "the control, -s: the same getfattr waits for the stuck READ" waited "$STUCK"
# A network SOURCE is read with pread: auto maps nothing, and mmap asked
# for anyway is honoured with one line saying what it risks.
bfs_mount "$I" "$M" "$T/daemon.log" "index_cache=off,readpath=mmap" || not_ok "mount -o readpath=mmap"
check "readpath=mmap on a FUSE SOURCE: the log says what it risks" \
	grep -q "readpath=mmap on a remote SOURCE" "$T/daemon.log"
check "readpath=mmap on a FUSE SOURCE: big.bin reads exact" cmp "$R/big.bin" "$M/big.bin"
bfs_umount
bfs_mount "$I" "$M" "$T/daemon.log" "index_cache=off,readpath=auto" || not_ok "mount -o readpath=auto"
check "readpath=auto on a FUSE SOURCE: the log says it reads with pread" \
	grep -q "readpath=auto reads with pread" "$T/daemon.log"
check "readpath=auto on a FUSE SOURCE: big.bin reads exact" cmp "$R/big.bin" "$M/big.bin"
bfs_umount
fusermount3 -u "$I"
rc=0
wait "$INNER" || rc=$?
check_eq "inner mount: exit 0" 0 "$rc"

# --- SIGTERM while busy -----------------------------------------------------
# A directory and a file held open across the signal: the kernel never
# releases them, and the daemon frees them at exit (LeakSanitizer, in the
# ASan build, fails the exit status if it does not).
bfs_mount "$S" "$M" "$T/daemon.log" "index_cache=off" || not_ok "mount for SIGTERM"
exec 3<"$M/small" 4<"$M/big.txt"
readers=()
for i in 1 2 3 4; do
	(cd "$M" && while md5sum small/*.txt big.txt >/dev/null 2>&1; do :; done) &
	readers+=($!)
done
sleep 1
bfs_sigterm
exec 3<&- 4<&-
check_eq "SIGTERM with four readers busy, a file and a directory open: the daemon exits 0" 0 \
	"$BFS_TERM_RC"
bfs_end_readers "${readers[@]}"
is "SIGTERM: nothing mounted afterwards" not_mounted "$M"

# --- bad values --------------------------------------------------------------
for bad in loop=fast loop= loop=LIBFUSE busy_poll=-1 busy_poll=1000001 busy_poll=5us \
	busy_poll=; do
	rc=0
	out=$("$BLOCKFS" -f "$S" "$M" -o "$bad" 2>&1) || rc=$?
	check_eq "-o $bad: refused with exit status 1" 1 "$rc"
	check "-o $bad: the message names the option" grep -q "option ${bad%%=*}" <<<"$out"
	is "-o $bad: nothing mounted" not_mounted "$M"
done

bfs_end
