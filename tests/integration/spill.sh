#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The spill (-o spill_size): a one-frame zstd file and a one-block xz file
# (xz -T1) of 80 MiB, read with verify on (the default). Their proof
# decodes each once into an unlinked file of mode 0600 in the index_cache
# directory, and every read after it is served from there: cat and seeded
# random ranges (O_DIRECT, so each reaches the daemon) equal X -dc, four
# readers at once too, with one proof per file and every block served
# read from the spill (the root's spill_* counters). A budget smaller
# than a file, one that holds only one of the two (the least recently
# read is dropped), spill_size=0, a spill directory with no room, and
# one that two spills at once overfill (writes fail: ENOSPC) all read
# exact, decoding instead. A
# flipped byte inside either file still fails with EIO, no byte served
# and nothing spilled. Files whose sizes only decoding tells (bzip2,
# lbzip2, zstd from a pipe) keep what the first stat's walk decoded in
# the spill, and read whole decode nothing again; pzstd's frames, measured
# after the walk, are not kept and decode again; a budget smaller than one
# and spill_size=0 read exact too.
#
# Usage: spill.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: spill.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin spill zstd xz bzip2 getfattr python3
bfs_dirs

# 80 MiB of text: more than zstd's one-block frames (32 MiB) and xz's (64 MiB),
# so both are served as open spans, proven whole before a byte is served
SIZE=$((80 << 20))
bfs_words "$W/big" "$SIZE" 7 64 spill proof frame span budget $'\n'
zstd -q -c "$W/big" >"$S/z.zst"
xz -0 -T1 -c "$W/big" >"$S/x.xz"
bfs_fixture zstd "$S/z.zst" "$W/big"
bfs_fixture xz "$S/x.xz" "$W/big"
# a byte flipped in the middle of each: without their checksums, megabytes of wrong bytes
for f in z.zst x.xz; do
	cp "$S/$f" "$S/flip-$f"
	bfs_flip "$S/flip-$f" $(($(stat -c %s "$S/$f") / 2))
done

# direct.py FILE REF N SEED: N seeded random reads with O_DIRECT (the page
# cache kept out: each reaches the daemon), 4 KiB aligned, 4 KiB to 3 MiB
cat >"$T/direct.py" <<'PY'
import mmap, os, random, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
ref = open(sys.argv[2], "rb")
size = os.fstat(ref.fileno()).st_size
r = random.Random(int(sys.argv[4]))
buf = mmap.mmap(-1, 3 << 20)
for i in range(int(sys.argv[3])):
    off = r.randrange(size >> 12) << 12
    n = min(r.choice([4096, 65536, 1 << 20, 3 << 20, r.randrange(1, 700) << 12]), size - off)
    got = os.preadv(fd, [memoryview(buf)[:n]], off)
    ref.seek(off)
    if got != n or buf[:n] != ref.read(n):
        sys.exit("range %d at %d, %d bytes differs (%d read)" % (i, off, n, got))
PY

# exact NAME: the file reads as zstd/xz -dc does, whole and at 40 random places
exact() {
	check "$1: cat equals X -dc" cmp "$M/$1" "$W/big"
	check "$1: 40 random ranges (O_DIRECT) equal X -dc" \
		python3 "$T/direct.py" "$M/$1" "$W/big" 40 "${2:-1}"
}

