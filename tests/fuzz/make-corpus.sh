#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Regenerate the seed inputs of the fuzzing corpus (tests/fuzz/corpus/
# TARGET/seed-*) from small deterministic data, with the real tools: lz4
# (block sizes, checksums, content size, linked and legacy frames,
# concatenated and skippable frames), bgzip (with .gzi), gzip and
# blockfs-pack (seek tables, BGZF), for plain gzip gzip, pigz and
# Python, and for bzip2 bzip2, pbzip2, lbzip2 and Python. crash-* inputs
# (regressions) are kept.
#
# Usage: tests/fuzz/make-corpus.sh BLOCKFS-PACK
# Needs: lz4, bgzip (tabix), gzip, pigz, python3 (with python3-lz4), zstd, pzstd,
# python3-zstandard, xz, bzip2, pbzip2, lbzip2.

set -euo pipefail

pack=$(realpath "$1")
cd "$(dirname "${BASH_SOURCE[0]}")"
C=$PWD/corpus
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

for t in lz4 lz4_linked bgzf gzi seektable block hints opts gzip zstd xz bzip2; do
	mkdir -p "$C/$t"
	rm -f "$C/$t"/seed-*
done

# Data: log-like text (compresses about 4x) and pseudo-random bytes (stored blocks).
python3 - "$T" <<'PY'
import random, sys
t = sys.argv[1]
r = random.Random(7)
lines = ["read block %d ok\n", "seek to %d\n", "cache hit %d\n", "frame %d: 4 blocks, index written\n"]
def text(n):
    out, size, i = [], 0, 0
    while size < n:
        line = "%08d %s" % (i, r.choice(lines) % r.randint(0, 99))
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out).encode()[:n]
open(t + "/text70k", "wb").write(text(70000))
open(t + "/text20k", "wb").write(text(20000))
open(t + "/text3k", "wb").write(text(3000))
open(t + "/rand66k", "wb").write(bytes(r.getrandbits(8) for _ in range(66000)))
open(t + "/zeros5m", "wb").write(bytes(5 << 20))
open(t + "/hello", "wb").write(b"hello, blockfs\n")
open(t + "/empty", "wb").write(b"")
open(t + "/text300k", "wb").write(text(300000))   # last: the files above stay as they were
PY

# --- lz4: whole files ----------------------------------------------------
L=$C/lz4
lz4 -q -c "$T/empty" > "$L/seed-empty.lz4"
lz4 -q -c "$T/hello" > "$L/seed-hello.lz4"
lz4 -q -c -B4 "$T/text70k" > "$L/seed-B4-text.lz4"
lz4 -q -c -B4 -BX --content-size "$T/text70k" > "$L/seed-B4-bx-csize.lz4"
lz4 -q -c -B5 -BX "$T/text20k" > "$L/seed-B5-bx.lz4"
lz4 -q -c -B4 --no-frame-crc "$T/rand66k" > "$L/seed-B4-stored.lz4"
lz4 -q -c -B7 --content-size "$T/zeros5m" > "$L/seed-B7-zeros-csize.lz4"
lz4 -q -c -B6 -12 "$T/text20k" > "$L/seed-B6-hc.lz4"
lz4 -q -c -BD -B4 "$T/text70k" > "$L/seed-linked.lz4"
lz4 -q -c -l "$T/text3k" > "$L/seed-legacy.lz4"
lz4 -q -c -BD -B4 -BX --content-size "$T/text300k" > "$L/seed-linked-bx-csize.lz4"
lz4 -q -c -BD -B5 --no-frame-crc "$T/rand66k" > "$L/seed-linked-stored.lz4"
cat "$L/seed-legacy.lz4" "$L/seed-linked.lz4" "$L/seed-legacy.lz4" > "$L/seed-legacy-concat.lz4"
# python-lz4: linked blocks (its default), flushed mid-frame, content checksum
PYLZ4=python3
[[ -x /usr/bin/python3 ]] && PYLZ4=/usr/bin/python3	# Debian's python3-lz4 lives there
"$PYLZ4" - "$T/text300k" "$L/seed-linked-flushed.lz4" <<'PY'
import sys
import lz4.frame as lf
data = open(sys.argv[1], "rb").read()
with lf.open(sys.argv[2], "wb", content_checksum=True) as f:
    for i in range(0, len(data), 9000):
        f.write(data[i:i + 9000])
        if i % 27000 == 0:
            f.flush()
