#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# -o index_cache=DIR across remounts: a stock lz4 -B4 file and a BGZF file
# without .gzi are walked once, and after a remount their first stat(2)
# costs at most 10 backing reads (backing_syscalls of user.blockfs.stats)
# and reads back byte-exact. Entries that are stale, truncated,
# bit-flipped, of another file, or of a file replaced by one with the same
# size and mtime (but another ctime or inode) are ignored: the file is
# walked again and still reads exact. A read-only and a full cache
# directory degrade to no saving with exactly one log line; a directory
# others may write is refused at mount time. Directory memos: a remount
# lists and sizes a tree of small files with no probe, and a file
# rewritten in place, an added entry and damaged memos are seen. Without
# the option entries go to $XDG_CACHE_HOME/blockfs; index_cache=off
# keeps none; an unusable default place leaves the mount without a cache;
# index_cache_size drops the least recently used entries.
#
# Usage: index_cache.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: index_cache.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin index_cache lz4 bgzip getfattr
S=$T/src M=$T/mnt C=$T/cache W=$T/work RO=$T/ro FULL=$T/full
mkdir -p "$S" "$M" "$C" "$W" "$RO" "$FULL"
chmod 700 "$C"
bfs_at_exit bfs_lazy_umount "$FULL"
bfs_at_exit bfs_lazy_umount "$RO"

# 24 MiB that compresses about 4:3 (base64 of random bytes): 384 blocks of 64 KiB
head -c 18M /dev/urandom | base64 -w 76 >"$W/big"
head -c 3M /dev/urandom | base64 -w 76 >"$W/other"
lz4 -q -B4 "$W/big" "$S/big.lz4"
lz4 -q -B4 "$W/other" "$S/other.lz4"
bgzip -c "$W/big" >"$S/bg.gz"
cp "$W/big" "$W/bg"

# entry FILE: the cache entry of backing file FILE
entry() {
	printf '%s/%016x-%016x.idx' "$C" "$(stat -c %d "$S/$1")" "$(stat -c %i "$S/$1")"
}

mount_c() {
	bfs_mount "$S" "$M" "$T/daemon.log" "index_cache=$1" || {
		not_ok "mount with index_cache=$1"
		show_log
		exit 1
	}
}

umount_c() {
	bfs_umount
	check_eq "unmount; daemon exits 0" 0 "$?"
}

# remount_source FILE: mount, FILE's index_source into REPLY, unmount
remount_source() {
	mount_c "$C"
	REPLY=$(xattr index_source "$1")
	umount_c
}

# --- the first mount walks and keeps -----------------------------------------
mount_c "$C"
t stat "$M/big" "$M/other" "$M/bg" >/dev/null
check_eq "first mount: big walked" lz4-walk "$(xattr index_source big)"
check_eq "first mount: bg walked" bgzf-walk "$(xattr index_source bg)"
n=$(reads big)
chunks=$(($(stat -c %s "$S/big.lz4") / 1048576 + 1))
if ((n >= 2 && n <= chunks + 4)); then
	ok "first mount: the walk of big read it in $n requests of up to 1 MiB"
else
	not_ok "walk reads: $n (the file is $chunks MiB)"
fi
umount_c
for f in big.lz4 other.lz4 bg.gz; do
	is "entry kept for $f" test -s "$(entry "$f")"
done
check_eq "no temporary files left" "" "$(find "$C" -name '.tmp*')"

# --- remount: the first stat costs a few reads --------------------------------
mount_c "$C"
check_eq "remount: big's size from the first stat" "$(stat -c %s "$W/big")" "$(t stat -c %s "$M/big")"
n=$(reads big)
if ((n <= 10)); then ok "remount: first stat of big: $n backing reads (<= 10)"; else
	not_ok "remount: first stat of big: $n backing reads (> 10)"; fi
check_eq "remount: big from the cache" cache "$(xattr index_source big)"
n=$(reads bg)
if ((n <= 10)); then ok "remount: first stat of bg: $n backing reads (<= 10)"; else
	not_ok "remount: first stat of bg: $n backing reads (> 10)"; fi
check_eq "remount: bg from the cache" cache "$(xattr index_source bg)"
check "remount: big reads exact" cmp "$M/big" "$W/big"
check "remount: bg reads exact" cmp "$M/bg" "$W/bg"
# shellcheck disable=SC2016 # the script's own arguments
check "remount: random ranges of big" bash -c '
	for o in 0 65535 65536 1000000 7777777 12345678 24000000; do
		cmp <(dd if="$1" iflag=skip_bytes,count_bytes bs=64k skip=$o count=70000 2>/dev/null) \
		    <(dd if="$2" iflag=skip_bytes,count_bytes bs=64k skip=$o count=70000 2>/dev/null) ||
			exit 1
	done' _ "$M/big" "$W/big"
