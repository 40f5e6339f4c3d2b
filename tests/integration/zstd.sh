#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# zstd: files from zstd (default, -19, -T0, no content size through a
# pipe, concatenations), pzstd, Python's zstandard (compress() and
# stream_writer), bsdtar --zstd (x.tar.zst, and x.tzst shown as x.tar),
# and a seekable-format writer written here (64 KiB frames, with and
# without checksums in the table) are shown decoded with the size and
# bytes zstd -dc gives, whole and in seeded random ranges, under both
# read paths; a one-frame file of 40 MiB (spans) is read by a sequential
# cat in linear time and by concurrent readers. Damage (truncated, a byte
# flipped in a frame and in the seek table, a seek table that lies,
# trailing garbage, a --long=31 window) serves the intact prefix, then
# EIO (the window: no bytes, a log line saying why); the daemon lives on
# and other files still read. With index_cache a remount does not walk
# again.
#
# Usage: zstd.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: zstd.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin zstd zstd pzstd bsdtar getfattr python3
# The system's Python has python3-zstandard (a python3 earlier on the PATH may not).
PY=python3
/usr/bin/python3 -c 'import zstandard' 2>/dev/null && PY=/usr/bin/python3
"$PY" -c 'import zstandard' 2>/dev/null || skip "no python3 zstandard"
S=$T/src M=$T/mnt C=$T/cache W=$T/work
mkdir -p "$S" "$M" "$C" "$W"
chmod 700 "$C"

# Log-like text, about 4:1: 40 MiB (more than a frame block: spans) and 3 MiB.
"$PY" - "$W" <<'PY'
import random, sys
w = sys.argv[1]
r = random.Random(21)
words = ["GET", "PUT", "/index.html", "/api/v1/items", "200", "404", "ok", "slow",
         "cache", "miss", "hit", "user", "session", "span"]
def text(n):
    out, size, i = [], 0, 0
    while size < n:
        line = "%09d %s %s %d\n" % (i, r.choice(words), " ".join(r.choices(words, k=4)),
                                    r.randint(0, 1 << 20))
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out).encode()[:n]
open(w + "/big", "wb").write(text(40 << 20))
open(w + "/small", "wb").write(text(3 << 20))
PY
big=$W/big small=$W/small
zstd -q -c "$big" >"$S/d.zst"
zstd -q -c -19 "$small" >"$S/l19.zst"
zstd -q -c -T0 "$big" >"$S/t0.zst"
zstd -q -c <"$big" >"$S/pipe.zst"
zstd -q -c --no-content-size <"$small" >"$S/pipesmall.zst"
pzstd -q -p 2 -c "$big" >"$S/pz.zst"
{ zstd -q -c "$small"; zstd -q -c -1 <"$small"; zstd -q -c -9 "$big"; } >"$S/multi.zst"
"$PY" - "$small" "$big" "$S" <<'PY'
import sys, zstandard as z
small, big, s = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read(), sys.argv[3]
open(s + "/py.zst", "wb").write(z.ZstdCompressor(level=3, write_checksum=True).compress(small))
with open(s + "/pystream.zst", "wb") as f:
    with z.ZstdCompressor(level=3).stream_writer(f) as w:
        for i in range(0, len(big), 1 << 20):
            w.write(big[i:i + (1 << 20)])
PY
# the seekable format, written here from its specification: 64 KiB frames
cat >"$T/seekable.py" <<'PY'
import struct, sys, zstandard as z
data, out, csum = open(sys.argv[1], "rb").read(), sys.argv[2], sys.argv[3] == "1"
frames, table = [], b""
for i in range(0, len(data), 65536):
    chunk = data[i:i + 65536]
    f = z.ZstdCompressor(level=3, write_checksum=True).compress(chunk)
    frames.append(f)
    # the frame's checksum is the low 32 bits of XXH64 of its content: the table's
    table += struct.pack("<II", len(f), len(chunk)) + (f[-4:] if csum else b"")
footer = struct.pack("<IBI", len(frames), 0x80 if csum else 0, 0x8F92EAB1)
with open(out, "wb") as o:
    o.write(b"".join(frames))
    o.write(struct.pack("<II", 0x184D2A5E, len(table) + len(footer)) + table + footer)
PY
"$PY" "$T/seekable.py" "$small" "$S/seek0.zst" 0
"$PY" "$T/seekable.py" "$small" "$S/seek1.zst" 1
mkdir -p "$T/tree/dir"
cp "$small" "$T/tree/dir/a.txt"
head -c 100000 "$big" >"$T/tree/b.txt"
(cd "$T/tree" && bsdtar --zstd -cf "$S/x.tar.zst" dir b.txt && bsdtar --zstd -cf "$S/y.tzst" b.txt)
for f in d l19 t0 pipe pipesmall pz multi py pystream seek0 seek1 x.tar; do
	zstd -q -dc "$S/$f.zst" >"$W/$f" || { not_ok "zstd -dc $f.zst"; exit 1; }