PY
cat "$L/seed-hello.lz4" "$L/seed-B5-bx.lz4" "$L/seed-empty.lz4" > "$L/seed-concat.lz4"
# a skippable frame (magic 184D2A5x, LE32 size) before and between frames
{ printf '\x50\x2a\x4d\x18\x05\x00\x00\x00skip!'; cat "$L/seed-hello.lz4"
  printf '\x5f\x2a\x4d\x18\x00\x00\x00\x00'; cat "$L/seed-hello.lz4"; } > "$L/seed-skippable.lz4"
head -c 15000 "$L/seed-B4-text.lz4" > "$L/seed-truncated.lz4"
"$pack" -q -B 4K -o "$L/seed-pack-4k.lz4" "$T/text20k"
"$pack" -q -B 64K --no-checksum -o "$L/seed-pack-64k-nocsum.lz4" "$T/text70k"

# --- lz4_linked: a flags byte, a seed for the content, 64 bytes of edits -----
# (the harness writes the linked frame itself with liblz4)
python3 - "$C/lz4_linked" <<'PY'
import os, sys
d = sys.argv[1]
seed = b"read block 7 ok\nseek to 4096\ncache hit 12\n" * 20
none = bytes(64)                      # no edit: the checkpoints load as saved
flip = bytes(range(1, 65))            # 32 byte flips
cut = bytes(63) + b"\x80"              # a cut at half
for name, flags, edits in [("plain", 0, none), ("csum-256k", 0x0f, none),
                           ("flip", 0x02, flip), ("cut", 0x05, cut), ("empty-seed", 0x08, b"")]:
    body = b"" if name == "empty-seed" else seed
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(bytes([flags]) + body + edits)
PY

# --- bgzf: whole files ---------------------------------------------------
G=$C/bgzf
bgzip -c "$T/empty" > "$G/seed-empty.gz"
bgzip -c "$T/hello" > "$G/seed-hello.gz"
bgzip -c "$T/text70k" > "$G/seed-text.gz"
bgzip -c -l 0 "$T/text3k" > "$G/seed-level0.gz"
bgzip -c "$T/rand66k" > "$G/seed-random.gz"
cat "$G/seed-hello.gz" "$G/seed-text.gz" > "$G/seed-concat.gz"
gzip -n -c "$T/text3k" > "$G/seed-plain-gzip.gz"
head -c 8000 "$G/seed-text.gz" > "$G/seed-truncated.gz"
"$pack" -q -c gzip -B 4K -o "$T/pack.gz" "$T/text20k"
cp "$T/pack.gz" "$G/seed-pack-4k.gz"

# --- gzip (plain): whole files, several 64 KiB spans in the larger ones ------
Z=$C/gzip
gzip -n -1 -c "$T/text300k" > "$Z/seed-gzip1-300k.gz"
gzip -n -9 -c "$T/text300k" > "$Z/seed-gzip9-300k.gz"
gzip -c "$T/text20k" > "$Z/seed-name.gz"		# FNAME set, as gzip FILE writes it
gzip -n -c "$T/empty" > "$Z/seed-empty.gz"
pigz -n -c -b 32 "$T/text300k" > "$Z/seed-pigz.gz"	# sync-flushed 32 KiB blocks
gzip -n -c "$T/rand66k" > "$Z/seed-random.gz"		# stored blocks
cat "$Z/seed-name.gz" "$Z/seed-empty.gz" "$Z/seed-random.gz" > "$Z/seed-concat.gz"
head -c 30000 "$Z/seed-gzip1-300k.gz" > "$Z/seed-truncated.gz"
{ cat "$Z/seed-name.gz"; head -c 64 /dev/zero; } > "$Z/seed-padded.gz"
cp "$G/seed-text.gz" "$Z/seed-bgzf.gz"			# BGZF is gzip too
# Python's gzip module, and a header with every field (FEXTRA, FNAME, FCOMMENT, FHCRC)
python3 - "$T" "$Z" <<'PY'
import gzip, struct, sys, zlib
t, z = sys.argv[1], sys.argv[2]
text = open(t + "/text70k", "rb").read()
with open(z + "/seed-python.gz", "wb") as f:
    with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, compresslevel=6) as g:
        for i in range(0, len(text), 7000):
            g.write(text[i:i + 7000])
            g.flush()                      # Z_SYNC_FLUSH: empty stored blocks
