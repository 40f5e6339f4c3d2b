#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Spilled units (-o spill_size, unit.c): an xz file of 1 MiB blocks
# (xz -T2 --block-size), a zstd file of three 8 MiB frames and a bzip2
# file (900 kB blocks) are read at seeded random 4 KiB offsets with
# O_DIRECT (each read reaches the daemon) and cache_size=1M (the block
# cache holds one block at most). Each block is decoded once, whole, and spilled; every
# read after its first touch is a pread of the spill (the root's
# spill_units and spill_reads, the file's blocks_decompressed), and all
# equal X -dc. A flipped byte in one xz block and in one zstd frame: reads
# there fail with EIO and no spill of that unit is made, the other units
# read exact. spill_size=0 reads exact, nothing spilled.
#
# Usage: spill_units.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: spill_units.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin spill_units zstd xz bzip2 getfattr python3
bfs_dirs

bfs_words "$W/z.ref" $((24 << 20)) 11 48 unit spill block frame pread $'\n'
head -c $((6 << 20)) "$W/z.ref" >"$W/x.ref"
cp "$W/x.ref" "$W/b.ref"
xz -0 -T2 --block-size=1MiB -c "$W/x.ref" >"$S/x.xz"
# three frames, each with its content size in its header (zstd FILE writes one)
for i in 0 1 2; do
	tail -c +$((i * (8 << 20) + 1)) "$W/z.ref" | head -c $((8 << 20)) >"$W/part$i"
	zstd -q -c "$W/part$i"
done >"$S/z.zst"
bzip2 -9 -c "$W/b.ref" >"$S/b.bz2"
# 24 blocks of 1 MiB, for a reader that only goes forward
xz -0 -T2 --block-size=1MiB -c "$W/z.ref" >"$S/y.xz"
bfs_fixture xz "$S/x.xz" "$W/x.ref"
bfs_fixture zstd "$S/z.zst" "$W/z.ref"
bfs_fixture bzip2 "$S/b.bz2" "$W/b.ref"
# a byte flipped inside the 4th xz block and inside the 2nd zstd frame
cp "$S/x.xz" "$S/fx.xz"
cp "$S/z.zst" "$S/fz.zst"
cp "$W/x.ref" "$W/fx.ref"
cp "$W/z.ref" "$W/fz.ref"
xsz=$(stat -c %s "$S/x.xz") zsz=$(stat -c %s "$S/z.zst")
bfs_flip "$S/fx.xz" $((xsz * 7 / 12))
bfs_flip "$S/fz.zst" $((zsz / 2))

# units N: spill_units once it reaches N (a push's spill may end after the reads), within 10 s
units() {
	local i
	for ((i = 0; i < 100; i++)); do
		(($(root_stat spill_units) >= $1)) && break
		sleep 0.1
	done
	root_stat spill_units
}

# rand.py FILE REF N SEED [LO HI]: N seeded 4 KiB reads with O_DIRECT at
# aligned offsets in [LO, HI) (default: the whole file), each equal to REF's;
# a read that fails prints its errno name and offset and exits 3
cat >"$T/rand.py" <<'PY'
import errno, mmap, os, random, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
ref = open(sys.argv[2], "rb")
size = os.fstat(ref.fileno()).st_size
lo = int(sys.argv[5]) if len(sys.argv) > 5 else 0
hi = int(sys.argv[6]) if len(sys.argv) > 6 else size
r = random.Random(int(sys.argv[4]))
buf = mmap.mmap(-1, 4096)
for i in range(int(sys.argv[3])):
    off = r.randrange(lo >> 12, hi >> 12) << 12
    try:
        got = os.preadv(fd, [buf], off)
    except OSError as e:
        print(errno.errorcode[e.errno], off)
        sys.exit(3)
    ref.seek(off)
    if got != 4096 or buf[:4096] != ref.read(4096):
        sys.exit("read %d at %d differs (%d read)" % (i, off, got))
PY

# --- spilled at the first touch, read from the spill after it --------------------
mount_o "index_cache=$C,cache_size=1M"
check_eq "nothing spilled before a read" "0 0" "$(root_stat spill_units) $(root_stat spill_bytes)"
check "x: 60 random 4 KiB reads equal xz -dc" python3 "$T/rand.py" "$M/x" "$W/x.ref" 60 1
check_eq "x: each of its 6 blocks decoded once" 6 "$(file_stat blocks_decompressed x)"
check_eq "x: ... and spilled" "6 $((6 << 20))" "$(units 6) $(root_stat spill_bytes)"
r0=$(($(root_stat spill_reads) + $(root_stat cache_hits)))
check "x: 60 more reads equal xz -dc" python3 "$T/rand.py" "$M/x" "$W/x.ref" 60 2
check_eq "x: no block decoded again" 6 "$(file_stat blocks_decompressed x)"
check "x: the 60 reads were preads of the spill (or hits of the one cached block)" \
	test "$(($(root_stat spill_reads) + $(root_stat cache_hits) - r0))" -ge 60
