#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What copy tools make of a mount, on real mounts:
# - a backing inode with several names, shown decoded under some and
#   unchanged under others: each view has its own stable st_ino, readdir's
#   d_ino agrees with stat, st_nlink counts only names that show the same
#   bytes, and cp -a, tar -c | tar -x and rsync -aH copy every name byte for
#   byte (raw names get the raw bytes, decoded names the decoded ones),
#   keeping the hard links that are real;
# - a size query of an attribute answers the length of the get that
#   follows, also for counters that a reader keeps changing, so rsync -aX
#   copies the tree;
# - listxattr lists no computed user.blockfs.* name, so cp -a, rsync -aX
#   and tar --xattrs copy only the hints set and the backing attributes,
#   and blockfs-stat refuses a copy that carries such attributes;
# - SEEK_DATA/SEEK_HOLE: a sparse raw file's holes are the backing file's,
#   so cp copies it sparse and reads only its data.
#
# Usage: copies.sh BLOCKFS BLOCKFS_STAT      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: copies.sh BLOCKFS BLOCKFS_STAT}")
STAT=$(realpath "${2:?usage: copies.sh BLOCKFS BLOCKFS_STAT}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin copies lz4 bgzip python3 tar rsync cmp getfattr setfattr

S=$T/src M=$T/mnt O=$T/orig
mkdir -p "$S" "$M" "$O"

mount_or_die() {
	if ! bfs_mount "$S" "$M" "$T/daemon.log" "$1"; then
		not_ok "mount ($1)" "daemon exit status: ${BFS_EXIT:-none}"
		exit 1
	fi
}

# --- the tree -----------------------------------------------------------------

seq 1 200000 > "$O/text"
seq 500000 600000 > "$O/other"
# One LZ4 inode, three names: two shown decoded (a.txt, b.txt), one raw.
lz4 -q "$O/text" "$S/a.txt.lz4"
ln "$S/a.txt.lz4" "$S/b.txt.lz4"
ln "$S/a.txt.lz4" "$S/raw_c"
# One BGZF inode: decoded as d, raw as d_raw.
bgzip -c "$O/other" > "$S/d.gz"
ln "$S/d.gz" "$S/d_raw"
# Plain hard links: both raw, really the same bytes.
cp "$O/other" "$S/p1"
ln "$S/p1" "$S/p2"
echo single > "$S/single"

# --- inode numbers and link counts ----------------------------------------------

mount_or_die readpath=pread

ino() { stat -c %i "$1"; }
links() { stat -c %h "$1"; }

check_eq "a decoded view and a raw view of one inode: different st_ino" different \
	"$([[ $(ino "$M/a.txt") != $(ino "$M/raw_c") ]] && echo different || echo same)"
check_eq "... for BGZF too" different \
	"$([[ $(ino "$M/d") != $(ino "$M/d_raw") ]] && echo different || echo same)"
check_eq "the raw view keeps the backing st_ino" "$(ino "$S/raw_c")" "$(ino "$M/raw_c")"
check_eq "plain hard links share st_ino" "$(ino "$M/p1")" "$(ino "$M/p2")"
check_eq "plain hard links: st_nlink 2" 2 "$(links "$M/p1")"
check_eq "a decoded view: st_nlink 1" 1 "$(links "$M/a.txt")"
check_eq "a raw name of an inode shown decoded elsewhere: st_nlink 1" 1 "$(links "$M/raw_c")"
check_eq "... BGZF: st_nlink 1" 1 "$(links "$M/d_raw")"

# readdir's d_ino against stat's st_ino, for every entry.
dino_vs_stat() {
	python3 - "$1" <<'PY'
import os, sys
bad = [e.name for e in os.scandir(sys.argv[1])
       if e.inode() != os.stat(e.path, follow_symlinks=False).st_ino]
print(" ".join(bad) if bad else "agree")
PY
}
check_eq "readdir d_ino agrees with st_ino for every entry" agree "$(dino_vs_stat "$M")"
BEFORE=$(stat -c '%n %i' "$M"/*)
echo 2 > /proc/sys/vm/drop_caches	# the kernel forgets the inodes it can
check_eq "st_ino stable after the kernel forgets the inodes" "$BEFORE" "$(stat -c '%n %i' "$M"/*)"
bfs_umount
check_eq "unmount, exit 0" 0 "$?"
mount_or_die readpath=mmap
check_eq "st_ino stable across mounts" "$BEFORE" "$(stat -c '%n %i' "$M"/*)"

# --- copies ---------------------------------------------------------------------

# copied_right DST: every name holds what the mount shows, and what it
# should show: the decoded bytes under decoded names, the backing bytes
# under raw ones.
copied_right() {
	local d=$1 f
	for f in a.txt b.txt raw_c d d_raw p1 p2 single; do
		cmp -s "$M/$f" "$d/$f" || { echo "$f differs from the mount"; return 1; }
	done
	# shellcheck disable=SC2015 # the || branch is for any of the cmps failing
	cmp -s "$O/text" "$d/a.txt" && cmp -s "$O/text" "$d/b.txt" &&
		cmp -s "$S/a.txt.lz4" "$d/raw_c" && cmp -s "$O/other" "$d/d" &&
		cmp -s "$S/d.gz" "$d/d_raw" && cmp -s "$O/other" "$d/p1" ||
		{ echo "a copy holds the other view's bytes"; return 1; }
}
p_linked() {
	[[ $(ino "$1/p1") == $(ino "$1/p2") ]]
}

t cp -a "$M" "$T/cp"
is "cp -a: every name byte for byte" copied_right "$T/cp"
is "cp -a: the real hard link kept" p_linked "$T/cp"

mkdir "$T/tar"
t tar -C "$M" -cf - . | tar -C "$T/tar" -xf -
is "tar -c | tar -x: every name byte for byte" copied_right "$T/tar"
is "tar: the real hard link kept" p_linked "$T/tar"

t rsync -aH "$M/" "$T/rsync/"
is "rsync -aH: every name byte for byte" copied_right "$T/rsync"
is "rsync -aH: the real hard link kept" p_linked "$T/rsync"

# --- attribute sizes -------------------------------------------------------------
#
# xattr(7): the length a size query answers is the length of the get that
# follows. rsync -X and getfattr ask, then read with a buffer of exactly
# that length, and fail on any difference (rsync: "lgetxattr(...) returned
# 1"), also for the counters that change while a reader runs.

sizes_exact() {
	python3 - "$M" <<'PY'
import ctypes, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.getxattr.restype = ctypes.c_ssize_t
libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
m = sys.argv[1]
stop = False

def reader():			# keeps reads, bytes and cached moving
    while not stop:
        with open(os.path.join(m, "a.txt"), "rb") as f:
            while f.read(1 << 16):
                pass
        os.setxattr(os.path.join(m, "a.txt"), "user.blockfs.advice", b"dontneed")

th = threading.Thread(target=reader)
th.start()
bad = []
try:
    for path, names in (("a.txt", ("format", "compressed_size", "block_size", "blocks",
                                   "cached", "stats", "advice", "readpath")),
                        (".", ("stats", "advice"))):
        p = os.path.join(m, path).encode()
        for name in names:
            n = ("user.blockfs." + name).encode()
            for _ in range(300):
                want = libc.getxattr(p, n, None, 0)
                buf = ctypes.create_string_buffer(max(want, 1))
                got = libc.getxattr(p, n, buf, want)
                if got != want:
                    err = os.strerror(ctypes.get_errno()) if got < 0 else ""
                    bad.append("%s %s: asked %d, got %d %s" % (path, name, want, got, err))
                    break
finally:
    stop = True
    th.join()
print("\n".join(bad) if bad else "exact")
PY
}
check_eq "a size query answers the length the next get returns (counters moving)" exact \
	"$(sizes_exact)"

check "rsync -aX copies the tree" rsync -aX "$M/" "$T/rsyncx/"
is "rsync -aX: every name byte for byte" copied_right "$T/rsyncx"

# --- which attributes copies carry ---------------------------------------------
#
# The computed user.blockfs.* values (format, sizes, cached, stats) are read
# by name and never listed, so copies carry only real attributes: the hints
# set on a path, and the backing file's own.

bfs_names() {	# bfs_names PATH...: the user.blockfs.* names listxattr gives
	t getfattr --absolute-names -R -d -m '^user\.blockfs\.' "$@" 2>/dev/null |
		sed -n 's/^\(user\.blockfs\.[^=]*\)=.*/\1/p' | sort | tr '\n' ' '
}
setfattr -n user.origin -v backing "$S/p1" 2>/dev/null && HAVE_USER_XATTR=1 || HAVE_USER_XATTR=0
t setfattr -n user.blockfs.advice -v random "$M/single"
check_eq "listxattr lists only the hint set on single" "user.blockfs.advice " "$(bfs_names "$M")"
check_eq "getfattr -n still reads a computed name" lz4 \
	"$(t getfattr --absolute-names --only-values -n user.blockfs.format "$M/a.txt")"
t cp -a "$M" "$T/cpx"
check_eq "cp -a: the copy carries the set hint only" "user.blockfs.advice " \
	"$(bfs_names "$T/cpx")"
rm -rf "$T/rsyncx"
t rsync -aX "$M/" "$T/rsyncx/"
check_eq "rsync -aX: the set hint only" "user.blockfs.advice " "$(bfs_names "$T/rsyncx")"
mkdir "$T/tarx"
t tar --xattrs -C "$M" -cf - . | tar --xattrs -C "$T/tarx" -xf -
check_eq "tar --xattrs: the set hint only" "user.blockfs.advice " "$(bfs_names "$T/tarx")"
if ((HAVE_USER_XATTR)); then
	check_eq "cp -a: the backing file's own attribute is copied" backing \
		"$(t getfattr --absolute-names --only-values -n user.origin "$T/cpx/p1" 2>&1)"
fi
t setfattr -x user.blockfs.advice "$M/single"
# A copy elsewhere with user.blockfs.* attributes is still not on blockfs.
t setfattr -n user.blockfs.format -v bgzf "$T/cpx/b.txt"
check_fails "blockfs-stat on a copy with user.blockfs.* attributes: refused" \
	"not on a blockfs mount" "$STAT" "$T/cpx/b.txt"
rc=0
t "$STAT" "$T/cpx/b.txt" >/dev/null 2>&1 || rc=$?
check_eq "... exit status 1" 1 "$rc"
check "blockfs-stat on the mount still works" "$STAT" "$M/b.txt" "$M"

# --- holes -----------------------------------------------------------------------
#
# SEEK_DATA/SEEK_HOLE on a file shown unchanged ask the backing file, so cp
# keeps a sparse file sparse and reads only its data; a decoded file is
# all data up to its size.

holes() {	# holes FILE: the data segments SEEK_DATA/SEEK_HOLE give, or the error
	python3 - "$1" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size, off, segs = os.fstat(fd).st_size, 0, []
try:
    while off < size:
        try:
            d = os.lseek(fd, off, os.SEEK_DATA)
        except OSError as e:
            segs.append("ENXIO" if e.errno == 6 else e.strerror)
            break
        h = os.lseek(fd, d, os.SEEK_HOLE)
        segs.append("%d-%d" % (d, h))
        off = h
    try:
        os.lseek(fd, size, os.SEEK_DATA)
        segs.append("data at EOF")
    except OSError as e:
        segs.append("EOF:" + ("ENXIO" if e.errno == 6 else e.strerror))
finally:
    os.close(fd)
print(" ".join(segs))
PY
}
sparse_stats_bytes() {
	t getfattr --absolute-names --only-values -n user.blockfs.stats "$1" |
		awk '$1 == "bytes" { print $2 }'
}
check_eq "a decoded file: one data segment, ENXIO at its end" \
	"0-$(stat -c %s "$O/text") EOF:ENXIO" "$(holes "$M/a.txt")"
bfs_umount
truncate -s 64M "$S/sparse"
dd if=/dev/urandom of="$S/sparse" bs=1M count=1 seek=10 conv=notrunc status=none
dd if=/dev/urandom of="$S/sparse" bs=1M count=1 seek=40 conv=notrunc status=none
mount_or_die readpath=pread
check_eq "a sparse raw file: the backing file's data segments" "$(holes "$S/sparse")" \
	"$(holes "$M/sparse")"
t cp "$M/sparse" "$T/sparse-cp"
check "cp of it: the same bytes" cmp "$S/sparse" "$T/sparse-cp"
check_eq "... a sparse copy (du as the backing file's)" "$(du -k "$S/sparse" | cut -f1)" \
	"$(du -k "$T/sparse-cp" | cut -f1)"
n=$(sparse_stats_bytes "$M/sparse")
if ((n > 0 && n <= 16 << 20)); then	# a quarter: read-ahead reads around the data
	ok "... reading only the data: the daemon served $n bytes of 64 MiB"
else
	not_ok "... reading only the data" "the daemon served $n bytes of 64 MiB"
fi
t cp --sparse=always "$M/sparse" "$T/sparse-always"
check "cp --sparse=always: the same bytes" cmp "$S/sparse" "$T/sparse-always"

bfs_umount
check_eq "unmount, exit 0" 0 "$?"
bfs_end