extra = b"XY" + struct.pack("<H", 3) + b"abc"
hdr = b"\x1f\x8b\x08" + bytes([0x1e]) + struct.pack("<I", 0) + b"\x00\xff"
hdr += struct.pack("<H", len(extra)) + extra + b"name\0" + b"comment\0"
hdr += struct.pack("<H", zlib.crc32(hdr) & 0xffff)
c = zlib.compressobj(6, zlib.DEFLATED, -15)
body = c.compress(text[:20000]) + c.flush()
trailer = struct.pack("<II", zlib.crc32(text[:20000]), 20000)
open(z + "/seed-fields.gz", "wb").write(hdr + body + trailer)
PY

# --- bzip2: streams of one and several blocks, joined, damaged ---------------
B=$C/bzip2
bzip2 -1 -c "$T/text300k" > "$B/seed-bzip2-1-300k.bz2"	# 3 blocks, at bit offsets
bzip2 -9 -c "$T/text20k" > "$B/seed-bzip2-9.bz2"
bzip2 -c "$T/empty" > "$B/seed-empty.bz2"
bzip2 -1 -c "$T/rand66k" > "$B/seed-random.bz2"
bzip2 -1 -c "$T/zeros5m" > "$B/seed-zeros.bz2"		# runs: 45 MB a block at most
pbzip2 -c -1 -b1 "$T/text300k" > "$B/seed-pbzip2.bz2"	# a stream per block
lbzip2 -c -1 "$T/text300k" > "$B/seed-lbzip2.bz2"
cat "$B/seed-empty.bz2" "$B/seed-bzip2-9.bz2" "$B/seed-empty.bz2" "$B/seed-random.bz2" \
	> "$B/seed-concat.bz2"
head -c 30000 "$B/seed-bzip2-1-300k.bz2" > "$B/seed-truncated.bz2"
{ cat "$B/seed-bzip2-9.bz2"; head -c 64 /dev/zero; } > "$B/seed-padded.bz2"
{ cat "$B/seed-bzip2-9.bz2"; printf 'BZh9junk'; } > "$B/seed-junk.bz2"
# Python's bz2, and a block whose symbol map spells the block magic: the
# bytes it holds are those whose bits in three map words are 0x3141 0x5926
# 0x5359, so a false magic sits inside every block's header.
python3 - "$T" "$B" <<'PY'
import bz2, random, sys
t, b = sys.argv[1], sys.argv[2]
text = open(t + "/text70k", "rb").read()
open(b + "/seed-python.bz2", "wb").write(bz2.compress(text, 2))
vals = []
for r, word in enumerate([0x3141, 0x5926, 0x5359] + [0xffff] * 13):
    vals += [r * 16 + j for j in range(16) if word & (0x8000 >> j)]
rng = random.Random(3)
data = bytes(rng.choice(vals) for _ in range(30000))
open(b + "/seed-false-magic.bz2", "wb").write(bz2.compress(data, 1))
PY

# --- gzi: LE32 length of the .gzi, the .gzi, then the BGZF file -------------
pair() { # OUT GZI GZ
	python3 -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<I", int(sys.argv[1])))' \
		"$(stat -c %s "$2")" > "$1"
	cat "$2" "$3" >> "$1"
}
for f in text level0 concat; do
	cp "$G/seed-$f.gz" "$T/$f.gz"
	bgzip -r "$T/$f.gz"
	pair "$C/gzi/seed-$f" "$T/$f.gz.gzi" "$T/$f.gz"
done
pair "$C/gzi/seed-pack-4k" "$T/pack.gz.gzi" "$T/pack.gz"
cp "$G/seed-empty.gz" "$T/empty.gz"
bgzip -r "$T/empty.gz"
pair "$C/gzi/seed-empty" "$T/empty.gz.gzi" "$T/empty.gz"