done
zstd -q -dc "$S/y.tzst" >"$W/y.tar"

# --- damage -------------------------------------------------------------------------
head -c $(($(stat -c %s "$S/d.zst") * 2 / 3)) "$S/d.zst" >"$S/cut.zst"
cp "$S/pz.zst" "$S/flip.zst"		# pzstd: a frame per 4 MiB or so; one flipped
printf '\x55' | dd of="$S/flip.zst" bs=1 seek=$(($(stat -c %s "$S/pz.zst") / 2)) \
	conv=notrunc 2>/dev/null
cp "$S/d.zst" "$S/flipone.zst"		# one frame: nothing of it is served
printf '\x55' | dd of="$S/flipone.zst" bs=1 seek=$(($(stat -c %s "$S/d.zst") / 2)) \
	conv=notrunc 2>/dev/null
{ cat "$S/l19.zst"; printf 'garbage, not a frame'; } >"$S/garbage.zst"
cp "$W/l19" "$W/garbage"
zstd -q -c --long=31 <"$small" >"$S/long31.zst"
# the seek table: a compressed size flipped (no longer tiles: walked, exact), a
# decompressed size flipped (a claim measured: the frames before it, then EIO),
# and two sizes that lie in a way that still adds up
"$PY" - "$S" <<'PY'
import struct, sys
s = sys.argv[1]
data = bytearray(open(s + "/seek1.zst", "rb").read())
n = struct.unpack_from("<I", data, len(data) - 9)[0]
entry = lambda i: len(data) - 9 - (n - i) * 12
a = bytearray(data); a[entry(10)] ^= 0x04
open(s + "/seekflipc.zst", "wb").write(a)
b = bytearray(data); b[entry(10) + 4] ^= 0x04
open(s + "/seekflipu.zst", "wb").write(b)
c = bytearray(data)
struct.pack_into("<I", c, entry(20) + 4, 65536 - 1000)
struct.pack_into("<I", c, entry(21) + 4, 65536 + 1000)
open(s + "/seeklie.zst", "wb").write(c)
PY
cp "$W/seek1" "$W/seekflipc"

stat_of() {
	xattr stats "$2" | awk -v k="$1" '$1 == k { print $2 }'
}

# ranges.py FILE REF N SEED: N seeded random reads (anywhere, 1 B to 3 MiB)
cat >"$T/ranges.py" <<'PY'
import os, random, sys
a, b = (open(p, "rb") for p in sys.argv[1:3])
size = os.fstat(b.fileno()).st_size
r = random.Random(int(sys.argv[4]))
for i in range(int(sys.argv[3])):
    off = r.randrange(size)
    n = r.choice([1, 4096, 65536, 1 << 20, 3 << 20, r.randrange(1, 200000)])
    a.seek(off); b.seek(off)
    if a.read(n) != b.read(n):
        sys.exit("range %d at %d, %d bytes differs" % (i, off, n))
PY

# prefix_then_eio FILE REF: cat fails with EIO, and what it gave is a prefix of REF
prefix_then_eio() {
	local got=$T/got.$$ rc=0 n
	t cat "$1" >"$got" 2>"$got.err" || rc=$?
	if ((rc == 0)) || ! grep -q "Input/output error" "$got.err"; then
		echo "cat: exit $rc: $(cat "$got.err")"
		return 1
	fi
	n=$(stat -c %s "$got")
	cmp -s "$got" <(head -c "$n" "$2") || { echo "the $n bytes served differ"; return 1; }
	echo "$n bytes, then EIO"
}

