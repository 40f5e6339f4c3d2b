#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bzip2 on a real mount: files from bzip2 -1 and -9, pbzip2 (a stream per
# block), lbzip2, Python's bz2 (compress, and BZ2File written in pieces),
# concatenations with empty streams, and bsdtar -j archives (x.tar.bz2
# and x.tbz2 shown as x.tar) read back as bzip2 -dc gives them: the size
# from the first stat, the whole file, 200 seeded random ranges, under
# -o readpath=pread and mmap. Damage: a truncated file and one with a
# flipped byte serve exactly the blocks bzip2recover recovers before the
# damage, then EIO; garbage after the last stream serves every byte, then
# EIO; the daemon lives on and other files still read. With index_cache
# the walk is not repeated after a remount (counted backing reads).
# blockfs -V names libbz2's version.
#
# Usage: bzip2.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: bzip2.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin bzip2 bzip2 bzip2recover pbzip2 lbzip2 bsdtar getfattr python3
S=$T/src M=$T/mnt C=$T/cache W=$T/work
mkdir -p "$S" "$M" "$C" "$W"
chmod 700 "$C"

# Log-like text (about 5:1 under bzip2): 12 MiB and 2 MiB pieces; 1 MiB random.
python3 - "$W" <<'PY'
import random, sys
w = sys.argv[1]
r = random.Random(15)
words = ["GET", "PUT", "/index.html", "/api/v1/items", "200", "404", "ok", "slow",
         "cache", "miss", "hit", "user", "session", "block"]
def text(n):
    out, size, i = [], 0, 0
    while size < n:
        line = "%09d %s %s %d\n" % (i, r.choice(words), " ".join(r.choices(words, k=4)),
                                    r.randint(0, 1 << 20))
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out).encode()[:n]
open(w + "/big", "wb").write(text(12 << 20))
for name in ("p1", "p2", "p3"):
    open(w + "/" + name, "wb").write(text(2 << 20))
open(w + "/rand", "wb").write(r.randbytes(1 << 20))
PY
bzip2 -1 -c "$W/big" >"$S/b1.bz2"
bzip2 -9 -c "$W/big" >"$S/b9.bz2"
pbzip2 -c -p2 -9 "$W/big" >"$S/pb.bz2"
lbzip2 -c -n 2 "$W/big" >"$S/lb.bz2"
python3 - "$W/big" "$S/py.bz2" "$S/pyf.bz2" <<'PY'
import bz2, sys
data = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(bz2.compress(data, 5))
with bz2.BZ2File(sys.argv[3], "wb", compresslevel=3) as f:
    for i in range(0, len(data), 100003):
        f.write(data[i:i + 100003])
PY
for f in b1 b9 pb lb py pyf; do cp "$W/big" "$W/$f"; done
: | bzip2 -c >"$T/empty.bz2"
{ cat "$T/empty.bz2"; bzip2 -c "$W/p1"; cat "$T/empty.bz2"; bzip2 -1 -c "$W/p2"
  pbzip2 -c -p2 -1 "$W/p3"; lbzip2 -c "$W/rand"; cat "$T/empty.bz2"; } >"$S/multi.bz2"
cat "$W/p1" "$W/p2" "$W/p3" "$W/rand" >"$W/multi"
cp "$T/empty.bz2" "$S/empty.bz2"
: >"$W/empty"
mkdir -p "$W/tree/sub"
cp "$W/p1" "$W/tree/one.log"
cp "$W/rand" "$W/tree/sub/two.bin"
bsdtar -cjf "$S/a.tar.bz2" -C "$W/tree" .
bsdtar -cjf "$S/b.tbz2" -C "$W/tree" .
bzip2 -dc "$S/a.tar.bz2" >"$W/a.tar"
bzip2 -dc "$S/b.tbz2" >"$W/b.tar"

# Damage, from bzip2 -1 of p1 + p2 (about 40 blocks): a byte flipped a
# third of the way in, a cut at 60%, and garbage after the end.
bzip2 -1 -c "$W/p1" >"$S/flip.bz2"
bzip2 -1 -c "$W/p2" >>"$S/flip.bz2"
n=$(stat -c %s "$S/flip.bz2")
head -c $((n * 6 / 10)) "$S/flip.bz2" >"$S/cut.bz2"
printf '\x5a' | dd of="$S/flip.bz2" bs=1 seek=$((n / 3)) conv=notrunc 2>/dev/null
{ bzip2 -c "$W/p1"; printf 'not a stream\n'; } >"$S/trail.bz2"
cp "$W/p1" "$W/trail"

# The bytes bzip2recover gets back from the blocks before the first bad one.
recovered() {
	local d=$T/rec-$1 f
	mkdir -p "$d"
	cp "$S/$1.bz2" "$d/"
	(cd "$d" && bzip2recover "$1.bz2" >/dev/null 2>&1)
	: >"$W/$1.rec"
	for f in "$d"/rec*"$1".bz2; do
		bzip2 -dc "$f" >"$d/out" 2>/dev/null || break	# (it writes before it checks)
		cat "$d/out" >>"$W/$1.rec"
	done
	stat -c %s "$W/$1.rec"
}
cut_ok=$(recovered cut)
flip_ok=$(recovered flip)
diag "intact before the damage: cut $cut_ok bytes, flip $flip_ok bytes"
head -c $((cut_ok / 4096 * 4096)) "$W/cut.rec" >"$W/cut.pages"	# what reads of pages get