check "z: 40 random 4 KiB reads equal zstd -dc" python3 "$T/rand.py" "$M/z" "$W/z.ref" 40 3
check_eq "z: each of its 3 frames decoded once, spilled" "3 9" \
	"$(file_stat blocks_decompressed z) $(units 9)"
r0=$(($(root_stat spill_reads) + $(root_stat cache_hits)))
check "z: 40 more reads equal zstd -dc" python3 "$T/rand.py" "$M/z" "$W/z.ref" 40 4
check_eq "z: no frame decoded again" 3 "$(file_stat blocks_decompressed z)"
check "z: the 40 reads were preads of the spill" \
	test "$(($(root_stat spill_reads) + $(root_stat cache_hits) - r0))" -ge 40
check "b: 40 random 4 KiB reads equal bzip2 -dc" python3 "$T/rand.py" "$M/b" "$W/b.ref" 40 5
d=$(file_stat blocks_decompressed b)
check_eq "b: its blocks spilled as they were decoded" $((9 + d)) "$(units $((9 + d)))"
check "b: 40 more reads equal bzip2 -dc" python3 "$T/rand.py" "$M/b" "$W/b.ref" 40 6
check "b: at most the blocks not touched before decoded" \
	test "$(file_stat blocks_decompressed b)" -le $((d + 2))
check_eq "no spill failed or dropped, no proof" "0 0 0" \
	"$(root_stat spill_failed) $(root_stat spill_dropped) $(root_stat spill_proofs)"
check "cat x, z, b equal X -dc" cmp <(t cat "$M/x" "$M/z" "$M/b") <(cat "$W/x.ref" "$W/z.ref" "$W/b.ref")
is "daemon alive" daemon_alive
umount_o

# --- a reader that goes only forward reads each block once: few are spilled ---------
mount_o "index_cache=$C,cache_size=1M"
check "y: cat equals xz -dc" cmp "$M/y" "$W/z.ref"
# Whether a block is read once is known only after 8 READs forward, and a
# block decoded before that is spilled: the first ones, and those decoded
# ahead of the eighth READ (a decode finishing at once can lag the count by
# a unit or two). Every block spilled means the reader's run went unseen.
n=$(root_stat spill_units)
check "y: at most half of its 24 blocks spilled (were $n)" test "$n" -le 12
is "forward: daemon alive" daemon_alive
umount_o

# --- damage: the unit fails with EIO and is not spilled; the others are -------------
mount_o "index_cache=$C,cache_size=1M"
u0=$(root_stat spill_units)
# fx: its 4th block [3 MiB, 4 MiB) holds the flipped byte; fz: its 2nd frame [8 MiB, 16 MiB)
check_eq "fx: a read in the damaged block fails with EIO" "EIO $(((3 << 20) + 4096))" \
	"$(python3 "$T/rand.py" "$M/fx" "$W/fx.ref" 1 1 $(((3 << 20) + 4096)) $(((3 << 20) + 8192)))"
check_eq "fz: a read in the damaged frame fails with EIO" "EIO $(((8 << 20) + 4096))" \
	"$(python3 "$T/rand.py" "$M/fz" "$W/fz.ref" 1 1 $(((8 << 20) + 4096)) $(((8 << 20) + 8192)))"
check_eq "... and neither unit was spilled" "$u0" "$(root_stat spill_units)"
check_fails "fx: again, EIO" "Input/output error" \
	dd if="$M/fx" of=/dev/null bs=4096 skip=$(((3 << 20) / 4096 + 9)) count=1 iflag=direct status=none
check "fx: the blocks before it read exact" python3 "$T/rand.py" "$M/fx" "$W/fx.ref" 20 7 0 $((3 << 20))
check "fx: the blocks after it too" python3 "$T/rand.py" "$M/fx" "$W/fx.ref" 20 8 $((4 << 20)) $((6 << 20))
check "fz: the frames beside it read exact" python3 "$T/rand.py" "$M/fz" "$W/fz.ref" 20 9 0 $((8 << 20))
check "fz: ... and after it" python3 "$T/rand.py" "$M/fz" "$W/fz.ref" 20 10 $((16 << 20)) $((24 << 20))
check_eq "the good units spilled: 5 of fx, 2 of fz" $((u0 + 7)) "$(units $((u0 + 7)))"
is "damage: daemon alive" daemon_alive
umount_o

# --- spill_size=0: decoded as before ------------------------------------------------
mount_o "index_cache=$C,cache_size=1M,spill_size=0"
check "spill_size=0: x reads exact" python3 "$T/rand.py" "$M/x" "$W/x.ref" 40 11
check "spill_size=0: z reads exact" python3 "$T/rand.py" "$M/z" "$W/z.ref" 20 12
check "spill_size=0: b reads exact" python3 "$T/rand.py" "$M/b" "$W/b.ref" 20 13
check_eq "spill_size=0: nothing spilled" "0 0 0" \
	"$(root_stat spill_units) $(root_stat spill_reads) $(root_stat spill_bytes)"
umount_o

bfs_end
