#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# xz: files from xz (-6 one block, -T2 and --block-size=1MiB many blocks,
# -0, -9e, every --check), pixz, Python's lzma module, concatenated .xz
# files with stream padding, and bsdtar -J (x.tar.xz and x.txz, shown as
# x.tar) are shown under NAME with the size and bytes xz -dc gives, whole
# and in seeded random ranges, under pread and mmap; a first stat costs a
# few backing reads, not a walk. Damage: a flipped byte in a block fails
# that block alone; a damaged index or footer, trailing garbage, padding
# that is not a multiple of 4 and a truncated file serve the intact
# blocks, then EIO; the daemon and the other files live on. A single
# block of 80 MiB (xz -T1), served as chained spans found as they decode,
# costs a first stat a few reads of its index and is read whole and at
# random offsets; a flip inside it is refused whole with verify, and
# without verify the spans before the flip still read.
#
# Usage: xz.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: xz.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin xz xz pixz bsdtar getfattr python3
S=$T/src M=$T/mnt W=$T/work C=$T/cache
mkdir -p "$S" "$M" "$W" "$C"
chmod 700 "$C"

# Log-like text, about 4:1: 16 MiB, a 4 MiB piece and a small tree for tar.
python3 - "$W" <<'PY'
import os, random, sys
w = sys.argv[1]
r = random.Random(21)
words = ["GET", "PUT", "/index.html", "/api/v1/items", "200", "404", "ok", "slow",
         "cache", "miss", "hit", "user", "session", "stream", "block", "index"]
def text(n):
    out, size, i = [], 0, 0
    while size < n:
        line = "%09d %s %s %d\n" % (i, r.choice(words), " ".join(r.choices(words, k=4)),
                                    r.randint(0, 1 << 20))
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out).encode()[:n]
open(w + "/big", "wb").write(text(16 << 20))
open(w + "/piece", "wb").write(text(4 << 20))
os.makedirs(w + "/tree/sub", exist_ok=True)
for i in range(20):
    open(w + "/tree/sub/f%02d.txt" % i, "wb").write(text(r.randint(1, 300000)))
PY
big=$W/big piece=$W/piece
xz -6 -c "$big" >"$S/x6.xz"
xz -T2 -1 -c "$big" >"$S/t2.xz"
xz -T2 --block-size=1MiB -c "$big" >"$S/bs1m.xz"
xz -0 -c "$big" >"$S/x0.xz"
xz -9e -c "$piece" >"$S/x9e.xz"
for c in none crc32 crc64 sha256; do
	xz -T2 --block-size=3MiB --check=$c -c "$big" >"$S/check-$c.xz"
done
pixz <"$big" >"$S/pixz.xz"
python3 - "$big" "$S" <<'PY'
import lzma, sys
data = open(sys.argv[1], "rb").read()
open(sys.argv[2] + "/py.xz", "wb").write(lzma.compress(data))
open(sys.argv[2] + "/pysha.xz", "wb").write(lzma.compress(data, check=lzma.CHECK_SHA256, preset=1))
PY
# concatenations: two xz files, then one with 8 and 1024 bytes of stream padding
{ xz -1 -c "$piece"; xz -T2 --block-size=1MiB -c "$piece"; } >"$S/cat2.xz"
{ xz -1 -c "$piece"; head -c 8 /dev/zero; xz -0 -c "$piece"; head -c 1024 /dev/zero; } >"$S/pad.xz"
(cd "$W/tree" && bsdtar -cJf "$S/arch.tar.xz" sub && bsdtar -cJf "$S/arch2.txz" sub)

for f in x6 t2 bs1m x0 check-none check-crc32 check-crc64 check-sha256 pixz py pysha cat2 pad; do
	xz -dc "$S/$f.xz" >"$W/$f"
done
xz -dc "$S/arch.tar.xz" >"$W/arch.tar"
xz -dc "$S/arch2.txz" >"$W/arch2.tar"
check_eq "fixtures: x6 is one block, t2 and bs1m many" "1 6 16" \
	"$(for f in x6 t2 bs1m; do xz -lv "$S/$f.xz" | awk '/^ +Blocks:/ { print $2 }'; done | xargs)"