# --- the default: both spilled, each decoded once -----------------------------------
mount_o "index_cache=$C"
check_eq "spill_limit: the default 1G" $((1 << 30)) "$(root_stat spill_limit)"
check_eq "z, x: sizes from the first stat" "$SIZE $SIZE" "$(t stat -c %s "$M/z" "$M/x" | xargs)"
check_eq "nothing proven before a read" "0 0" "$(root_stat spill_proofs) $(root_stat spill_bytes)"
exact z 1
exact x 2
check_eq "one proof per file, both spilled" "2 2" "$(root_stat spill_proofs) $(root_stat spill_sealed)"
check_eq "spill_bytes: both files" $((2 * SIZE)) "$(root_stat spill_bytes)"
d=$(($(file_stat blocks_decompressed z) + $(file_stat blocks_decompressed x)))
check_eq "every block the reads needed came from the spill" "$d" "$(root_stat spill_reads)"
check "... and there were some" test "$d" -ge 80
# the spill files: unlinked, the daemon's only, in the index_cache directory
check_eq "no name in the index_cache directory" "" "$(find "$C" -name '*spill*')"
n=0 priv=0
for fd in /proc/"$BFS_PID"/fd/*; do
	l=$(readlink "$fd") || continue
	[[ $l == "$C/"*"(deleted)" ]] || continue
	n=$((n + 1))
	[[ $(stat -L -c %a "$fd") == 600 ]] && priv=$((priv + 1))
done
check_eq "two unlinked spill files in $C, mode 0600" "2 2" "$n $priv"
# readers at once, and again later: still one proof each
r0=$(root_stat spill_reads)
pids=()
for i in 1 2 3 4; do
	f=z; ((i % 2)) && f=x
	timeout 60 python3 "$T/direct.py" "$M/$f" "$W/big" 30 "$((10 + i))" >"$T/r$i.err" 2>&1 &
	pids+=($!)
done
bad=0
for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
check_eq "four readers at once: all exact" 0 "$bad"
((bad == 0)) || cat "$T"/r?.err
check "... served from the spill" test "$(root_stat spill_reads)" -gt "$r0"
exact z 3
check_eq "still one proof per file, nothing dropped or failed" "2 0 0" \
	"$(root_stat spill_proofs) $(root_stat spill_dropped) $(root_stat spill_failed)"
is "daemon alive" daemon_alive
umount_o

# --- a budget that holds one file: the least recently read is dropped -------------
mount_o "index_cache=$C,spill_size=100M"
exact z 4
check_eq "100M: z spilled" "1 1 $SIZE" "$(root_stat spill_proofs) $(root_stat spill_sealed) $(root_stat spill_bytes)"
exact x 5
check_eq "100M: x spilled, z dropped for it" "2 2 1 $SIZE" \
	"$(root_stat spill_proofs) $(root_stat spill_sealed) $(root_stat spill_dropped) $(root_stat spill_bytes)"
r0=$(root_stat spill_reads)
exact z 6
check_eq "100M: z again: decoded, not proven again, no spill read" "2 $r0" \
	"$(root_stat spill_proofs) $(root_stat spill_reads)"
umount_o

# --- a budget smaller than a file: decoded as without a spill ---------------------
mount_o "index_cache=$C,spill_size=32M"
exact z 7
exact x 8
check_eq "32M: proven, nothing spilled or read from a spill" "2 0 0 0" \
	"$(root_stat spill_proofs) $(root_stat spill_sealed) $(root_stat spill_reads) $(root_stat spill_bytes)"
umount_o

# --- spill_size=0: off -------------------------------------------------------------
mount_o "index_cache=$C,spill_size=0"
check_eq "spill_size=0: spill_limit 0" 0 "$(root_stat spill_limit)"
exact z 9
exact x 10
check_eq "spill_size=0: nothing spilled" "0 0 0" \
	"$(root_stat spill_sealed) $(root_stat spill_reads) $(root_stat spill_failed)"
umount_o

# --- a spill directory short of room: no spill, or writes that fail (ENOSPC) ----------
F=$T/full
mkdir -p "$F"
if mount -t tmpfs -o size=8m,mode=0700 blockfs-spill-test "$F" 2>/dev/null; then
	bfs_at_exit umount -l "$F"
	mount_o "index_cache=$F"
	exact z 11
	exact x 12
	check_eq "8 MiB directory: no room for either spill, none kept" "2 0 0" \
		"$(root_stat spill_failed) $(root_stat spill_sealed) $(root_stat spill_bytes)"
	is "8 MiB directory: daemon alive" daemon_alive
	umount_o
	# room for one spill when each begins: the two proofs at once write more than fits
	mount -o remount,size=100m "$F"
	mount_o "index_cache=$F"
	t cat "$M/z" >/dev/null &
	p=$!
	t cat "$M/x" >/dev/null
	wait "$p"
	exact z 13
	exact x 14
	diag "100 MiB directory: spill_failed $(root_stat spill_failed), spill_sealed $(root_stat spill_sealed)"
	check "100 MiB directory, two spills at once: not both kept" \
		test "$(root_stat spill_failed)" -ge 1 -a "$(root_stat spill_sealed)" -le 1
	check "... what failed gave its room back" \
		test "$(df --output=used -k "$F" | tail -1)" -le $((SIZE / 1024 + 1024))
	is "100 MiB directory: daemon alive" daemon_alive
	umount_o
	umount "$F"
else
	ok "short directories: skipped, no tmpfs could be mounted"
fi

# --- a file size limit (RLIMIT_FSIZE) under the spill's writes: EFBIG, not SIGXFSZ ----
BFS_WRAP="prlimit --fsize=$((4 << 20)) --"
mount_o "index_cache=$C"
BFS_WRAP=
exact z 16
exact x 17
check "4 MiB file size limit: both spills failed" test "$(root_stat spill_failed)" -ge 2
check_eq "... none kept" 0 "$(root_stat spill_sealed)"
is "4 MiB file size limit: daemon alive (SIGXFSZ ignored)" daemon_alive
umount_o

# --- damage: still refused whole, nothing spilled ------------------------------------
mount_o "index_cache=$C"
for f in flip-z flip-x; do
	check_fails "$f: cat fails with EIO" "Input/output error" cat "$M/$f"
	check_eq "$f: not one byte served" 0 "$(t cat "$M/$f" 2>/dev/null | wc -c)"
	check_fails "$f: a read in its middle fails too" "Input/output error" \
		dd if="$M/$f" of=/dev/null bs=1M skip=40 count=1 iflag=direct status=none
done
check_eq "damage: both proofs failed, nothing spilled" "2 0 0" \
	"$(root_stat spill_proofs) $(root_stat spill_sealed) $(root_stat spill_bytes)"
exact z 15
check_eq "beside them a good file spills as before" "3 1" \
	"$(root_stat spill_proofs) $(root_stat spill_sealed)"
is "damage: daemon alive" daemon_alive
umount_o

# --- a walk's spill: files whose sizes only decoding tells -----------------------------
# bzip2 and lbzip2 (the walk decodes every block) and zstd from a pipe (one
# frame without a content size: decoded by the walk) keep what the first
# stat decoded, and reading them whole is served from there: no block
# decoded again. pzstd's frames (no content size: measured after the walk,
# the output counted) are not kept: reading them decodes them again
S=$T/walk
mkdir -p "$S"
head -c $((40 << 20)) "$W/big" >"$W/mid"
bzip2 -9 -c "$W/mid" >"$S/b.bz2"
walked=(b)
if command -v lbzip2 >/dev/null; then
	lbzip2 -n 2 -c "$W/mid" >"$S/l.bz2"
	walked+=(l)
fi
measured=()
if command -v pzstd >/dev/null; then
	pzstd -q -p 2 -c "$W/mid" >"$S/p.zst"
	measured+=(p)
fi
zstd -q -c <"$W/mid" >"$S/pipe.zst"
walked+=(pipe)
cp "$S/b.bz2" "$S/flip-b.bz2"		# damage in its middle: the blocks before it still spill
bfs_flip "$S/flip-b.bz2" $(($(stat -c %s "$S/b.bz2") / 2))
MID=$((40 << 20))

# whole NAME SEED: NAME reads as the text whole and at 20 random places
whole() {
	check "$1: cat equals X -dc" cmp "$M/$1" "$W/mid"
	check "$1: 20 random ranges (O_DIRECT) equal X -dc" \
		python3 "$T/direct.py" "$M/$1" "$W/mid" 20 "$2"
}

mkdir -p "$T/c-walk1"
mount_o "index_cache=$T/c-walk1"
check_eq "walked files: sizes from the first stat" \
	"$(printf '%s ' "${walked[@]/*/$MID}" "${measured[@]/*/$MID}" | xargs)" \
	"$(cd "$M" && t stat -c %s "${walked[@]}" "${measured[@]}" | xargs)"
n=${#walked[@]}
check_eq "one walk's spill per file, sealed once the walk is over" "$n $n" \
	"$(root_stat spill_proofs) $(root_stat spill_sealed)"
check_eq "spill_bytes: every file whole" $((n * MID)) "$(root_stat spill_bytes)"
i=20
for f in "${walked[@]}"; do
	r0=$(root_stat spill_reads)
	whole "$f" $((i++))
	check_eq "$f: no block decoded again" 0 "$(file_stat blocks_decompressed "$f")"
	check "$f: served from the spill" test "$(root_stat spill_reads)" -gt "$r0"
done
for f in "${measured[@]}"; do
	whole "$f" $((i++))
	check "$f: its frames decoded again" test "$(file_stat blocks_decompressed "$f")" -gt 0
done
check_eq "measured frames: no walk's spill for them" "$n" "$(root_stat spill_proofs)"
check_eq "nothing dropped or failed" "0 0" "$(root_stat spill_dropped) $(root_stat spill_failed)"
check_fails "flip-b: reading to the damage fails with EIO" "Input/output error" cat "$M/flip-b"
check "flip-b: the blocks before the damage read exact" \
	cmp <(t head -c $((8 << 20)) "$M/flip-b") <(head -c $((8 << 20)) "$W/mid")
check_eq "flip-b: ... from the spill" 0 "$(file_stat blocks_decompressed flip-b)"
is "walks: daemon alive" daemon_alive
umount_o

# a budget smaller than a file: its first blocks kept, the rest decoded when read
mkdir -p "$T/c-walk2"
mount_o "index_cache=$T/c-walk2,spill_size=12M"
whole b 30
check "12M: b partly from the spill, partly decoded" \
	test "$(root_stat spill_reads)" -gt 0 -a "$(file_stat blocks_decompressed b)" -gt 0
check "12M: within the budget" test "$(root_stat spill_bytes)" -le $((12 << 20))
check "12M: the pieces past it refused" test "$(root_stat spill_failed)" -ge 1
whole pipe 31
is "12M: daemon alive" daemon_alive
umount_o

# spill_size=0: decoded again, as before
mkdir -p "$T/c-walk3"
mount_o "index_cache=$T/c-walk3,spill_size=0"
for f in "${walked[@]}" "${measured[@]}"; do
	whole "$f" $((i++))
done
check_eq "spill_size=0: nothing spilled" "0 0 0" \
	"$(root_stat spill_sealed) $(root_stat spill_reads) $(root_stat spill_failed)"
check "spill_size=0: b decoded" test "$(file_stat blocks_decompressed b)" -gt 0
umount_o

bfs_end
