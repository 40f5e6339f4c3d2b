#!/usr/bin/env bash
# shellcheck disable=SC2016 # bash -c and eval scripts expand their own arguments
# SPDX-License-Identifier: MIT
#
# Hints and statistics on a real mount (blockfs(8), EXTENDED ATTRIBUTES): user.blockfs.advice and
# .readpath set, read, inherited and removed on files and directories; every
# error a user can meet, with the errno text setfattr/getfattr print;
# willneed decoding in the background; dontneed emptying blockfs's cache and
# the kernel's; counters that move as reads happen; the mount-wide stats on
# the root; blockfs-stat (its random-read warning for 4 MiB LZ4 blocks and
# one-block xz, none for 1 MiB xz blocks); reads that stay byte-identical
# throughout; -o ro.
#
# Reads meant for blockfs's counters use "dd iflag=direct": with keep_cache
# the kernel's page cache would serve a second read without asking blockfs.
#
# Usage: hints.sh BLOCKFS [BLOCKFS_STAT]
# Exit: 0 all passed, 1 something failed, 77 skipped (no root, /dev/fuse, tools).

set -u

BLOCKFS=${1:?usage: hints.sh BLOCKFS [BLOCKFS_STAT]}
STAT=${2:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

bfs_begin hints lz4 bgzip setfattr getfattr mountpoint dd cmp
BLOCKFS=$(realpath "$BLOCKFS")
[[ -z "$STAT" ]] || STAT=$(realpath "$STAT")
HAVE_PY=0
command -v python3 >/dev/null 2>&1 && HAVE_PY=1

STATE=$T		# bfs_begin's state directory
SRC=$STATE/src
MNT=$STATE/mnt
mkdir -p "$SRC/d/e" "$MNT"

# --- fixtures: a few MB, compressible and not, in 64 KiB blocks -------------
{
	seq 1 300000
	head -c 1000000 /dev/urandom | base64
} >"$STATE/plain"
SIZE=$(stat -c %s "$STATE/plain")
lz4 -q -B4 "$STATE/plain" "$SRC/a.lz4"
cp "$STATE/plain" "$SRC/d/b" && bgzip -i "$SRC/d/b"	# d/b.gz and its .gzi
lz4 -q -B4 "$STATE/plain" "$SRC/d/e/c.lz4"
cp "$STATE/plain" "$SRC/d/e/raw.txt"
mkdir "$SRC/slow"
lz4 -q "$STATE/plain" "$SRC/slow/big4m.lz4"	# the lz4 CLI's default 4 MiB blocks
# xz's one block, and xz -T2's 1 MiB blocks, when xz is there
HAVE_XZ=0
if command -v xz >/dev/null; then
	HAVE_XZ=1
	xz -q -T1 -0 -c "$STATE/plain" >"$SRC/slow/one.xz"
	xz -q -T2 -0 --block-size=1MiB -c "$STATE/plain" >"$SRC/slow/blocks.xz"
fi
FILES=(a d/b d/e/c d/e/raw.txt)

A=user.blockfs.advice
R=user.blockfs.readpath

# get FILE NAME: the value, or nothing.
get() {
	t getfattr --only-values -n "$2" "$MNT/$1" 2>/dev/null
}

# stat_of FILE KEY: one counter of user.blockfs.stats.
stat_of() {
	get "$1" user.blockfs.stats | awk -v k="$2" '$1 == k { print $2 }'
}

# direct FILE BLOCK: read one 64 KiB block past the kernel's page cache.
direct() {
	t dd if="$MNT/$1" of=/dev/null bs=64k count=1 skip="$2" iflag=direct status=none
}

# wait_cached FILE AT_LEAST SECONDS: poll user.blockfs.cached.
wait_cached() {
	local deadline=$((SECONDS + $3)) v
	while :; do
		v=$(get "$1" user.blockfs.cached)
		[[ -n "$v" ]] && ((v >= $2)) && return 0
		((SECONDS >= deadline)) && {
			echo "cached $v after $3 s, wanted >= $2"
			return 1
		}
		sleep 0.05
	done
}

all_identical() {
	local f
	for f in "${FILES[@]}"; do
		cmp "$STATE/plain" "$MNT/$f" || return 1
	done
}

# willneed=cache: the willneed checks below watch blockfs's own cache fill.
if ! bfs_mount "$SRC" "$MNT" "$STATE/daemon.log" verify=on,willneed=cache; then
	not_ok "mount"
	exit 1
fi
ok "mount"

# --- defaults and listing ---------------------------------------------------
check_eq "file advice defaults to the mount's (normal)" normal "$(get a $A)"
check_eq "directory advice defaults to normal" normal "$(get d $A)"
check_eq "root advice defaults to normal" normal "$(get . $A)"
check_eq "readpath defaults to the mount's (pread)" pread "$(get d/e/c $R)"
check_eq "cached is 0 before any read" 0 "$(get a user.blockfs.cached)"

names() {
	t getfattr -d -m - "$MNT/$1" 2>/dev/null | sed -n 's/^\(user\.[^=]*\)=.*/\1/p' | sort | tr '\n' ' '
}
# The facts and inherited hints are read by name only; listxattr lists the
# hints set on the path itself, so that copies carry no computed values.
check_eq "listxattr on an LZ4 file: no computed names" "" "$(names a)"
check_eq "listxattr on a raw file: no computed names" "" "$(names d/e/raw.txt)"
check_eq "listxattr on a directory without hints: nothing" "" "$(names d)"
check_eq "listxattr on the root: nothing" "" "$(names .)"
t setfattr -n $A -v random "$MNT/a"
t setfattr -n $R -v pread "$MNT/d"
check_eq "listxattr on a file: the hint set on it" "user.blockfs.advice " "$(names a)"
check_eq "listxattr on a directory: the hint set on it" "user.blockfs.readpath " "$(names d)"
check_eq "... but not on what only inherits it" "" "$(names d/b)"
t setfattr -x $A "$MNT/a"
t setfattr -x $R "$MNT/d"
check_eq "listxattr after setfattr -x: nothing" "" "$(names a)"
facts=ok
for n in format compressed_size block_size blocks cached stats advice readpath; do
	t getfattr --only-values -n user.blockfs.$n "$MNT/a" >/dev/null 2>&1 || facts="$n unreadable"
done
check_eq "getfattr -n reads every name that is not listed" ok "$facts"

# --- round trips ------------------------------------------------------------
rt=ok
for v in sequential random noreuse normal; do
	t setfattr -n $A -v $v "$MNT/a" || rt="set $v failed"
	[[ "$(get a $A)" == "$v" ]] || rt="$v read back as $(get a $A)"
done
check_eq "advice round trip on a file: sequential random noreuse normal" ok "$rt"
rt=ok
for v in sequential random noreuse willneed normal; do
	t setfattr -n $A -v $v "$MNT/d" || rt="set $v failed"
	[[ "$(get d $A)" == "$v" ]] || rt="$v read back as $(get d $A)"
done
check_eq "advice round trip on a directory (willneed: its default)" ok "$rt"
check "setfattr -x removes a file's advice" setfattr -x $A "$MNT/a"
check "setfattr -x removes a directory's advice" setfattr -x $A "$MNT/d"
check_fails "removing advice that is not set: ENODATA" "No such attribute" setfattr -x $A "$MNT/a"
check "readpath pread on a file" setfattr -n $R -v pread "$MNT/a"
check_eq "readpath reads back" pread "$(get a $R)"
check "readpath pread on a directory" setfattr -n $R -v pread "$MNT/d"
check "setfattr -x readpath (file)" setfattr -x $R "$MNT/a"
check "setfattr -x readpath (directory)" setfattr -x $R "$MNT/d"
check_fails "removing readpath that is not set: ENODATA" "No such attribute" setfattr -x $R "$MNT/d"

# --- inheritance ------------------------------------------------------------
t setfattr -n $A -v sequential "$MNT/d"
check_eq "a file inherits its directory's advice" sequential "$(get d/b $A)"
check_eq "a file inherits its grandparent's advice" sequential "$(get d/e/c $A)"
check_eq "a subdirectory inherits" sequential "$(get d/e $A)"
check_eq "outside the directory: unchanged" normal "$(get a $A)"
t setfattr -n $A -v random "$MNT/d/e/c"
check_eq "a file's own advice beats its directory's" random "$(get d/e/c $A)"
t setfattr -n $A -v noreuse "$MNT/d/e"
check_eq "the nearest directory wins" noreuse "$(get d/e/raw.txt $A)"
t setfattr -x $A "$MNT/d/e/c"
check_eq "removal falls back to the nearest directory" noreuse "$(get d/e/c $A)"
t setfattr -x $A "$MNT/d/e"
t setfattr -x $A "$MNT/d"
check_eq "removal falls back to the mount's default" normal "$(get d/e/c $A)"
t setfattr -n $A -v random "$MNT"
check_eq "the root's advice reaches every file" "random random" "$(get a $A) $(get d/e/c $A)"
t setfattr -x $A "$MNT"

# Hints belong to the mount, not to an inode: let the kernel forget them all.
t setfattr -n $A -v sequential "$MNT/d/e/c"
sync -f "$T"	# this test's filesystem only: another stuck mount cannot hang it
echo 2 >/proc/sys/vm/drop_caches
sleep 0.2
check_eq "a hint outlives the inode (after the kernel forgets it)" sequential "$(get d/e/c $A)"
t setfattr -x $A "$MNT/d/e/c"

# --- errors -----------------------------------------------------------------
for v in bogus Random "random " " random" "random 0 1M" "normal 0 1" "willneed 0" \
	"willneed 0 0" "willneed -1 1M" "willneed 0 -1" "willneed 0 1M junk" "willneed 0x10 1" \
	"willneed 0 1T" "willneed 0 99999999999999999999" "willneed 1 18446744073709551615"; do
	check_fails "advice \"$v\": EINVAL" "Invalid argument" setfattr -n $A -v "$v" "$MNT/a"
done
long=$(printf 'x%.0s' {1..100})
check_fails "advice longer than any valid value: E2BIG" "Argument list too long" \
	setfattr -n $A -v "$long" "$MNT/a"
check_fails "readpath too long: E2BIG" "Argument list too long" setfattr -n $R -v "$long" "$MNT/a"
check_fails "dontneed on a directory: EINVAL" "Invalid argument" setfattr -n $A -v dontneed "$MNT/d"
check_fails "a range on a directory: EINVAL" "Invalid argument" \
	setfattr -n $A -v "willneed 0 1M" "$MNT/d"
check "readpath mmap on a file" setfattr -n $R -v mmap "$MNT/a"
check_eq "readpath reads back mmap" mmap "$(get a $R)"
check "readpath auto on a directory" setfattr -n $R -v auto "$MNT/d"
check_eq "a file below it inherits auto" auto "$(get d/b $R)"
t setfattr -x $R "$MNT/a"
t setfattr -x $R "$MNT/d"
check_eq "removed: back to the mount's pread" "pread pread" "$(get a $R) $(get d/b $R)"
check_fails "readpath bogus: EINVAL" "Invalid argument" setfattr -n $R -v fast "$MNT/a"
check_eq "a refused value changes nothing" "normal pread" "$(get a $A) $(get a $R)"
for n in format compressed_size block_size blocks cached stats units unit_max; do
	check_fails "set read-only $n: EPERM" "Operation not permitted" \
		setfattr -n user.blockfs.$n -v 1 "$MNT/a"
	check_fails "remove read-only $n: EPERM" "Operation not permitted" \
		setfattr -x user.blockfs.$n "$MNT/a"
done
check_fails "stats on the root is read-only: EPERM" "Operation not permitted" \
	setfattr -n user.blockfs.stats -v 1 "$MNT"
check_fails "unknown user.blockfs name, get: ENODATA" "No such attribute" \
	getfattr -n user.blockfs.nope "$MNT/a"
check_fails "unknown user.blockfs name, set: ENOTSUP" "Operation not supported" \
	setfattr -n user.blockfs.nope -v 1 "$MNT/a"
check_fails "unknown user.blockfs name, remove: ENOTSUP" "Operation not supported" \
	setfattr -x user.blockfs.nope "$MNT/a"
check_fails "stats on a directory below the root: ENODATA" "No such attribute" \
	getfattr -n user.blockfs.stats "$MNT/d"
check_fails "format on a directory: ENODATA" "No such attribute" \
	getfattr -n user.blockfs.format "$MNT/d"
check_fails "other names are read-only: EROFS" "Read-only file system" \
	setfattr -n user.other -v 1 "$MNT/a"
check_fails "removing other names: EROFS" "Read-only file system" setfattr -x user.other "$MNT/a"

if ((HAVE_PY)); then
	pyx() {
		t python3 - "$@" <<-'EOF'
			import errno, os, sys
			path, name, value, flag = sys.argv[1:5]
			flags = {"create": os.XATTR_CREATE, "replace": os.XATTR_REPLACE, "none": 0}[flag]
			try:
			    os.setxattr(path, name, value.encode().replace(b"\\0", b"\0"), flags)
			    print("ok")
			except OSError as e:
			    print(errno.errorcode[e.errno])
		EOF
	}
	check_eq "a value ending in one NUL (C strlen + 1) is taken" ok "$(pyx "$MNT/a" $A 'random\0' none)"
	check_eq "... and reads back without it" random "$(get a $A)"
	check_eq "a NUL inside the value: EINVAL" EINVAL "$(pyx "$MNT/a" $A 'ran\0dom' none)"
	check_eq "XATTR_CREATE over an own hint: EEXIST" EEXIST "$(pyx "$MNT/a" $A normal create)"
	t setfattr -x $A "$MNT/a"
	check_eq "XATTR_REPLACE without an own hint: ENODATA" ENODATA \
		"$(pyx "$MNT/a" $A normal replace)"
	check_eq "XATTR_CREATE without an own hint" ok "$(pyx "$MNT/a" $A sequential create)"
	check_eq "XATTR_REPLACE over an own hint" ok "$(pyx "$MNT/a" $A normal replace)"
	t setfattr -x $A "$MNT/a"
	check_eq "an empty value: EINVAL" EINVAL "$(pyx "$MNT/a" $A '' none)"
fi

# --- counters ---------------------------------------------------------------
# advice random: no read-ahead, so every number below is exact.
t setfattr -n $A -v random "$MNT/d/e/c"
r0=$(stat_of d/e/c reads) m0=$(stat_of d/e/c cache_misses) h0=$(stat_of d/e/c cache_hits)
d0=$(stat_of d/e/c blocks_decompressed) b0=$(stat_of d/e/c bytes)
direct d/e/c 5
check_eq "a first read: one read, one miss, one block decompressed" "1 1 0 1 65536" \
	"$(($(stat_of d/e/c reads) - r0)) $(($(stat_of d/e/c cache_misses) - m0)) $(($(stat_of d/e/c cache_hits) - h0)) $(($(stat_of d/e/c blocks_decompressed) - d0)) $(($(stat_of d/e/c bytes) - b0))"
direct d/e/c 5
check_eq "the same block again (O_DIRECT): a hit, nothing decompressed" "2 1 1 1 131072" \
	"$(($(stat_of d/e/c reads) - r0)) $(($(stat_of d/e/c cache_misses) - m0)) $(($(stat_of d/e/c cache_hits) - h0)) $(($(stat_of d/e/c blocks_decompressed) - d0)) $(($(stat_of d/e/c bytes) - b0))"
check_eq "cached: that one block" 65536 "$(get d/e/c user.blockfs.cached)"
sc=$(stat_of d/e/c backing_syscalls)
check "backing syscalls counted" test "${sc:-0}" -ge 1
check_eq "no checksum failures, no errors" "0 0" \
	"$(stat_of d/e/c checksum_failures) $(stat_of d/e/c errors)"
t setfattr -x $A "$MNT/d/e/c"

root=$(get . user.blockfs.stats)
check "root stats: every key" bash -c '
	for k in reads bytes cache_hits cache_misses blocks_decompressed decompress_ns \
		blocks_prefetched prefetched_used pushed_bytes backing_syscalls checksum_failures errors \
		cached_bytes lookup_opens walked_ahead dir_memos dirs_read_ahead dirs_ahead_used dirs_forgotten \
		names_only_replies attrs_used \
		inodes cache_bytes cache_limit; do
		grep -q "^$k [0-9][0-9]*$" <<<"$1" || { echo "no $k"; exit 1; }
	done' _ "$root"
check_eq "root cache_limit: the default 32M" 33554432 \
	"$(awk '$1 == "cache_limit" { print $2 }' <<<"$root")"
check "root reads count every file's" test "$(awk '$1 == "reads" { print $2 }' <<<"$root")" \
	-ge "$(stat_of d/e/c reads)"

# --- willneed and dontneed --------------------------------------------------
check_eq "a fresh file: nothing cached" 0 "$(get d/b user.blockfs.cached)"
t0=$(date +%s%N)
t setfattr -n $A -v willneed "$MNT/d/b"
ms=$((($(date +%s%N) - t0) / 1000000))
diag "setfattr willneed returned after $ms ms"
check "willneed returns at once (under 2 s)" test "$ms" -lt 2000
check_eq "willneed is an action: advice still reads normal" normal "$(get d/b $A)"
checkf "willneed decodes the whole file in the background" wait_cached d/b "$SIZE" 20
check "the prefetched blocks are counted" test "$(stat_of d/b blocks_prefetched)" -ge 1
check "a read after willneed is identical" cmp "$STATE/plain" "$MNT/d/b"
check "... and used the prefetched blocks" test "$(stat_of d/b prefetched_used)" -ge 1

check_eq "a fresh LZ4 file: nothing cached" 0 "$(get a user.blockfs.cached)"
check "willneed 0 1M" setfattr -n $A -v "willneed 0 1M" "$MNT/a"
checkf "willneed 0 1M decodes that range" wait_cached a 1048576 20
sleep 0.3
c=$(get a user.blockfs.cached)
check "... and not the rest of the file" test "$c" -lt "$SIZE"
check "willneed past the end: a no-op, no error" setfattr -n $A -v "willneed 1G 1M" "$MNT/a"

check "dontneed 0 512K" setfattr -n $A -v "dontneed 0 512K" "$MNT/a"
check_eq "dontneed 0 512K drops those 8 blocks" $((c - 524288)) "$(get a user.blockfs.cached)"
check "dontneed (whole file)" setfattr -n $A -v dontneed "$MNT/d/b"
check_eq "dontneed empties the file's cache" 0 "$(get d/b user.blockfs.cached)"
check_eq "dontneed is an action: advice still reads normal" normal "$(get d/b $A)"

# dontneed drops the kernel's pages too: a buffered re-read reaches blockfs.
cat "$MNT/d/e/raw.txt" >/dev/null
r1=$(stat_of d/e/raw.txt reads)
cat "$MNT/d/e/raw.txt" >/dev/null
r2=$(stat_of d/e/raw.txt reads)
check_eq "a buffered re-read is served by the kernel's page cache" "$r1" "$r2"
t setfattr -n $A -v dontneed "$MNT/d/e/raw.txt"
# A worker drops the kernel's pages, just after the setxattr returns (never
# a FUSE thread: it would wait for pages READs hold): re-read until it has.
for _ in $(seq 300); do
	cat "$MNT/d/e/raw.txt" >/dev/null
	r3=$(stat_of d/e/raw.txt reads)
	((r3 > r2)) && break
	sleep 0.1
done
check "after dontneed the re-read reaches blockfs" test "$r3" -gt "$r2"

# --- a directory's advice reaches files already open ------------------------
# d/e/c has a version since the counter checks; random must stop read-ahead
# for it, and sequential start it, without reopening anything. Read-ahead
# runs on nice 19 workers, which a busy machine may not run for a while:
# its count is polled, for up to 30 s.
seqread() {	# seqread FILE: 20 blocks in order, past the page cache
	t dd if="$MNT/$1" of=/dev/null bs=64k count=20 iflag=direct status=none
}
t setfattr -n $A -v random "$MNT/d"
t setfattr -n $A -v dontneed "$MNT/d/e/c"
p0=$(stat_of d/e/c blocks_prefetched)
seqread d/e/c
sleep 0.3
check_eq "directory advice random reaches a built file: no read-ahead" "$p0" \
	"$(stat_of d/e/c blocks_prefetched)"
t setfattr -n $A -v sequential "$MNT/d"
t setfattr -n $A -v dontneed "$MNT/d/e/c"
# Held open while polled: a reader's close cancels the read-ahead it queued,
# and dd can finish before a nice 19 worker has started any of it.
exec 7<"$MNT/d/e/c"
t dd of=/dev/null bs=64k count=20 iflag=direct status=none <&7
for _ in $(seq 300); do
	(($(stat_of d/e/c blocks_prefetched) > p0)) && break
	sleep 0.1
done
check "directory advice sequential reaches it: read-ahead" \
	test "$(stat_of d/e/c blocks_prefetched)" -gt "$p0"
exec 7<&-
t setfattr -x $A "$MNT/d"

# --- reads under every advice stay identical -------------------------------
for v in sequential random noreuse normal; do
	t setfattr -n $A -v $v "$MNT"
	t setfattr -n $A -v dontneed "$MNT/a"
	checkf "every file identical under advice $v" all_identical
done
t setfattr -x $A "$MNT"
for v in mmap auto; do
	t setfattr -n $R -v $v "$MNT"
	t setfattr -n $A -v dontneed "$MNT/a"
	checkf "every file identical with readpath $v" all_identical
done
t setfattr -x $R "$MNT"

# --- blockfs-stat -----------------------------------------------------------
if [[ -n "$STAT" ]]; then
	out=$(t "$STAT" "$MNT/a" 2>&1)
	check "blockfs-stat FILE: format, ratio, blocks, cached, hints, counters" bash -c '
		for w in "format *lz4" "ratio" "blocks *[0-9]" "cached" "advice *normal" \
			"readpath *pread" "reads" "cache_hits"; do
			grep -q "$w" <<<"$1" || { echo "no $w in: $1"; exit 1; }
		done' _ "$out"
	out=$(t "$STAT" "$MNT" 2>&1)
	check "blockfs-stat ROOT: the mount counters" bash -c '
		grep -q "mount counters" <<<"$1" && grep -q cache_limit <<<"$1"' _ "$out"
	if ((HAVE_PY)); then
		check "blockfs-stat --json is JSON with the numbers" bash -c '
			"$1" --json "$2/a" "$2/d" "$2" | python3 -c "
import json, sys
a, d, r = json.load(sys.stdin)
assert a[\"type\"] == \"file\" and a[\"format\"] == \"lz4\" and a[\"blocks\"] > 1, a
assert a[\"size\"] == int(sys.argv[1]) and a[\"ratio\"] > 0, a
assert \"reads\" in a[\"stats\"] and a[\"advice\"] == \"normal\", a
assert d[\"type\"] == \"directory\" and \"stats\" not in d, d
assert r[\"type\"] == \"root\" and \"cache_limit\" in r[\"stats\"], r
" "$3"' _ "$STAT" "$MNT" "$SIZE"
	fi
	out=$(t "$STAT" "$MNT/slow/big4m" 2>&1)
	check "blockfs-stat: a file of 4 MiB blocks gets a warning about random reads, and the fix" \
		bash -c 'grep -q "warning .*random reads.*slow.*blockfs-pack.*lz4 -B4" <<<"$1"' _ "$out"
	out=$(t "$STAT" "$MNT/a" 2>&1)
	check "... a file of 64 KiB blocks none" bash -c '! grep -q warning <<<"$1"' _ "$out"
	if ((HAVE_PY)); then
		check "... --json: the warning, or null" bash -c '
			"$1" --json "$2/slow/big4m" "$2/a" | python3 -c "
import json, sys
s, a = json.load(sys.stdin)
assert \"lz4 -B4\" in s[\"warning\"] and a[\"warning\"] is None, (s, a)
"' _ "$STAT" "$MNT"
	fi
	if ((HAVE_XZ)); then
		out=$(t "$STAT" "$MNT/slow/one" 2>&1)
		check "blockfs-stat: one xz block gets the layout and the -c xz command" bash -c '
			grep -q "warning  *one xz block of .* ($2) holds the whole file.* with: blockfs-pack -c xz -o one.xz $3\$" <<<"$1"' \
			_ "$out" "$SIZE" "$MNT/slow/one"
		out=$(t "$STAT" "$MNT/slow/blocks" 2>&1)
		check "... 1 MiB xz blocks none (their 2 MiB span size is no block size)" \
			bash -c '! grep -q warning <<<"$1"' _ "$out"
	fi
	check_fails "blockfs-stat on a path not on blockfs: message, exit 1" \
		"not on a blockfs mount" "$STAT" "$STATE/plain"
	rc=0
	t "$STAT" "$STATE/plain" >/dev/null 2>&1 || rc=$?
	check_eq "... exit status 1" 1 "$rc"
fi

checkf "every file still identical" all_identical
checkf "the daemon is alive" daemon_alive
rc=0
bfs_umount || rc=$?
check_eq "clean unmount, daemon exit 0" 0 "$rc"

# --- -o ro: hints refused too (blockfs(8), READ-ONLY) ------------------------
if bfs_mount "$SRC" "$MNT" "$STATE/daemon-ro.log" ro; then
	check_fails "-o ro: setting a hint fails with EROFS" "Read-only file system" \
		setfattr -n $A -v random "$MNT/a"
	check_fails "-o ro: removing a hint fails with EROFS" "Read-only file system" \
		setfattr -x $A "$MNT/a"
	check_eq "-o ro: hints still read" normal "$(get a $A)"
	rc=0
	bfs_umount || rc=$?
	check_eq "-o ro: clean unmount" 0 "$rc"
else
	not_ok "mount -o ro"
fi

# --- willneed=kernel (the default): decoded pages go to the kernel's page cache ---
# wait_pushed FILE BYTES SECONDS: poll pushed_bytes. (Not blocks_prefetched:
# a block that straddles two 1 MiB pushes, as BGZF's 65280-byte blocks do,
# is decoded and counted by both, so that count is reached early.)
wait_pushed() {
	local deadline=$((SECONDS + $3)) v
	while :; do
		v=$(stat_of "$1" pushed_bytes)
		((${v:-0} >= $2)) && return 0
		((SECONDS >= deadline)) && {
			echo "pushed_bytes $v after $3 s, wanted >= $2"
			return 1
		}
		sleep 0.05
	done
}
if bfs_mount "$SRC" "$MNT" "$STATE/daemon-kernel.log" readpath=pread; then
	for f in a d/b; do
		size=$(t stat -c %s "$MNT/$f")
		# Held open throughout: an inode nobody holds may be reclaimed with
		# its pages by a test beside this one (echo 2 > drop_caches).
		exec 7<"$MNT/$f"
		check "willneed=kernel $f: setfattr willneed returns" setfattr -n $A -v willneed "$MNT/$f"
		checkf "willneed=kernel $f: all $size bytes decoded and pushed" wait_pushed "$f" "$size" 30
		check "willneed=kernel $f: the file reads back identical" cmp "$STATE/plain" "$MNT/$f"
		# The kernel had every page: not one read reached the daemon.
		check_eq "willneed=kernel $f: reads that reached blockfs" 0 "$(stat_of "$f" reads)"
		exec 7<&-
	done
	check_eq "willneed=kernel: blockfs keeps (almost) none of it itself" 1 \
		"$(( $(get a user.blockfs.cached) <= 65536 ))"
	rc=0
	bfs_umount || rc=$?
	check_eq "willneed=kernel: clean unmount" 0 "$rc"
else
	not_ok "mount -o willneed=kernel"
fi

bfs_end