umount_c

# ignored FILE WHY: after damage to FILE's entry, FILE is walked again and reads exact
ignored() {
	local f=$1 why=$2 src
	mount_c "$C"
	src=$(xattr index_source "$f")
	if [[ "$src" == *-walk ]]; then ok "$why: entry ignored ($src)"; else
		not_ok "$why: entry ignored" "index_source: $src"; fi
	check "$why: $f reads exact" cmp "$M/$f" "$W/$f"
	umount_c
}

# stale: the file was touched (mtime and ctime move)
touch "$S/big.lz4"
ignored big "stale entry"
remount_source big
check_eq "stale entry rewritten" cache "$REPLY"

# truncated, bit-flipped
e=$(entry big.lz4)
truncate -s $(($(stat -c %s "$e") / 2)) "$e"
ignored big "truncated entry"
e=$(entry big.lz4)
printf '\x5a' | dd of="$e" bs=1 seek=$(($(stat -c %s "$e") / 3)) conv=notrunc 2>/dev/null
ignored big "bit-flipped entry"

# foreign: another file's entry under big's name
cp "$(entry other.lz4)" "$(entry big.lz4)"
ignored big "another file's entry"
remount_source other
check_eq "other still from the cache" cache "$REPLY"

# another codec's entry under this file's name
cp "$(entry bg.gz)" "$(entry big.lz4)"
ignored big "another codec's entry"

# Replaced by a file of the same size and mtime. Random bytes are stored
# uncompressed by lz4, so any 8 MiB of them make a file of one size.
head -c 8M /dev/urandom >"$W/rnd"
lz4 -q -B4 "$W/rnd" "$S/rnd.lz4"
remount_source rnd
check_eq "rnd walked and kept" lz4-walk "$REPLY"
sz=$(stat -c %s "$S/rnd.lz4")
mtime=$(stat -c %y "$S/rnd.lz4")
head -c 8M /dev/urandom >"$W/rnd"
lz4 -q -B4 "$W/rnd" "$T/rnd2.lz4"
check_eq "the new content has the old size" "$sz" "$(stat -c %s "$T/rnd2.lz4")"
# in place: the same inode, mtime put back, ctime moves
sleep 0.05
dd if="$T/rnd2.lz4" of="$S/rnd.lz4" bs=1M conv=notrunc 2>/dev/null
touch -d "$mtime" "$S/rnd.lz4"
check_eq "rewritten in place: mtime kept" "$mtime" "$(stat -c %y "$S/rnd.lz4")"
mount_c "$C"
check_eq "same size and mtime, new ctime: entry ignored" lz4-walk "$(xattr index_source rnd)"
check "same size and mtime, new ctime: reads the new content" cmp "$M/rnd" "$W/rnd"
umount_c
remount_source rnd
check_eq "entry for the new content kept" cache "$REPLY"
# by rename: another inode, same size and mtime (and the new inode's own entry is absent)
head -c 8M /dev/urandom >"$W/rnd"
lz4 -q -B4 "$W/rnd" "$S/.rnd.new"
touch -d "$mtime" "$S/.rnd.new"
mv "$S/.rnd.new" "$S/rnd.lz4"
mount_c "$C"
check_eq "replaced by rename (new inode, same size and mtime): walked" lz4-walk \
	"$(xattr index_source rnd)"
check "replaced by rename: reads the new content" cmp "$M/rnd" "$W/rnd"
umount_c

