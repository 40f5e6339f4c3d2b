#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Trees on real mounts: what blockfs remembers about names and sizes must
# never outlive a change on the backing side.
# - -o entry_timeout= / attr_timeout=: bad values refused naming the
#   option, exit 1, nothing mounted; good ones mount.
# - a tree changed on the backing side (a file added where a lookup had
#   just failed, removed, renamed, replaced by rename, rewritten in place
#   with another size, rewritten from lz4 to plain text (same name, reads
#   fail with EIO), a directory
#   renamed) is seen within the timeout (default 10 s, 1 s, and at once
#   with 0), and
#   an open never shows a stale size or stale bytes, whatever the timeout;
# - 100,000 small lz4 files in 100 directories under a limit of 4000
#   descriptors: ls -lR lists them all with their sizes and every byte
#   reads back, the daemon's descriptors stay within its budget, and its
#   RSS stays bounded (not under a sanitizer);
# - the same tree after the kernel's caches are dropped: find lists the
#   same names and opens no backing file (lookup_opens on the root), within
#   the descriptor budget;
# - -o max_inodes=10000: ls -lR of the tree lists every file, directories
#   are forgotten (dirs_forgotten), the inodes kept come down to the bound
#   and two directories' files, and every file still reads back;
# - files read again after the ring of idle versions turned: no backing
#   read but for reads that reach blockfs, no lookup open; a file replaced
#   between an open and its first read gives EIO or the old bytes;
# - -o readdirplus=16, off and on: find of a 1000-file directory makes at
#   most 16 files' inodes, none, or all of them; ls -l sizes them all and
#   every byte reads back; bad values are refused. readdirplus=auto (the
#   default): find makes no file's inode until files listed are read,
#   then every file's inode, and none again after 7000 names unused.
# - a directory of 40 names made to collide in the snapshot's name hash:
#   listed by their stems, each reads back, a missing name is ENOENT.
#
# Usage: trees.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: trees.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin trees lz4 python3 mountpoint
# Debian's python3-lz4 is python-lz4; it lives with Debian's interpreter.
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
"$PY" -c 'import lz4.frame' 2>/dev/null || skip "no python lz4 module (Debian: python3-lz4)"

S=$T/src M=$T/mnt
mkdir -p "$S" "$M"

# Each mount is a first mount (index_cache=off): what memos carry from one
# mount to the next is index_cache.sh's.
mount_or_die() {
	if ! bfs_mount "$S" "$M" "$T/daemon.log" "index_cache=off${1:+,$1}"; then
		not_ok "mount ($1)" "daemon exit status: ${BFS_EXIT:-none}"
		show_log
		exit 1
	fi
}

umount_ok() {
	local rc=0
	bfs_umount || rc=$?
	check_eq "unmount ($1), exit 0" 0 "$rc"
}

# --- the options' values ---------------------------------------------------------

for opt in entry_timeout attr_timeout negative_timeout; do
	for bad in -1 abc 1s inf nan "" 0x10 " 1" 1e3 5000000000; do
		check_fails "$opt='$bad' is refused, naming the option" \
			"bad value '$bad' for option $opt" "$BLOCKFS" -f -o "$opt=$bad" "$S" "$M"
	done
	rc=0
	"$BLOCKFS" -f -o "$opt=-1" "$S" "$M" >/dev/null 2>&1 || rc=$?
	check_eq "$opt=-1: exit status 1" 1 "$rc"
	is "... and nothing mounted" bash -c "! mountpoint -q '$M'"
done
for bad in 0 -1 abc "" 1x ON 5000000000; do
	check_fails "readdirplus='$bad' is refused, naming the option" \
		"bad value '$bad' for option readdirplus" "$BLOCKFS" -f -o "readdirplus=$bad" "$S" "$M"
done
check "blockfs -h lists entry_timeout, attr_timeout and negative_timeout" \
	bash -c "'$BLOCKFS' -h 2>&1 | grep -q 'entry_timeout=SECONDS' &&
		 '$BLOCKFS' -h 2>&1 | grep -q 'attr_timeout=SECONDS' &&
		 '$BLOCKFS' -h 2>&1 | grep -q 'negative_timeout=SECONDS'"