# --- seektable: blockfs-pack outputs, and files without a table ----------------
S=$C/seektable
"$pack" -q -B 4K -o "$S/seed-pack-4k.lz4" "$T/text3k"
"$pack" -q -B 4K -o "$S/seed-pack-4k-40k.lz4" "$T/text20k"
"$pack" -q -B 64K --no-checksum -o "$S/seed-pack-64k-nocsum.lz4" "$T/text70k"
"$pack" -q -o "$S/seed-pack-hello.lz4" "$T/hello"
cat "$S/seed-pack-hello.lz4" "$S/seed-pack-4k.lz4" > "$S/seed-pack-concat.lz4"
cp "$L/seed-B5-bx.lz4" "$S/seed-no-table.lz4"

# --- block: 6-byte header (codec, flags, bmax id, claimed usize), then one block -------
python3 - "$C/block" "$L" "$G" <<'PY'
import os, struct, sys
out, ldir, gdir = sys.argv[1:]
def lz4_blocks(data):
    """(block bytes, has checksum, bmax id) of the first frame's blocks."""
    flg, bd = data[4], data[5]
    pos = 7 + (8 if flg & 8 else 0) + (4 if flg & 1 else 0)
    csum = 4 if flg & 16 else 0
    while True:
        word = struct.unpack_from("<I", data, pos)[0]
        if word == 0:
            return
        n = 4 + (word & 0x7FFFFFFF) + csum
        yield data[pos:pos + n], bool(csum), (bd >> 4) & 7
        pos += n
def seed(name, codec, csum, bmax, usize, blk):
    hdr = bytes([codec | (2 if csum else 0), bmax]) + struct.pack("<I", usize)
    open(os.path.join(out, "seed-" + name), "wb").write(hdr + blk)
for src, usize in (("B4-text", 65536), ("B5-bx", 20000), ("B4-stored", 65536)):
    data = open(os.path.join(ldir, "seed-%s.lz4" % src), "rb").read()
    for i, (blk, csum, bmax) in enumerate(lz4_blocks(data)):
        if i < 2 and not (src == "B4-stored" and i == 0):
            seed("lz4-%s-%d" % (src, i), 0, csum, bmax, usize, blk)
for src in ("hello", "text", "level0"):
    data = open(os.path.join(gdir, "seed-%s.gz" % src), "rb").read()
    bsize = struct.unpack_from("<H", data, 16)[0] + 1
    isize = struct.unpack_from("<I", data, bsize - 4)[0]
    seed("bgzf-" + src, 1, False, 0, isize, data[:bsize])
PY

# --- zstd: whole files: the CLI, pzstd, Python, concatenations, skippable --------
# frames, a seekable-format file, a frame of many flushed blocks (spans), damage
S=$C/zstd
PYZ=python3
/usr/bin/python3 -c 'import zstandard' 2>/dev/null && PYZ=/usr/bin/python3
zstd -q -c "$T/empty" > "$S/seed-empty.zst"
zstd -q -c "$T/hello" > "$S/seed-hello.zst"
zstd -q -c -19 --check "$T/text20k" > "$S/seed-19-check.zst"
zstd -q -c --no-check "$T/text70k" > "$S/seed-nocheck.zst"
zstd -q -c < "$T/text20k" > "$S/seed-pipe-no-fcs.zst"
zstd -q -c "$T/rand66k" > "$S/seed-raw-blocks.zst"
pzstd -q -p 2 -c "$T/text70k" > "$S/seed-pzstd.zst"
{ zstd -q -c "$T/text3k"; zstd -q -c < "$T/hello"; zstd -q -c "$T/empty"; } > "$S/seed-concat.zst"
head -c 3000 "$S/seed-nocheck.zst" > "$S/seed-truncated.zst"
"$PYZ" - "$T" "$S" <<'PY'
import struct, sys, zstandard as z
t, s = sys.argv[1], sys.argv[2]
text = open(t + "/text20k", "rb").read()
def skippable(n, data):
    return struct.pack("<II", 0x184D2A50 | n, len(data)) + data
# skippable frames around frames
open(s + "/seed-skippable.zst", "wb").write(
    skippable(0, b"x" * 40) + z.ZstdCompressor().compress(text[:5000]) + skippable(15, b"")
    + z.ZstdCompressor(write_checksum=True).compress(text[5000:]))