# ranges.py FILE REF: 200 seeded random reads (offsets anywhere, 1 B to 3 MiB)
# inside REF's size
cat >"$T/ranges.py" <<'PY'
import os, random, sys
a, b = (open(p, "rb") for p in sys.argv[1:3])
size = os.fstat(b.fileno()).st_size
r = random.Random(7)
for i in range(200):
    off = r.randrange(size)
    n = min(size - off, r.choice([1, 4096, 65536, 1 << 20, 3 << 20, r.randrange(1, 200000)]))
    a.seek(off); b.seek(off)
    if a.read(n) != b.read(n):
        sys.exit("range %d at %d, %d bytes differs" % (i, off, n))
PY

# intact.py FILE REF: FILE read page by page equals REF up to REF's last
# whole page; the page holding REF's end (or the one after it) is EIO.
cat >"$T/intact.py" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
ref = open(sys.argv[2], "rb").read()
good = len(ref) // 4096 * 4096
for off in range(0, good, 4096):
    if os.pread(fd, 4096, off) != ref[off:off + 4096]:
        sys.exit("page at %d differs" % off)
try:
    got = os.pread(fd, 4096, good)
    sys.exit("page at %d: %d bytes, not EIO" % (good, len(got)))
except OSError as e:
    if e.errno != errno.EIO:
        raise
PY

# damaged FILE REF: cat of FILE gives a prefix of REF, then EIO, and
# page by page every whole page of REF reads back (intact.py)
damaged() {
	local got=$T/got.$$ rc=0 err
	err=$(t cat "$1" 2>&1 >"$got") || rc=$?
	if ((rc == 0)) || [[ $err != *"Input/output error"* ]]; then
		echo "cat: exit $rc, $err"
		return 1
	fi
	if ! cmp -s "$got" "$2" && ! cmp "$got" "$2" 2>&1 | grep -q "EOF on $got"; then
		cmp "$got" "$2"
		return 1
	fi
	t python3 "$T/intact.py" "$1" "$2"
}

for rp in pread mmap; do
	mount_o "readpath=$rp"
	diag "readpath=$rp"
	for f in b1 b9 pb lb py pyf multi; do
		if [[ $f == b9 ]]; then
			s=$SECONDS
			sz=$(t stat -c %s "$M/$f")
			diag "$rp: first stat of b9 ($(stat -c %s "$S/b9.bz2") bytes): $((SECONDS - s)) s"
		else
			sz=$(t stat -c %s "$M/$f")
		fi
		check_eq "$rp: $f: size from the first stat" "$(stat -c %s "$W/$f")" "$sz"
		check_eq "$rp: $f: format bzip2" bzip2 "$(xattr format "$f")"
		check "$rp: $f: cat equals bzip2 -dc" cmp "$M/$f" "$W/$f"
		check "$rp: $f: 200 random ranges" python3 "$T/ranges.py" "$M/$f" "$W/$f"
	done
	n=$(xattr blocks pb)
	if ((n >= 12)); then ok "$rp: pb: $n blocks (a stream per block)"; else
		not_ok "$rp: pb: blocks" "$n"; fi
	check_eq "$rp: b9: block size of level 9" 900000 "$(xattr block_size b9)"
	check_eq "$rp: empty stream: size 0" 0 "$(t stat -c %s "$M/empty")"
	check "$rp: empty stream: reads nothing" cmp "$M/empty" "$W/empty"
	check_fails "$rp: the .bz2 name is not shown" "No such file" stat "$M/b1.bz2"
	for a in a b; do
		check "$rp: $a.tar (bsdtar -j) equals bzip2 -dc" cmp "$M/$a.tar" "$W/$a.tar"
		# shellcheck disable=SC2016 # the script's own arguments
		check "$rp: $a.tar lists its members" sh -c \
			'bsdtar -tf "$1" | grep -q "sub/two.bin"' _ "$M/$a.tar"
	done
	# damage: the blocks before it, exactly, then EIO; the rest goes on
	checkf "$rp: flip: bzip2recover's intact blocks, then EIO" damaged "$M/flip" "$W/flip.rec"
	checkf "$rp: cut: bzip2recover's intact blocks, then EIO" damaged "$M/cut" "$W/cut.rec"
	checkf "$rp: trailing garbage: every byte, then EIO" damaged "$M/trail" "$W/trail"
	check "$rp: cut: random ranges inside the intact blocks" \
		python3 "$T/ranges.py" "$M/cut" "$W/cut.pages"
	is "$rp: daemon alive after the damage" daemon_alive
	check "$rp: b9 still reads exact" cmp "$M/b9" "$W/b9"
	umount_o
done

# --- the index cache: one walk per file version ------------------------------------
mount_o "index_cache=$C"
t stat "$M/b9" "$M/multi" >/dev/null
check_eq "first mount: b9 walked" bzip2-walk "$(xattr index_source b9)"
w=$(reads b9)
umount_o
mount_o "index_cache=$C"
check_eq "remount: b9's size" "$(stat -c %s "$W/b9")" "$(t stat -c %s "$M/b9")"
n=$(reads b9)
if ((n <= 10)); then ok "remount: first stat of b9: $n backing reads (walk: $w)"; else
	not_ok "remount: first stat of b9: $n backing reads (walk: $w)"; fi
check_eq "remount: b9 from the cache" cache "$(xattr index_source b9)"
check "remount: b9 random ranges" python3 "$T/ranges.py" "$M/b9" "$W/b9"
check_eq "remount: multi from the cache" cache "$(xattr index_source multi)"
check "remount: multi reads exact" cmp "$M/multi" "$W/multi"
check_eq "remount: flip (damaged) was not kept" bzip2-walk "$(xattr index_source flip)"
umount_o

# the library the daemon runs with, as the bzip2 CLI (the same libbz2) names it
v=$(bzip2 -V </dev/null 2>&1 | sed -n 's/.*Version \([0-9.]*\),.*/\1/p' | head -n 1)
check_eq "blockfs -V: libbz2's version" "libbz2 $v" "$(t "$BLOCKFS" -V | grep '^libbz2')"

bfs_end