for good in entry_timeout=0,attr_timeout=0 entry_timeout=0.5 attr_timeout=3600 \
	negative_timeout=2.5; do
	mount_or_die "$good"
	ok "$good mounts"
	umount_ok "$good"
done

# --- a tree that changes on the backing side ----------------------------------------

# mk NAME TEXT: NAME.lz4 in SOURCE holding TEXT, as lz4 -B4 writes it, by rename.
mk() {
	printf '%s' "$2" >"$T/plain.tmp"
	lz4 -q -f -B4 "$T/plain.tmp" "$T/new.lz4"
	mv "$T/new.lz4" "$S/$1.lz4"
}
# seen_within SECONDS CMD...: CMD succeeds within SECONDS (and the slack of
# a busy machine: 1.5 s more); prints how long it took.
seen_within() {
	local limit=$1 t0 dt
	shift
	t0=$(date +%s%N)
	while :; do
		if "$@" >/dev/null 2>&1; then
			dt=$((($(date +%s%N) - t0) / 1000000))
			echo "${dt} ms"
			return 0
		fi
		dt=$((($(date +%s%N) - t0) / 1000000))
		if ((dt > limit * 1000 + 1500)); then
			echo "not after ${dt} ms"
			return 1
		fi
		sleep 0.05
	done
}
gone() { ! stat "$1" >/dev/null 2>&1; }
has() { [[ "$(cat "$1" 2>/dev/null)" == "$2" ]]; }
# open_sees PATH TEXT: one open: fstat's size and the bytes read are TEXT's.
open_sees() {
	python3 - "$1" "$2" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
data = os.read(fd, 1 << 20)
want = sys.argv[2].encode()
if size != len(want) or data != want:
    sys.exit("size %d bytes %r, wanted %d bytes %r" % (size, data[:40], len(want), want[:40]))
PY
}