# no content size, a block per flush: more than 256 blocks make a frame of spans
c = z.ZstdCompressor(write_content_size=False).compressobj()
out = b"".join(c.compress(text[i:i + 64]) + c.flush(z.COMPRESSOBJ_FLUSH_BLOCK)
               for i in range(0, len(text), 64)) + c.flush()
open(s + "/seed-flushed-span.zst", "wb").write(out)
# the seekable format: 4 KiB frames, with and without checksums in the table
for csum in (0, 1):
    frames, table = [], b""
    for i in range(0, len(text), 4096):
        f = z.ZstdCompressor(write_checksum=True).compress(text[i:i + 4096])
        frames.append(f)
        table += struct.pack("<II", len(f), len(text[i:i + 4096]))
        if csum:
            table += f[-4:]
    foot = struct.pack("<IBI", len(frames), 0x80 if csum else 0, 0x8F92EAB1)
    open(s + "/seed-seekable-%d.zst" % csum, "wb").write(
        b"".join(frames) + struct.pack("<II", 0x184D2A5E, len(table) + 9) + table + foot)
PY
# a flipped byte in the middle of a frame
cp "$S/seed-19-check.zst" "$S/seed-flipped.zst"
printf '\x55' | dd of="$S/seed-flipped.zst" bs=1 seek=2000 conv=notrunc 2>/dev/null

# --- xz: one block, many, every check, streams with padding, damage -----------
# (fuzz_xz.c makes blocks over 64 KiB chains of 16 KiB spans: text300k is one)
X=$C/xz
xz -c "$T/hello" > "$X/seed-hello.xz"
xz -c "$T/empty" > "$X/seed-empty.xz"
xz -0 -c "$T/text300k" > "$X/seed-single-300k.xz"
xz -T2 --block-size=16KiB -c "$T/text70k" > "$X/seed-blocks16k.xz"
for c in none crc32 sha256; do
	xz -1 --check=$c --block-size=8KiB -c "$T/text20k" > "$X/seed-check-$c.xz"
done
xz -1 -c "$T/rand66k" > "$X/seed-random.xz"			# uncompressed LZMA2 chunks
xz -1 --x86 --lzma2=preset=1 -c "$T/text20k" > "$X/seed-bcj.xz"
{ xz -c "$T/text3k"; head -c 8 /dev/zero; xz --block-size=1KiB -c "$T/text3k"; } > "$X/seed-streams.xz"
head -c 20000 "$X/seed-single-300k.xz" > "$X/seed-truncated.xz"	# walked forwards
{ cat "$X/seed-blocks16k.xz"; printf 'junk'; } > "$X/seed-garbage.xz"
python3 - "$T" "$X" <<'PY'
import lzma, sys
t, x = sys.argv[1:3]
data = open(t + "/text20k", "rb").read()
open(x + "/seed-python.xz", "wb").write(lzma.compress(data, check=lzma.CHECK_CRC32))
PY

# --- hints: attribute values as setfattr -v passes them -------------------------
H=$C/hints
i=0
for v in normal sequential random willneed dontneed noreuse "willneed 0 64M" \
	"dontneed 4096 1G" "willneed 18446744073709551614 1" pread mmap auto 256K; do
	printf '%s' "$v" > "$H/seed-$i"
	i=$((i + 1))
done
printf 'mmap\0' > "$H/seed-nul"

# --- opts: the arguments after "blockfs", one per line ---------------------
O=$C/opts
i=0
for v in 'src\nmnt' '-o\nreadpath=mmap,populate=async,cache_size=64M\nsrc\nmnt' \
	'-oreadahead=0,workers=4,verify=off,advice=sequential\nsrc\nmnt' \
	'-f\n-o\nallow_other,readpath=auto\nsrc\nmnt' '-o\ncache_size=0,readahead=1G\nsrc' \
	'-o\nworkers=256,advice=noreuse,populate=on\n-o\nverify=on\nsrc\nmnt'; do
	printf '%b' "$v" > "$O/seed-$i"	# \n in $v: the line breaks
	i=$((i + 1))
done

for t in "$C"/*; do
	echo "$(basename "$t"): $(find "$t" -type f | wc -l) files, $(cat "$t"/* | wc -c) bytes"
done
echo "total: $(find "$C" -type f | wc -l) files, $(find "$C" -type f -exec cat {} + | wc -c) bytes"