# --- every writer, both read paths ------------------------------------------------------
for rp in pread mmap; do
	mount_o "readpath=$rp,index_cache=off"
	diag "readpath=$rp"
	for f in d l19 t0 pipe pipesmall pz multi py pystream seek0 seek1 x.tar y.tar; do
		check_eq "$rp: $f: size from the first stat" "$(stat -c %s "$W/$f")" \
			"$(t stat -c %s "$M/$f")"
		check_eq "$rp: $f: format zstd" zstd "$(xattr format "$f")"
		check "$rp: $f: cat equals zstd -dc" cmp "$M/$f" "$W/$f"
		n=200
		[[ $f == d || $f == t0 || $f == pipe || $f == pystream ]] && n=40	# one frame
		check "$rp: $f: $n random ranges" "$PY" "$T/ranges.py" "$M/$f" "$W/$f" "$n" 7
	done
	check_eq "$rp: seek1: from its seek table" seektable "$(xattr index_source seek1)"
	check_eq "$rp: d: walked" zstd-walk "$(xattr index_source d)"
	check_eq "$rp: d: 40 spans of 1 MiB" 40 "$(xattr blocks d)"
	check_eq "$rp: x.tar.zst lists as x.tar" "dir/a.txt" \
		"$(t bsdtar -tf "$M/x.tar" | grep a.txt)"
	# damage: the intact prefix, then EIO; the daemon and the other files live on
	for f in cut flip flipone seekflipu seeklie garbage; do
		ref=$W/d
		case $f in flip) ref=$W/pz ;; seek*) ref=$W/seek1 ;; garbage) ref=$W/garbage ;; esac
		checkf "$rp: $f: a prefix of zstd -dc's bytes, then EIO" prefix_then_eio "$M/$f" "$ref"
	done
	n=$(t cat "$M/cut" 2>/dev/null | wc -c)
	if ((n >= 20 << 20)); then ok "$rp: cut: $n bytes before EIO"; else
		not_ok "$rp: cut: only $n bytes"; fi
	n=$(t cat "$M/flip" 2>/dev/null | wc -c)
	if ((n >= 4 << 20)); then ok "$rp: flip: the frames before it ($n bytes)"; else
		not_ok "$rp: flip: only $n bytes"; fi
	check_eq "$rp: garbage: every byte before the garbage" "$(stat -c %s "$W/l19")" \
		"$(t cat "$M/garbage" 2>/dev/null | wc -c)"
	check "$rp: seekflipc: a table that does not tile is ignored: exact" \
		cmp "$M/seekflipc" "$W/seekflipc"
	check_eq "$rp: seekflipc: walked instead" zstd-walk "$(xattr index_source seekflipc)"
	check_fails "$rp: long31: refused" "" cat "$M/long31"
	is "$rp: long31: the log says why" grep -q "larger than 128 MiB" "$T/daemon.log"
	is "$rp: the daemon lives" daemon_alive
	check "$rp: after all that, small files read exact" cmp "$M/l19" "$W/l19"
	umount_o
done

# --- one big frame: a cat is linear, readers at once are exact ----------------------------
mount_o "readpath=pread,cache_size=16M,index_cache=off"
t0=$(date +%s%N)
t stat -c %s "$M/d" >/dev/null
diag "first stat of d (40 MiB, one frame: the walk decodes it): $((($(date +%s%N) - t0) / 1000000)) ms"
check "cat d equals zstd -dc" cmp "$M/d" "$W/d"
dec=$(stat_of blocks_decompressed d)
# each once, give or take a late READ of a span gone from the cache, which
# resumes from a decoder parked behind it (quadratic would be about 800)
if ((dec <= 80)); then ok "cat of 40 spans decoded $dec spans (linear)"; else
	not_ok "cat of 40 spans decoded $dec spans"; fi
pids=()
for i in 1 2 3; do
	t cmp "$M/t0" "$W/t0" >"$T/cmp$i" 2>&1 &
	pids+=($!)
done
t "$PY" "$T/ranges.py" "$M/t0" "$W/t0" 30 11 >"$T/cmp4" 2>&1 &
pids+=($!)
bad=0
for i in "${!pids[@]}"; do
	wait "${pids[$i]}" || { bad=1; cat "$T/cmp$((i + 1))"; }
done
check_eq "3 cats and a random reader of t0 at once: all exact" 0 "$bad"
umount_o

# --- a frame whose header states its size: open spans ------------------------------------
# (d and flipone: zstd FILE). The first stat walks block headers only; with
# verify (above) a damaged frame serves nothing, without it the spans
# before the damage are served exact and the rest as zstd -dc writes them
# (a walk that decoded the frame at the first stat would refuse it all).
mount_o "verify=off,index_cache=off"
check_eq "verify=off: d: size from the first stat" "$(stat -c %s "$W/d")" "$(t stat -c %s "$M/d")"
check "verify=off: d: cat equals zstd -dc" cmp "$M/d" "$W/d"
check "verify=off: d: 40 random ranges" "$PY" "$T/ranges.py" "$M/d" "$W/d" 40 9
check "verify=off: flipone: its first 4 MiB exact" cmp <(t head -c $((4 << 20)) "$M/flipone") \
	<(head -c $((4 << 20)) "$W/d")
is "verify=off: daemon alive" daemon_alive
umount_o

# --- the index cache: one walk per file version -------------------------------------------
mount_o "index_cache=$C"
t stat "$M/d" "$M/pz" "$M/pipe" >/dev/null
check_eq "first mount: d walked" zstd-walk "$(xattr index_source d)"
w=$(stat_of backing_syscalls d)
umount_o
mount_o "index_cache=$C"
check_eq "remount: d's size" "$(stat -c %s "$W/d")" "$(t stat -c %s "$M/d")"
n=$(stat_of backing_syscalls d)
if ((n <= 4)); then ok "remount: first stat of d: $n backing reads (walk: $w)"; else
	not_ok "remount: first stat of d: $n backing reads (walk: $w)"; fi
check_eq "remount: d from the cache" cache "$(xattr index_source d)"
check_eq "remount: pipe from the cache" cache "$(xattr index_source pipe)"
check "remount: d reads exact" cmp "$M/d" "$W/d"
check "remount: d random ranges" "$PY" "$T/ranges.py" "$M/d" "$W/d" 20 3
check "remount: pz reads exact" cmp "$M/pz" "$W/pz"
umount_o

bfs_end