# --- damage, each on its own copy of a 16-block file -----------------------------
src=$S/bs1m.xz
size=$(stat -c %s "$src")
# Backward Size: the index's bytes, from the footer
isize=$(python3 -c 'import struct, sys; d = open(sys.argv[1], "rb").read(); print((struct.unpack("<I", d[-8:-4])[0] + 1) * 4)' "$src")
flip() {	# flip FILE OFFSET
	python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0x5a]))' "$1" "$2"
}
cp "$src" "$S/dblock.xz"
# the 4th block: xz -lvv gives each block's compressed offset and size
read -r boff bclen < <(xz -lvv "$src" | awk '$1 == "1" && $2 == "4" && NF > 12 { print $3, $5; exit }')
flip "$S/dblock.xz" $((boff + bclen / 2))
cp "$src" "$S/dindex.xz"
flip "$S/dindex.xz" $((size - 12 - isize / 2))
cp "$src" "$S/dfoot.xz"
flip "$S/dfoot.xz" $((size - 6))
{ cat "$src"; printf 'trailing garbage'; } >"$S/garbage.xz"
{ cat "$src"; head -c 6 /dev/zero; } >"$S/pad6.xz"
head -c $((size * 2 / 3)) "$src" >"$S/cut.xz"

# ranges.py FILE REF: 200 seeded random reads (offsets anywhere, 1 B to 3 MiB)
cat >"$T/ranges.py" <<'PY'
import os, random, sys
a, b = (open(p, "rb") for p in sys.argv[1:3])
size = os.fstat(b.fileno()).st_size
r = random.Random(int(os.environ.get("SEED", "7")))
for i in range(int(os.environ.get("N", "200"))):
    off = r.randrange(size)
    n = r.choice([1, 4096, 65536, 1 << 20, 3 << 20, r.randrange(1, 200000)])
    a.seek(off); b.seek(off)
    if a.read(n) != b.read(n):
        sys.exit("range %d at %d, %d bytes differs" % (i, off, n))
PY

# prefix_then_eio NAME FILE REF: reading FILE fails with EIO, after giving
# a prefix of REF (all of it with @all)
prefix_then_eio() {
	local name=$1 f=$2 ref=$3 want=${4:-}
	check_fails "$name: cat ends in EIO" "Input/output error" cat "$f"
	# shellcheck disable=SC2016 # the script's own arguments
	check "$name: what cat gets is a prefix of xz -dc's${want:+ (all of it)}" sh -c '
		cat "$1" 2>/dev/null >"$3.got"
		if [ -n "$4" ]; then cmp -s "$3.got" "$2"; else
		cmp -s "$3.got" "$2" || cmp "$3.got" "$2" 2>&1 | grep -q EOF; fi' \
		_ "$f" "$ref" "$T/got" "$want"
}

for rp in ${XZ_READPATHS:-pread mmap}; do
	mount_o "readpath=$rp"
	diag "readpath=$rp"
	for f in x6 t2 bs1m x0 check-none check-crc32 check-crc64 check-sha256 pixz py pysha cat2 pad; do
		check_eq "$rp: $f: size from the first stat" "$(stat -c %s "$W/$f")" \
			"$(t stat -c %s "$M/$f")"
		n=$(reads "$f")
		if ((n <= 12)); then ok "$rp: $f: first stat took $n backing reads"; else
			not_ok "$rp: $f: first stat took $n backing reads"; fi
		check_eq "$rp: $f: format xz" xz "$(xattr format "$f")"
		check "$rp: $f: cat equals xz -dc" cmp "$M/$f" "$W/$f"
		check "$rp: $f: 200 random ranges" python3 "$T/ranges.py" "$M/$f" "$W/$f"
	done
	check "$rp: x9e: cat equals xz -dc" cmp "$M/x9e" "$piece"
	check "$rp: arch.tar.xz shown as arch.tar" cmp "$M/arch.tar" "$W/arch.tar"
	check "$rp: arch2.txz shown as arch2.tar" cmp "$M/arch2.tar" "$W/arch2.tar"
	# shellcheck disable=SC2016 # the script's own arguments
	check "$rp: arch.tar lists with tar" sh -c 'tar -tf "$1" | grep -q sub/f07.txt' _ "$M/arch.tar"
	check_fails "$rp: the .xz name is not shown" "No such file" stat "$M/x6.xz"

	# damage
	check_fails "$rp: dblock: cat ends in EIO" "Input/output error" cat "$M/dblock"
	check "$rp: dblock: the three blocks before the damaged one" \
		cmp -n $((3 << 20)) "$M/dblock" "$W/bs1m"
	# shellcheck disable=SC2016 # the script's own arguments
	check "$rp: dblock: the blocks after it read exact" sh -c '
		dd if="$1" bs=1M skip=4 2>/dev/null >"$3.a"; dd if="$2" bs=1M skip=4 2>/dev/null >"$3.b"
		[ -s "$3.b" ] && cmp "$3.a" "$3.b"' _ "$M/dblock" "$W/bs1m" "$T/tail"
	check_fails "$rp: dblock: a read inside the damaged block fails" "Input/output error" \
		dd if="$M/dblock" of=/dev/null bs=4096 skip=$((4 * 256 - 1)) count=1
	prefix_then_eio "$rp: dindex" "$M/dindex" "$W/bs1m" all
	prefix_then_eio "$rp: dfoot" "$M/dfoot" "$W/bs1m" all
	prefix_then_eio "$rp: garbage" "$M/garbage" "$W/bs1m" all
	prefix_then_eio "$rp: pad6" "$M/pad6" "$W/bs1m" all
	prefix_then_eio "$rp: cut" "$M/cut" "$W/bs1m"
	check_eq "$rp: cut: st_size is what the intact blocks hold, and the damage byte" \
		$((($(head -c $((size * 2 / 3)) "$src" | xz -dc 2>/dev/null | wc -c) >> 20 << 20) + 1)) \
		"$(stat -c %s "$M/cut")"
	is "$rp: daemon alive after the damage" daemon_alive
	check "$rp: t2 still reads exact" cmp "$M/t2" "$W/t2"
	umount_o