# changes TIMEOUT NEGATIVE OPTIONS: the whole sequence on a fresh tree and
# mount; TIMEOUT is entry_timeout's, NEGATIVE negative_timeout's.
changes() {
	local to=$1 neg=$2 opts=$3 r
	rm -rf "${S:?}"/*
	mkdir -p "$S/d/sub"
	mk d/a "alpha"
	mk d/b "bravo"
	mk d/sub/c "charlie"
	mk d/r "romeo"
	mk d/w "whiskey"
	mk d/p "papa"
	mount_or_die "$opts"
	# everything looked up, listed and read once: entries, snapshots and memos made
	ls -lR "$M" >/dev/null
	cat "$M/d/a" "$M/d/b" "$M/d/sub/c" "$M/d/r" "$M/d/w" "$M/d/p" >/dev/null
	is "[$opts] a missing name: ENOENT (and remembered)" gone "$M/d/new"

	mk d/new "november"
	r=$(seen_within "$neg" has "$M/d/new" november)
	check_eq "[$opts] a file added where a lookup failed is seen within ${neg} s ($r)" 0 $?
	rm "$S/d/a.lz4"
	r=$(seen_within "$to" gone "$M/d/a")
	check_eq "[$opts] a removed file is gone within ${to} s ($r)" 0 $?
	mv "$S/d/b.lz4" "$S/d/b2.lz4"
	r=$(seen_within "$to" bash -c "$(declare -f gone has); gone '$M/d/b' && has '$M/d/b2' bravo")
	check_eq "[$opts] a renamed file: the old name gone, the new one read, within ${to} s ($r)" 0 $?
	mv "$S/d/sub" "$S/d/sub2"
	r=$(seen_within "$to" bash -c "$(declare -f gone has); gone '$M/d/sub/c' &&
		has '$M/d/sub2/c' charlie")
	check_eq "[$opts] a renamed directory: seen within ${to} s ($r)" 0 $?
	# removed and made again: a lookup below the old one is ESTALE, and the
	# kernel walks the path again at once
	rm -rf "$S/d/sub2"
	mkdir "$S/d/sub2"
	mk d/sub2/c "charlie made again"
	is "[$opts] a directory removed and made again: its new file reads at once" \
		has "$M/d/sub2/c" "charlie made again"

	# replaced by rename: the next open has the new file, whatever the timeout
	mk d/r "romeo, replaced by a longer text"
	is "[$opts] replaced by rename: the next open has the new size and bytes" \
		open_sees "$M/d/r" "romeo, replaced by a longer text"
	# rewritten in place (same inode): likewise
	printf 'whiskey rewritten in place, longer' >"$T/plain.tmp"
	lz4 -q -c -B4 "$T/plain.tmp" >"$T/w.lz4"
	cat "$T/w.lz4" >"$S/d/w.lz4"
	is "[$opts] rewritten in place: the next open has the new size and bytes" \
		open_sees "$M/d/w" "whiskey rewritten in place, longer"
	r=$(seen_within "$to" bash -c "[[ \$(stat -c %s '$M/d/w') == 34 ]]")
	check_eq "[$opts] ... and stat shows its new size within ${to} s ($r)" 0 $?
	# no longer lz4: the name stays (names come from suffixes); reads fail
	printf 'plain now\n' >"$S/d/p.lz4"
	check_fails "[$opts] rewritten from lz4 to plain text: the next open fails with EIO" \
		"Input/output error" cat "$M/d/p"
	check_fails "[$opts] ... and p.lz4 is still not listed" "No such file" stat "$M/d/p.lz4"
	umount_ok "$opts"
}

changes 10 0 readpath=pread
changes 1 1 entry_timeout=1,attr_timeout=1,negative_timeout=1
changes 0 0 entry_timeout=0,attr_timeout=0

# With a long timeout the names may stay as they were, but an open still
# never shows stale bytes or sizes.
rm -rf "${S:?}"/*
mkdir -p "$S/d"
mk d/x "x-ray"
mount_or_die entry_timeout=60,attr_timeout=60
cat "$M/d/x" >/dev/null
mk d/x "x-ray, replaced while the kernel trusts the old entry"
is "entry_timeout=60: an open after a replace has the new size and bytes" \
	open_sees "$M/d/x" "x-ray, replaced while the kernel trusts the old entry"
umount_ok "entry_timeout=60"

# --- a big tree: descriptors and memory -----------------------------------------------

NFILES=${TREES_NFILES:-100000}
OP_TIMEOUT=300		# ls -lR of them under ASan
rm -rf "${S:?}"/*
"$PY" - "$S" "$NFILES" >"$T/expected" <<'PY'
import hashlib, os, sys
import lz4.frame
top, n = sys.argv[1], int(sys.argv[2])
dirs = 100
total = hashlib.md5()
for i in range(n):
    d = os.path.join(top, "d%03d" % (i % dirs))
    if i < dirs:
        os.mkdir(d)
    body = (b"file %d of the tree: " % i) * (1 + i % 97)
    # what lz4 -B4 writes: 64 KiB blocks, no content size
    with open(os.path.join(d, "f%06d.txt.lz4" % i), "wb") as f:
        f.write(lz4.frame.compress(body, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                   store_size=False))
print(n)
PY
LIMIT=4000
BUDGET=$((LIMIT / 4))
BFS_WRAP="prlimit --nofile=$LIMIT:$LIMIT --"
mount_or_die readpath=pread
BFS_WRAP=
nfds() { find "/proc/$BFS_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
t0=$SECONDS
n=$(t ls -lR "$M" | grep -c '\.txt$')
check_eq "ls -lR lists all $NFILES files ($((SECONDS - t0)) s)" "$NFILES" "$n"
check_eq "... with their decoded sizes (f000096: 97 times its line)" \
	"$((97 * $(printf 'file 96 of the tree: ' | wc -c)))" "$(stat -c %s "$M/d096/f000096.txt")"
fds=$(nfds)
# the budget, plus libfuse's, the log's and the operations' in flight
check "descriptors after ls -lR within the budget ($fds <= $BUDGET + 64)" \
	test "$fds" -le $((BUDGET + 64))
rss_ls=$(awk '/VmRSS/ { print $2 }' "/proc/$BFS_PID/status")
t0=$SECONDS
got=$(cd "$M" && find . -type f -print0 | sort -z | xargs -0 cat | wc -c)
want=$(python3 - "$NFILES" <<'PY'
import sys
print(sum(len((b"file %d of the tree: " % i) * (1 + i % 97)) for i in range(int(sys.argv[1]))))
PY
)
check_eq "every file read back: the bytes of all ($((SECONDS - t0)) s)" "$want" "$got"
last=$((NFILES - 1))
check "... every byte right (the last file)" bash -c "[[ \"\$(cat '$M/d$(printf %03d $((last % 100)))/f$(printf %06d $last).txt')\" == \
	\"\$(python3 -c 'import sys; sys.stdout.write(\"file $last of the tree: \" * (1 + $last % 97))')\" ]]"
fds=$(nfds)
check "descriptors after reading every file within the budget ($fds <= $BUDGET + 64)" \
	test "$fds" -le $((BUDGET + 64))
rss_cat=$(awk '/VmRSS/ { print $2 }' "/proc/$BFS_PID/status")
diag "daemon RSS: $((rss_ls / 1024)) MiB after ls -lR, $((rss_cat / 1024)) MiB after reading every file"
if bfs_sanitized "$BLOCKFS"; then
	diag "RSS bounds skipped: a sanitizer's allocator and shadow memory"
else
	# 112 bytes an inode, its path, its share of the table; 8 MiB of snapshots,
	# 1024 idle versions; glibc's arenas (README: memory per file)
	check "RSS after ls -lR of $NFILES files: $((rss_ls / 1024)) MiB <= 64 MiB" \
		test "$rss_ls" -le $((64 << 10))
	check "RSS after reading every file: $((rss_cat / 1024)) MiB <= 64 MiB" \
		test "$rss_cat" -le $((64 << 10))
fi
umount_ok "big tree"

# --- max_inodes: the kernel is asked to forget the oldest directories -----------------
MAXI=10000
mount_or_die readpath=pread,max_inodes=$MAXI
n=$(t ls -lR "$M" | grep -c '\.txt$')
check_eq "max_inodes=$MAXI: ls -lR lists all $NFILES files" "$NFILES" "$n"
f=$(root_stat dirs_forgotten)
check "max_inodes: directories forgotten ($f)" test "${f:-0}" -gt 0
# the FORGETs come after the kernel dropped the entries
for _ in $(seq 100); do
	ino=$(root_stat inodes)
	((ino <= MAXI + 2 * NFILES / 100)) && break
	sleep 0.1
done
check "max_inodes: $ino inodes kept, at most $MAXI and two directories' files" \
	test "$ino" -le $((MAXI + 2 * NFILES / 100))
got=$(cd "$M" && find . -type f -print0 | sort -z | xargs -0 cat | wc -c)
check_eq "max_inodes: every file read back after its directory was forgotten" "$want" "$got"
check_eq "max_inodes: f000096 still decoded" \
	"$((97 * $(printf 'file 96 of the tree: ' | wc -c)))" "$(stat -c %s "$M/d096/f000096.txt")"
umount_ok "max_inodes"

# --- opens of unchanged files whose versions were dropped -------------------------------
# 2000 files read turn the ring of 1024 idle versions (inode.c) past d000's,
# which are dropped (no cache: none of their blocks holds them). Opening
# them again asks the backing side nothing until a read misses the
# kernel's pages; a file replaced between such an open and its first read
# that reaches blockfs gives EIO or the old bytes, never the new ones.
mount_or_die readpath=pread,cache_size=0
cat "$M/d000"/* "$M/d001"/* >/dev/null
sys0=$(root_stat backing_syscalls) rd0=$(root_stat reads) pr0=$(root_stat lookup_opens)
n=$(cat "$M/d000"/* | wc -c)
sys1=$(root_stat backing_syscalls) rd1=$(root_stat reads) pr1=$(root_stat lookup_opens)
check_eq "d000 read again: all its bytes" "$(cd "$S/d000" && cat -- * | lz4 -dc | wc -c)" "$n"
check "... backing reads only for reads that reached blockfs ($((sys1 - sys0)) <= $((rd1 - rd0))), none of 1000 opened by a lookup again ($((pr1 - pr0)))" \
	test $((sys1 - sys0)) -le $((rd1 - rd0)) -a "$pr1" -eq "$pr0"
f0=$M/d000/f000000.txt
old0=$(cat "$f0")
cp "$S/d000/f000000.txt.lz4" "$T/f000000.keep"
printf 'replaced while open' >"$T/plain.tmp"
r=$("$PY" - "$f0" "$S/d000/f000000.txt.lz4" "$T/plain.tmp" "$old0" <<'PY'
import errno, os, subprocess, sys
path, backing, plain, old = sys.argv[1:5]
fd = os.open(path, os.O_RDONLY)
subprocess.run(["lz4", "-q", "-f", "-B4", plain, backing + ".new"], check=True)
os.rename(backing + ".new", backing)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)	# the next read reaches blockfs
try:
    data = os.read(fd, 1 << 20)
    print("old" if data == old.encode() else "new" if data == b"replaced while open" else "mixed")
except OSError as e:
    print("EIO" if e.errno == errno.EIO else "errno %d" % e.errno)
PY
)
check "a file replaced after its open: the first read gives EIO or the old bytes ($r)" \
	test "$r" = EIO -o "$r" = old
check_eq "... and the next open the new bytes" "replaced while open" "$(cat "$f0")"
check "the daemon is alive" kill -0 "$BFS_PID"
umount_ok "deferred opens"
mv "$T/f000000.keep" "$S/d000/f000000.txt.lz4"	# as the tree was, for what follows

# --- readdirplus: how many entries a listing's first reply gives with attributes -------
# d000 holds 1000 files, more than fit the first reply's 16 entries.
# The decoded bytes of directory dK, K given: file i is in d(i % 100).
dir_bytes() {
	python3 - "$NFILES" "$1" <<'PY'
import sys
n, k = int(sys.argv[1]), int(sys.argv[2])
print(sum(len((b"file %d of the tree: " % i) * (1 + i % 97)) for i in range(k, n, 100)))
PY
}
want0=$(dir_bytes 0)
for rp in 16 off on; do
	mount_or_die "readpath=pread,readdirplus=$rp"
	n=$(t find "$M/d000" -type f | wc -l)
	ino=$(root_stat inodes)
	case $rp in
	16) check "readdirplus=16: find lists d000 ($n files) making at most 16 inodes ($ino)" \
		test "$n" -eq $((NFILES / 100)) -a "${ino:-0}" -le 18 ;;
	off) check "readdirplus=off: find lists d000 ($n files) making no file's inode ($ino)" \
		test "$n" -eq $((NFILES / 100)) -a "${ino:-0}" -le 2 ;;
	on) check "readdirplus=on: find lists d000 ($n files) with every file's inode ($ino)" \
		test "$n" -eq $((NFILES / 100)) -a "${ino:-0}" -gt $((NFILES / 100)) ;;
	esac
	check_eq "readdirplus=$rp: ls -l gives d000's decoded sizes" "$want0" \
		"$(t ls -l "$M/d000" | awk '$1 ~ /^-/ { s += $5 } END { print s }')"
	check_eq "readdirplus=$rp: d000 reads back" "$want0" "$(cat "$M"/d000/* | wc -c)"
	umount_ok "readdirplus=$rp"
done

# readdirplus=auto, the default: names only while nothing the listings
# show is used, every entry's attributes while the files listed are opened.
mount_or_die "readpath=pread"
n=$(t find "$M/d000" -type f | wc -l)
ino0=$(root_stat inodes)
check "auto: find lists d000 ($n files) making no file's inode ($ino0)" \
	test "$n" -eq $((NFILES / 100)) -a "${ino0:-0}" -le 2
check_eq "auto: d001 reads back" "$(dir_bytes 1)" "$(cat "$M"/d001/* | wc -c)"
ino1=$(root_stat inodes)
t find "$M/d002" -type f >/dev/null
ino2=$(root_stat inodes)
check "auto: once listed files are opened, find of d002 makes every file's inode ($ino1 -> $ino2)" \
	test $((ino2 - ino1)) -gt $((NFILES / 100))
t find "$M"/d00[3-9] -type f >/dev/null	# 7000 names, none used
ino3=$(root_stat inodes)
t find "$M/d010" -type f >/dev/null
ino4=$(root_stat inodes)
check "auto: after 7000 names used for nothing, find of d010 makes only its own ($ino3 -> $ino4)" \
	test $((ino4 - ino3)) -le 1
check "auto: the daemon is alive" kill -0 "$BFS_PID"
umount_ok "readdirplus=auto"

# --- a directory whose names collide in the snapshot's hash -----------------------------
# 40 names of one home slot (dir.c: FNV-1a, 128 slots for 42 entries with
# . and ..): past 32 slots from home the table is dropped, and the binary
# search must still find every name, the stems (is "cNNNNN" free?) and
# a name that is not there.
mkdir "$S/collide"
mapfile -t collide < <("$PY" - <<'PY'
def h(name):
    x = 2166136261
    for b in name.encode():
        x = ((x ^ b) * 16777619) & 0xffffffff
    return x ^ (x >> 15)
out, i = [], 0
while len(out) < 40:
    n = "c%05d" % i
    if h(n + ".lz4") & 127 == 0:
        out.append(n)
    i += 1
print("\n".join(out))
PY
)
for n in "${collide[@]}"; do mk "collide/$n" "colliding name $n"; done
sleep 0.1	# not racy: the snapshot is kept (dir.c, RACY_NS)
mount_or_die ""
check_eq "colliding names: ls shows all 40 decoded, by their stems" \
	"$(printf '%s\n' "${collide[@]}")" "$(t ls "$M/collide")"
bad=0
for n in "${collide[@]}"; do
	[[ $(t cat "$M/collide/$n") == "colliding name $n" ]] || bad=$((bad + 1))
done
check_eq "colliding names: every file reads back" 0 "$bad"
check_fails "colliding names: a name not there is ENOENT" "No such file or directory" \
	stat "$M/collide/c99999"
check "colliding names: the daemon is alive" kill -0 "$BFS_PID"
umount_ok "colliding names"
rm -r "$S/collide"

# --- the same tree cold: a listing opens no file, and shows the same ---------------------
opens() { t getfattr --only-values -n user.blockfs.stats "$M" | awk '$1 == "lookup_opens" { print $2 }'; }
# Dentries and inodes only (2, not 3): dropping every page cache would also
# throw away pages that tests running beside this one have pushed and then
# count as never read (hints.sh's willneed=kernel).
if sync -f "$T" && echo 2 2>/dev/null >/proc/sys/vm/drop_caches; then
	BFS_WRAP="prlimit --nofile=$LIMIT:$LIMIT --"
	mount_or_die readpath=pread,readdirplus=off
	BFS_WRAP=
	t0=$SECONDS
	t find "$M" -type f >"$T/cold-names"
	check_eq "cold: find lists all $NFILES files ($((SECONDS - t0)) s)" "$NFILES" \
		"$(grep -c '/f[0-9]*\.txt$' "$T/cold-names")"
	check_eq "cold: the listings opened no file" 0 "$(opens)"
	fds=$(nfds)
	check "cold: descriptors after find within the budget ($fds <= $BUDGET + 64)" \
		test "$fds" -le $((BUDGET + 64))
	check_eq "cold: f000096 decoded" \
		"$((97 * $(printf 'file 96 of the tree: ' | wc -c)))" "$(stat -c %s "$M/d096/f000096.txt")"
	check_eq "cold: its stat opened one file" 1 "$(opens)"
	umount_ok "cold tree"
	mount_or_die readpath=pread
	t find "$M" -type f >"$T/warm-names"
	check "again: the same names" cmp "$T/cold-names" "$T/warm-names"
	umount_ok "tree again"
else
	diag "cold listing skipped: cannot drop the kernel's caches (not root?)"
fi

bfs_end