# --- a cache directory that cannot be written ---------------------------------
rm -f "$C"/*.idx
if mount -t tmpfs -o ro,size=1m,mode=0700 tmpfs "$RO" 2>/dev/null; then
	mount_c "$RO"
	t stat "$M/big" "$M/other" "$M/bg" >/dev/null
	check "read-only cache: big reads exact" cmp "$M/big" "$W/big"
	umount_c
	check_eq "read-only cache: exactly one log line" 1 \
		"$(grep -c 'cannot write entries' "$T/daemon.log")"
else
	diag "cannot mount a read-only tmpfs: read-only case skipped"
fi
if mount -t tmpfs -o size=64k,mode=0700 tmpfs "$FULL" 2>/dev/null; then
	dd if=/dev/zero of="$FULL/fill" bs=4k 2>/dev/null
	mount_c "$FULL"
	t stat "$M/big" "$M/other" "$M/bg" >/dev/null
	check "full cache: bg reads exact" cmp "$M/bg" "$W/bg"
	umount_c
	check_eq "full cache: exactly one log line" 1 \
		"$(grep -c 'cannot write entries' "$T/daemon.log")"
	check_eq "full cache: no temporary left" "" "$(find "$FULL" -name '.tmp*')"
else
	diag "cannot mount a tmpfs: full-cache case skipped"
fi

# --- directory memos ------------------------------------------------------------
# A tree of small lz4 -m files: the sizes ls -lR's lookups found are kept
# as DEV-INO.dir, and a remount lists and sizes the tree opening no file;
# a file rewritten in place, an entry added, a flipped and a truncated
# memo are each seen and still show right.
DT=$T/tree DO=$T/tree-orig DC=$T/dcache
mkdir -p "$DT/d1" "$DT/d2" "$DO/d1" "$DO/d2" "$DC"
chmod 700 "$DC"
for i in $(seq 1 40); do
	head -c $((i * 211)) "$W/other" >"$DO/d1/f$i"
	tail -c $((i * 307)) "$W/other" >"$DO/d2/g$i"
done
cp -r "$DO/." "$DT"
lz4 -q -m --rm "$DT"/d1/* "$DT"/d2/*
echo plain >"$DT/d2/plain.txt"
cp "$DT/d2/plain.txt" "$DO/d2/plain.txt"
sleep 0.1	# older than the 50 ms a snapshot of a just-changed directory is not kept

# names and sizes as shown under $M (or the originals under $1)
shown() {
	(cd "${1:-$M}" && find . -type f -printf '%p %s\n' | sort)
}

# stat_of NAME: a row of the mount root's stats
stat_of() {
	t getfattr --only-values -n user.blockfs.stats "$M" 2>/dev/null |
		awk -v k="$1" '$1 == k { print $2 }'
}

# dir_mount: mount the tree with the memo cache; list it (ls -lR); compare
dir_mount() {
	bfs_mount "$DT" "$M" "$T/daemon.log" "index_cache=$DC" || {
		not_ok "mount the tree with index_cache"
		show_log
		exit 1
	}
	t ls -lR "$M" >/dev/null
	check_eq "$1: names and sizes as the originals" "$(shown "$DO")" "$(shown)"
}

# memo DIR: the memo file of backing directory DIR
memo() {
	printf '%s/%016x-%016x.dir' "$DC" "$(stat -c %d "$DT/$1")" "$(stat -c %i "$DT/$1")"
}

dir_mount "memos, first mount"
check "memos, first mount: the lookups opened every lz4 file ($(stat_of lookup_opens))" \
	test "$(stat_of lookup_opens)" -ge 80
umount_c
is "memos: kept for d1" test -s "$(memo d1)"
is "memos: kept for d2" test -s "$(memo d2)"

dir_mount "memos, remount"
check_eq "memos, remount: no file opened" 0 "$(stat_of lookup_opens)"
# (a directory read ahead beside a lookup may take its memo up twice)
check "memos, remount: both memos taken up ($(stat_of dir_memos))" test "$(stat_of dir_memos)" -ge 2
same=0
for i in $(seq 1 40); do
	cmp -s "$DO/d1/f$i" "$M/d1/f$i" && cmp -s "$DO/d2/g$i" "$M/d2/g$i" && same=$((same + 1))
done
check_eq "memos, remount: every file reads exact" 40 "$same"
umount_c

# rewritten in place: same inode, the directory's times unchanged
head -c 9000 "$W/big" >"$DO/d1/f7"
lz4 -q -c "$DO/d1/f7" >"$DT/d1/f7.lz4"
dir_mount "memos, a file rewritten in place"
check "memos, rewritten: its new bytes" cmp "$DO/d1/f7" "$M/d1/f7"
check_eq "memos, rewritten: the memo still used for the rest" 2 "$(stat_of dir_memos)"
check_eq "memos, rewritten: only it opened again" 1 "$(stat_of lookup_opens)"
umount_c

# an entry added: the directory changed, its memo is not used
head -c 5000 "$W/big" >"$DO/d2/new"
lz4 -q -c "$DO/d2/new" >"$DT/d2/new.lz4"
sleep 0.1
dir_mount "memos, an entry added"
check_eq "memos, added: only the unchanged directory's memo used" 1 "$(stat_of dir_memos)"
umount_c

# damaged memos are ignored
m1=$(memo d1)
printf '\xff' | dd of="$m1" bs=1 seek=100 conv=notrunc status=none
truncate -s -1 "$(memo d2)"
dir_mount "memos, one flipped, one truncated"
check_eq "memos, damaged: neither used" 0 "$(stat_of dir_memos)"
umount_c

# --- the default place, off, and the bound ---------------------------------------
# Without index_cache the daemon keeps entries in $XDG_CACHE_HOME/blockfs
# (lib.sh sets XDG_CACHE_HOME to one of the test's own); index_cache=off
# keeps none; a default place that cannot be used leaves the mount without
# a cache, with one line saying why; past index_cache_size the least
# recently used entries are dropped.
D=$XDG_CACHE_HOME/blockfs
# dentry DIR FILE: FILE's entry in cache directory DIR
dentry() {
	printf '%s/%016x-%016x.idx' "$1" "$(stat -c %d "$S/$2")" "$(stat -c %i "$S/$2")"
}
# mount_o OPTS [ENV...]: mount with OPTS, in an environment changed by ENV (env(1) words)
mount_o() {
	local o=$1
	shift
	BFS_WRAP="env $*" bfs_mount "$S" "$M" "$T/daemon.log" "$o" || {
		not_ok "mount with -o $o $*"
		show_log
		exit 1
	}
}
mount_o verify=on
t stat "$M/big" >/dev/null
check_eq "default place: big walked" lz4-walk "$(xattr index_source big)"
umount_c
is "default place: entry kept in \$XDG_CACHE_HOME/blockfs" test -s "$(dentry "$D" big.lz4)"
check_eq "default place: made mode 0700" 700 "$(stat -c %a "$D")"
mount_o verify=on
check_eq "default place, remount: big from the cache" cache "$(xattr index_source big)"
check "default place, remount: big reads exact" cmp "$M/big" "$W/big"
umount_c

mount_o index_cache=off XDG_CACHE_HOME="$T/xdg-off"
t stat "$M/big" >/dev/null
check_eq "index_cache=off: big walked" lz4-walk "$(xattr index_source big)"
umount_c
is "index_cache=off: no cache directory made" test ! -e "$T/xdg-off"

mkdir -p "$T/xdg-shared/blockfs"
chmod 777 "$T/xdg-shared/blockfs"
mount_o verify=on XDG_CACHE_HOME="$T/xdg-shared"
check "default place others may write: still mounted, big reads exact" cmp "$M/big" "$W/big"
umount_c
check_eq "default place others may write: one line says why" 1 \
	"$(grep -c 'no index cache: .*written by others' "$T/daemon.log")"
is "default place others may write: nothing kept there" \
	test ! -e "$(dentry "$T/xdg-shared/blockfs" big.lz4)"
mount_o verify=on -u HOME -u XDG_CACHE_HOME
check "neither HOME nor XDG_CACHE_HOME: big reads exact" cmp "$M/big" "$W/big"
umount_c
check_eq "neither HOME nor XDG_CACHE_HOME: nothing said" 0 \
	"$(grep -c 'index cache' "$T/daemon.log")"

# big's entry is 9348 bytes (384 blocks), other's about 1.6 KiB: with a
# bound of 10K, keeping other drops big, the least recently used.
B=$T/bound
mkdir -m 700 "$B"
mount_o "index_cache=$B,index_cache_size=10K"
t stat "$M/big" >/dev/null
t stat "$M/other" >/dev/null
check "bound: big reads exact" cmp "$M/big" "$W/big"
umount_c
is "bound: other's entry kept" test -s "$(dentry "$B" other.lz4)"
is "bound: big's, used least recently, dropped" test ! -e "$(dentry "$B" big.lz4)"
used=$(find "$B" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
if ((used <= 10240)); then ok "bound: $used bytes kept (<= 10K)"; else
	not_ok "bound: $used bytes kept (> 10K)"; fi
rm -f "$B"/*
mount_o "index_cache=$B,index_cache_size=4K"
t stat "$M/big" "$M/other" >/dev/null
umount_c
is "bound: an entry larger than the bound is not kept" test ! -e "$(dentry "$B" big.lz4)"
is "bound: a smaller one is" test -s "$(dentry "$B" other.lz4)"

# --- refused at mount time ------------------------------------------------------
chmod 777 "$C"
check_fails "a cache directory others may write is refused" "written by others" \
	"$BLOCKFS" -f "$S" "$M" -o "index_cache=$C"
chmod 700 "$C"
check_fails "a missing cache directory is refused" "index_cache directory" \
	"$BLOCKFS" -f "$S" "$M" -o "index_cache=$T/nonexistent"
check_fails "an empty index_cache= is refused" "bad value '' for option index_cache" \
	"$BLOCKFS" -f "$S" "$M" -o "index_cache="

bfs_end