done
if grep -q "dblock.xz: block 3 at byte" "$T/daemon.log"; then
	ok "the damaged block is named in the log"
else
	not_ok "the damaged block is named in the log"
fi

# --- one block of 80 MiB: chained spans, when the read path serves them -----------
head -c $((80 << 20)) /dev/zero | python3 -c '
import sys, random
r = random.Random(5); w = [b"span", b"chain", b"park", b"resume", b"\n"]
out = bytearray()
while len(out) < (80 << 20): out += b" ".join(r.choices(w, k=64)) + b"%d\n" % r.randrange(1 << 30)
sys.stdout.buffer.write(out[:80 << 20])' >"$W/huge"
xz -0 -T1 -c "$W/huge" >"$S/huge.xz"
mount_o "readpath=pread,index_cache=$C"
check_eq "huge: size from the first stat" $((80 << 20)) "$(t stat -c %s "$M/huge")"
n=$(xattr stats huge | awk '$1 == "backing_syscalls" { print $2 }')
if ((n <= 6)); then ok "huge: first stat from the xz index: $n backing syscalls"; else
	not_ok "huge: first stat from the xz index: $n backing syscalls"; fi
check "huge: cat equals xz -dc" cmp "$M/huge" "$W/huge"
SEED=3 N=40 check "huge: 40 random ranges" python3 "$T/ranges.py" "$M/huge" "$W/huge"
is "huge: daemon alive" daemon_alive
umount_o
# a flipped byte in the middle of the block: with verify (the default) the
# block is decoded whole, its check tested, before any of it is served;
# without, the spans before the flip are served exact
# 4 GiB in 4096 blocks (zeros: quick to write): the first stat reads the
# stream's footer, index and header, whatever the file's size
head -c $((4 << 30)) /dev/zero | xz -0 -T2 -c >"$S/z4g.xz"
mount_o "readpath=pread,index_cache=off"
check_eq "z4g: size from the first stat" $((4 << 30)) "$(t stat -c %s "$M/z4g")"
n=$(xattr stats z4g | awk '$1 == "backing_syscalls" { print $2 }')
if ((n <= 4)); then ok "z4g: first stat in $n backing syscalls"; else
	not_ok "z4g: first stat in $n backing syscalls"; fi
check_eq "z4g: 4 KiB at 3 GiB" "$(head -c 4096 /dev/zero | md5sum)" \
	"$(t dd if="$M/z4g" bs=4k skip=$((3 << 18)) count=1 2>/dev/null | md5sum)"
umount_o
rm -f "$S/z4g.xz"
cp "$S/huge.xz" "$S/hugeflip.xz"
printf '\x55' | dd of="$S/hugeflip.xz" bs=1 seek=$(($(stat -c %s "$S/huge.xz") / 2)) \
	conv=notrunc 2>/dev/null
mount_o "readpath=pread,index_cache=off"
check_fails "hugeflip: with verify, its first MiB fails" "Input/output error" \
	dd if="$M/hugeflip" of=/dev/null bs=1M count=1
check "huge: beside it, still exact" cmp "$M/huge" "$W/huge"
umount_o
mount_o "readpath=pread,index_cache=off,verify=off"
check "hugeflip: verify=off: its first 8 MiB exact" cmp <(t head -c $((8 << 20)) "$M/hugeflip") \
	<(head -c $((8 << 20)) "$W/huge")
is "hugeflip: daemon alive" daemon_alive
umount_o
rm -f "$S/hugeflip.xz"

bfs_end
