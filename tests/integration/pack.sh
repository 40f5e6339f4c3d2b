#!/usr/bin/env bash
# shellcheck disable=SC2016 # bash -c and eval scripts expand their own arguments
# SPDX-License-Identifier: MIT
#
# blockfs-pack integration suite (blockfs-pack(1)). Packs real files (text,
# binaries, random bytes, empty, one byte, exact multiples of the block
# size) with every codec and several block sizes and checks that lz4 -d,
# gzip -d and bgzip -d give the originals back; packs a tree, mounts it
# with blockfs and compares names, bytes, modes, times and links with the
# source; counts the daemon's pread calls while stat-ing a large packed
# file against an lz4-made one; and checks -t, --index, the refusals,
# full-disk and read errors, and that an interrupted pack leaves nothing
# under the final name.
#
# Also: one message and exit 1 when the target fills up or is read-only,
# -u resuming an interrupted tree, no .gzi for one-member BGZF files, and
# -v's ratio against blockfs-stat's. zstd, xz and bzip2 files of their own
# writers (zstd, pzstd, xz, xz -T2, bzip2): -t of good, flipped and cut
# copies, --index-cache entries a mount then opens without a walk, -u
# keeping good outputs and making one-frame / one-block ones again, and
# blockfs-stat's warning about their layout, whose command is run.
#
# Usage: pack.sh BLOCKFS BLOCKFS_PACK [BLOCKFS_STAT]   (meson passes all three)
# Exit: 0 all passed, 1 something failed, 77 skipped (no FUSE/tools/root).
# Environment: BFS_KEEP=1 keeps the state directory.

set -u

BLOCKFS=${1:?usage: pack.sh BLOCKFS BLOCKFS_PACK}
PACK=${2:?usage: pack.sh BLOCKFS BLOCKFS_PACK}
STAT=${3:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

bfs_begin pack lz4 gzip bgzip python3 strace cmp
BLOCKFS=$(realpath "$BLOCKFS")
PACK=$(realpath "$PACK")
[[ -z "$STAT" ]] || STAT=$(realpath "$STAT")

STATE=$T		# bfs_begin's state directory
GEN=$STATE/gen
MNT=$STATE/mnt
mkdir -p "$GEN" "$MNT"
TMPFS=

# ------------------------------------------------------------- fixtures

FILES=(text bin rnd empty one)
python3 "$HERE/helper.py" gentext "$GEN/text" 1500000 3 zyzzogeton 5 >/dev/null
: >"$GEN/bin"
while IFS= read -r f; do
	cat "$f" >>"$GEN/bin"
	(($(stat -c %s "$GEN/bin") >= 1500000)) && break
done < <(find /usr/lib /usr/bin -maxdepth 2 -type f -size +100k 2>/dev/null | sort)
truncate -s 1499999 "$GEN/bin"
head -c 700000 /dev/urandom >"$GEN/rnd"
: >"$GEN/empty"
printf 'x' >"$GEN/one"

# exact BYTES NAME: a file of exactly BYTES, half text and half random.
exact() {
	{ head -c $(($1 / 2)) "$GEN/text"; head -c $(($1 - $1 / 2)) "$GEN/rnd"; } >"$GEN/$2"
	FILES+=("$2")
}
exact $((4 * 65536)) x64k
exact $((2 * 262144)) x256k
exact $((1048576)) x1m
exact $((3 * 65280)) xbgzf
exact $((65536 + 1)) x64k_p1

# ------------------------------------------------- round trips per codec

# roundtrip CODEC BLOCK DECODER...: pack every fixture, decode with the
# stock tool, compare, and -t the result.
roundtrip() {
	local codec=$1 block=$2 ext=.lz4 also=", lz4 -t too" dir f bad=() extra=()
	shift 2
	[[ $codec == gzip ]] && ext=.gz also=
	[[ -n $block ]] && extra=(-B "$block")
	dir=$STATE/rt-$codec-${block:-default}
	[[ -d $dir ]] && dir=$dir-$1
	mkdir -p "$dir"
	for f in "${FILES[@]}"; do
		if ! "$PACK" -q -c "$codec" "${extra[@]}" -o "$dir/$f$ext" "$GEN/$f" 2>"$dir/err"; then
			bad+=("$f: pack failed: $(cat "$dir/err")")
		elif ! "$@" <"$dir/$f$ext" | cmp -s - "$GEN/$f"; then
			bad+=("$f: $* does not give the original")
		elif ! "$PACK" -t "$dir/$f$ext" 2>"$dir/err"; then
			bad+=("$f: -t: $(cat "$dir/err")")
		elif [[ $ext == .lz4 ]] && ! lz4 -t "$dir/$f$ext" 2>"$dir/err"; then
			# lz4 1.9.4 rejected block checksums without a content checksum
			# when the seek table followed
			bad+=("$f: lz4 -t: $(tail -c 300 "$dir/err")")
		fi
	done
	if ((${#bad[@]} == 0)); then
		ok "-c $codec ${block:+-B $block }: ${#FILES[@]} files round-trip through $1, -t passes${also}"
	else
		not_ok "-c $codec ${block:+-B $block }round trip" "${bad[@]}"
	fi
}

roundtrip lz4 "" lz4 -dc
roundtrip lz4 64K lz4 -dc
roundtrip lz4 1M lz4 -dc
roundtrip lz4 4M lz4 -dc
roundtrip lz4hc 256K lz4 -dc
roundtrip gzip "" gzip -dc
roundtrip gzip "" bgzip -dc
roundtrip gzip 16K gzip -dc

# Packed LZ4 carries block checksums and its table; --no-checksum drops the former.
"$PACK" -q -o "$STATE/nock.lz4" --no-checksum "$GEN/text"
check "--no-checksum output decodes with lz4 -d" bash -c \
	'lz4 -dc "$1" | cmp -s - "$2"' _ "$STATE/nock.lz4" "$GEN/text"
check_eq "--no-checksum output is smaller by 4 bytes a block and the content checksum" \
	$(($(stat -c %s "$STATE/rt-lz4-default/text.lz4") - 4 * 6 - 4)) "$(stat -c %s "$STATE/nock.lz4")"
check "--no-checksum output passes lz4 -t" lz4 -t "$STATE/nock.lz4"

# The same output whatever the thread count: blocks are written in order.
"$PACK" -q -j1 -B 64K -o "$STATE/j1.lz4" "$GEN/bin"
"$PACK" -q -j4 -B 64K -o "$STATE/j4.lz4" "$GEN/bin"
"$PACK" -q -j3 -c gzip -o "$STATE/j3.gz" "$GEN/bin"
"$PACK" -q -j1 -c gzip -o "$STATE/j1.gz" "$GEN/bin"
check "-j1 and -j4 write the same bytes" cmp "$STATE/j1.lz4" "$STATE/j4.lz4"
check "-j1 and -j3 write the same BGZF and .gzi" bash -c \
	'cmp "$1" "$2" && cmp "$1.gzi" "$2.gzi"' _ "$STATE/j1.gz" "$STATE/j3.gz"

# The .gzi is what bgzip -i writes for the same members.
cp "$STATE/j1.gz" "$STATE/reidx.gz"
bgzip -r "$STATE/reidx.gz"
check "the .gzi equals bgzip -r's for the same file" cmp "$STATE/j1.gz.gzi" "$STATE/reidx.gz.gzi"

# FILE beside FILE, input kept; standard input to standard output.
cp "$GEN/text" "$STATE/beside"
"$PACK" "$STATE/beside"
check "FILE writes FILE.lz4 beside it and keeps FILE" bash -c \
	'cmp -s "$1" "$2" && lz4 -dc "$1.lz4" | cmp -s - "$2"' _ "$STATE/beside" "$GEN/text"
"$PACK" -c gzip "$STATE/beside"
check "-c gzip writes FILE.gz and FILE.gz.gzi" bash -c \
	'gzip -dc "$1.gz" | cmp -s - "$2" && [[ -s "$1.gz.gzi" ]]' _ "$STATE/beside" "$GEN/text"
check "- packs standard input to standard output" bash -c \
	'"$1" - <"$2" | lz4 -dc | cmp -s - "$2"' _ "$PACK" "$GEN/bin"
check "- with -c gzip gives BGZF on standard output" bash -c \
	'"$1" -c gzip - <"$2" | gzip -dc | cmp -s - "$2"' _ "$PACK" "$GEN/bin"
out=$("$PACK" -o "$STATE/quiet.lz4" "$GEN/text" 2>&1)
check_eq "no progress line when stderr is not a terminal" "" "$out"
if command -v script >/dev/null; then
	mkdir -p "$STATE/tty"
	cp "$GEN/text" "$GEN/bin" "$STATE/tty/"
	out=$(script -qec "$PACK -j1 -B 64K $STATE/tty/text $STATE/tty/bin" /dev/null)
	if [[ "$out" == *"ETA"* && "$out" == *$'\r'* ]]; then
		ok "a progress line (bytes, rate, ETA) updates in place on a terminal"
	else
		not_ok "progress line on a terminal" "got: ${out:0:300}"
	fi
	out=$(script -qec "$PACK -q -f -o $STATE/tty.lz4 $GEN/text" /dev/null)
	check_eq "-q: no progress line on a terminal" "" "$out"
fi

# ------------------------------------------------------------ refusals

cp "$GEN/text" "$STATE/keep"
"$PACK" -q "$STATE/keep"
sum=$(md5sum <"$STATE/keep.lz4")
check_fails "an existing output is not overwritten without -f" "already exists; use -f" \
	"$PACK" "$STATE/keep"
check_eq "... and stays as it was" "$sum" "$(md5sum <"$STATE/keep.lz4")"
check "-f overwrites it" "$PACK" -f -B 64K "$STATE/keep"
check_fails "packing x.lz4 again is refused" "already has the .lz4 suffix" \
	"$PACK" "$STATE/keep.lz4"
check_fails "a directory without -r is refused" "is a directory" "$PACK" "$GEN"
check_fails "a missing input is named" "nothing-here: No such file or directory" \
	"$PACK" "$STATE/nothing-here"
check_fails "-B past the format's limit is refused" "block size" "$PACK" -B 8M "$GEN/text"
check_fails "gzip -B past a BGZF member is refused" "65280" "$PACK" -c gzip -B 64K "$GEN/text"
check_fails "an unknown codec is refused" "unknown codec" "$PACK" -c brotli "$GEN/text"
check_fails "zstd -l out of range is refused" "zstd levels are 1 to 19" \
	"$PACK" -c zstd -l 20 "$GEN/text"
check_fails "xz -l out of range is refused" "xz levels are 0 to 9" "$PACK" -c xz -l 10 "$GEN/text"
check_fails "zstd -B past 32M is refused" "4K to 32M for zstd" "$PACK" -c zstd -B 33M "$GEN/text"
check_fails "-l out of range is refused" "levels are 3 to 12" "$PACK" -c lz4hc -l 2 "$GEN/text"

# A full disk: clear message, non-zero exit, no output, input untouched.
TMPFS=$STATE/small
mkdir -p "$TMPFS"
bfs_at_exit bfs_lazy_umount "$TMPFS"
if mount -t tmpfs -o size=256k tmpfs "$TMPFS" 2>/dev/null; then
	sum=$(md5sum <"$GEN/rnd")
	check_fails "a full disk is a write error" "write error: No space left on device" \
		"$PACK" -o "$TMPFS/rnd.lz4" "$GEN/rnd"
	check_eq "... leaving nothing in the directory" "" "$(ls -A "$TMPFS")"
	check_eq "... and the input untouched" "$sum" "$(md5sum <"$GEN/rnd")"
	umount "$TMPFS"
else
	diag "no tmpfs: full-disk checks skipped"
fi

# ------------------------------------------------------------- -t

cp "$STATE/rt-lz4-64K/text.lz4" "$STATE/flip.lz4"
python3 - "$STATE/flip.lz4" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(200000)
    b = f.read(1)
    f.seek(200000)
    f.write(bytes([b[0] ^ 0x10]))
EOF
out=$("$PACK" -t "$STATE/flip.lz4" "$STATE/rt-lz4-64K/bin.lz4" 2>&1)
rc=$?
if ((rc != 0)) && [[ $(wc -l <<<"$out") == 1 && "$out" == *flip.lz4*checksum* ]]; then
	ok "-t catches a flipped byte in an LZ4 block: one line, non-zero exit"
else
	not_ok "-t on a flipped LZ4 byte" "exit $rc, output: $out"
fi
cp "$STATE/rt-gzip-default/text.gz" "$STATE/flip.gz"
python3 - "$STATE/flip.gz" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(100000)
    b = f.read(1)
    f.seek(100000)
    f.write(bytes([b[0] ^ 0x01]))
EOF
check_fails "-t catches a flipped byte in a BGZF member" "flip.gz: block" "$PACK" -t "$STATE/flip.gz"
head -c -10 "$STATE/rt-lz4-default/bin.lz4" >"$STATE/cut.lz4"
check_fails "-t catches a truncated file" "cut.lz4" "$PACK" -t "$STATE/cut.lz4"
cp "$STATE/rt-lz4-64K/text.lz4" "$STATE/lie.lz4"
python3 - "$STATE/lie.lz4" <<'EOF'
import struct, sys
# Make the table lie about two blocks' sizes (the total unchanged) and fix
# the table's checksum:
# the table checks pass, so only -t (or a read) can tell.
def xxh32(data, seed=0):
    P1, P2, P3, P4, P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    M = 0xFFFFFFFF
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) & M
    rnd = lambda a, i: (rotl((a + i * P2) & M, 13) * P1) & M
    n, p = len(data), 0
    if n >= 16:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while n - p >= 16:
            for k in range(4):
                v[k] = rnd(v[k], struct.unpack_from("<I", data, p + 4 * k)[0])
            p += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while n - p >= 4:
        h = (rotl((h + struct.unpack_from("<I", data, p)[0] * P3) & M, 17) * P4) & M
        p += 4
    while p < n:
        h = (rotl((h + data[p] * P5) & M, 11) * P1) & M
        p += 1
    h ^= h >> 15; h = (h * P2) & M; h ^= h >> 13; h = (h * P3) & M; h ^= h >> 16
    return h
b = bytearray(open(sys.argv[1], "rb").read())
count = struct.unpack_from("<I", b, len(b) - 36 + 16)[0]
size = 8 + 16 * count + 36
tab = len(b) - size
e1 = tab + 8 + 16
info = struct.unpack_from("<I", b, e1 + 12)[0]
struct.pack_into("<I", b, e1 + 12, info - 1)
e2 = tab + 8 + 16 * (count - 1)          # the last, short block: room to grow
info = struct.unpack_from("<I", b, e2 + 12)[0]
struct.pack_into("<I", b, e2 + 12, info + 1)
struct.pack_into("<I", b, len(b) - 8, xxh32(bytes(b[tab + 8:len(b) - 8])))
open(sys.argv[1], "wb").write(b)
EOF
check_fails "-t catches a seek table that lies about sizes" "seek table disagrees" \
	"$PACK" -t "$STATE/lie.lz4"
check "-t passes files made by lz4 and bgzip" bash -c \
	'lz4 -q -f "$2" "$3/ref.lz4" && bgzip -c "$2" >"$3/ref.gz" && "$1" -t "$3/ref.lz4" "$3/ref.gz"' \
	_ "$PACK" "$GEN/text" "$STATE"

# ---------------------------------------------------------- --index

lz4 -q -f -B4 "$GEN/bin" "$STATE/ext.lz4"
size0=$(stat -c %s "$STATE/ext.lz4")
check "--index adds a seek table to an lz4-made file" "$PACK" --index "$STATE/ext.lz4"
check "... which stays valid for lz4 -d" bash -c \
	'lz4 -dc "$1" | cmp -s - "$2"' _ "$STATE/ext.lz4" "$GEN/bin"
check "... and passes -t (the table agrees with the blocks)" "$PACK" -t "$STATE/ext.lz4"
if (($(stat -c %s "$STATE/ext.lz4") > size0)); then
	ok "... by appending, without recompressing ($size0 -> $(stat -c %s "$STATE/ext.lz4") bytes)"
else
	not_ok "--index appended nothing"
fi
check "--index twice is a no-op" bash -c \
	's=$(md5sum <"$2"); "$1" -q --index "$2" && [[ $(md5sum <"$2") == "$s" ]]' _ "$PACK" "$STATE/ext.lz4"
bgzip -c "$GEN/bin" >"$STATE/ext.gz"
bgzip -c "$GEN/bin" >"$STATE/ref2.gz"
bgzip -r "$STATE/ref2.gz"
check "--index writes the .gzi of a bgzip-made file, as bgzip -r does" bash -c \
	'"$1" --index "$2" && cmp "$2.gzi" "$3.gzi"' _ "$PACK" "$STATE/ext.gz" "$STATE/ref2.gz"
gzip -c "$GEN/text" >"$STATE/plain.gz"
check_fails "--index refuses plain gzip with a reason" "plain gzip, not BGZF" \
	"$PACK" --index "$STATE/plain.gz"

# --------------------------------------------------------- interrupts

# A pack killed mid-way leaves nothing under the final name (SIGINT,
# SIGTERM: not even the temporary file; SIGKILL: only a hidden one).
for sig in INT TERM KILL; do
	out=$STATE/intr-$sig
	mkdir -p "$out"
	fifo=$out/in
	mkfifo "$fifo"
	{ head -c 3000000 "$GEN/bin"; exec sleep 20; } >"$fifo" &
	feeder=$!
	"$PACK" -q -o "$out/big.lz4" "$fifo" &
	pid=$!
	sleep 1
	kill -s "$sig" "$pid"
	wait "$pid" 2>/dev/null
	kill "$feeder" 2>/dev/null
	wait "$feeder" 2>/dev/null
	left=$(cd "$out" && find . -mindepth 1 ! -name in | sort | tr '\n' ' ')
	if [[ ! -e "$out/big.lz4" ]] && { [[ $sig == KILL ]] || [[ -z "$left" ]]; }; then
		ok "SIG$sig during a pack leaves no output under the final name${left:+ (left: $left)}"
	else
		not_ok "SIG$sig during a pack" "left in the directory: $left"
	fi
done

# ---------------------------------------------------- trees and mounts

TSRC=$STATE/tree
mkdir -p "$TSRC/sub/deeper" "$TSRC/emptydir"
for f in "${FILES[@]}"; do cp "$GEN/$f" "$TSRC/$f"; done
cp "$GEN/text" "$TSRC/sub/deeper/notes.txt"
cp "$STATE/rt-lz4-default/text.lz4" "$TSRC/sub/already.lz4"   # shown as it is
cp "$STATE/rt-gzip-default/bin.gz" "$TSRC/sub/already.gz"
ln -s ../text "$TSRC/sub/link-to-text"
ln -s nowhere "$TSRC/dangling"
ln "$TSRC/text" "$TSRC/sub/hardlink"
chmod 600 "$TSRC/rnd"
chmod 755 "$TSRC/bin"
touch -d '2001-02-03 04:05:06' "$TSRC/sub/deeper/notes.txt" "$TSRC/sub/deeper"
touch -h -d '2002-03-04 05:06:07' "$TSRC/dangling"
mkfifo "$TSRC/fifo"

# listing DIR: one line per entry: type, mode, links, size, mtime, name, target.
listing() {
	(cd "$1" && find . -mindepth 1 -printf '%y %m %n %s %T@ %P %l\n' | sort -k6)
}

# tree_check CODEC: pack -r, mount, compare with the source.
tree_check() {
	local codec=$1 dst=$STATE/packed-$1 want got log=$STATE/daemon-$1.log
	check "-r -c $codec packs the tree" "$PACK" -q -c "$codec" -r "$TSRC" "$dst"
	if ! bfs_mount "$dst" "$MNT" "$log" "readpath=pread"; then
		not_ok "mount of the -c $codec tree" "exit ${BFS_EXIT:-timeout}"
		show_log
		return
	fi
	# A decoded file has st_nlink 1 (blockfs cannot tell which other names of
	# its backing inode are decoded without walking SOURCE): the hard link
	# shows as one st_ino under both names instead.
	want=$(listing "$TSRC" | awk '$1 == "f" && $3 > 1 { sub(/^f [0-7]+ [0-9]+ /, "f " $2 " 1 ") } 1')
	got=$(listing "$MNT")	# the .gz.gzi sidecars of -c gzip are hidden: no difference
	check_eq "mounted -c $codec tree: a hard link keeps one st_ino under both names" \
		"$(stat -c %i "$MNT/text")" "$(stat -c %i "$MNT/sub/hardlink")"
	check_eq "mounted -c $codec tree: same names, types, modes, links, sizes, mtimes, targets" \
		"$want" "$got"
	check "mounted -c $codec tree: same bytes in every file" bash -c \
		'cd "$1" && find . -type f -print0 | xargs -0 -I{} cmp {} "$2/{}"' _ "$TSRC" "$MNT"
	if ! bfs_umount; then
		not_ok "unmount of the -c $codec tree"
		show_log
	fi
}
tree_check lz4
tree_check gzip
check_fails "-r into an existing DST is refused" "already exists" \
	"$PACK" -r "$TSRC" "$STATE/packed-lz4"
check "-r -f packs into an existing DST" "$PACK" -q -f -r "$TSRC" "$STATE/packed-lz4"
check "every file in the packed tree passes -t" bash -c \
	'find "$2" -name "*.lz4" -print0 | xargs -0 "$1" -t' _ "$PACK" "$STATE/packed-lz4"

# A read error while packing (a corrupt file read through a blockfs mount).
RSRC=$STATE/readerr
mkdir -p "$RSRC"
cp "$STATE/flip.lz4" "$RSRC/flip.lz4"
if bfs_mount "$RSRC" "$MNT" "$STATE/daemon-readerr.log" "readpath=pread"; then
	sum=$(md5sum <"$RSRC/flip.lz4")
	check_fails "an unreadable input is a read error naming it" "flip: read error: Input/output error" \
		"$PACK" -o "$STATE/fromflip.lz4" "$MNT/flip"
	check_eq "... leaving no output" "no" "$([[ -e $STATE/fromflip.lz4 ]] && echo yes || echo no)"
	check_eq "... and the input untouched" "$sum" "$(md5sum <"$RSRC/flip.lz4")"
	bfs_umount || not_ok "unmount after the read-error check"
fi

# ------------------------------------------- open + stat reads few bytes

# preads_for_stat DIR NAME: the daemon's pread64 and preadv2 calls (reads
# try the page cache alone first, with preadv2), from mount to unmount,
# around one stat of NAME (a fresh mount: nothing cached).
preads_for_stat() {
	local dir=$1 name=$2 st=$STATE/strace-$2.txt
	VALGRIND="strace -f -c -e trace=pread64,preadv2 -o $st" bfs_mount "$dir" "$MNT" \
		"$STATE/daemon-stat.log" "readpath=pread" || { echo -1; return; }
	stat -c %s "$MNT/$name" >/dev/null
	bfs_umount >/dev/null 2>&1
	awk '$NF == "pread64" || $NF == "preadv2" { n += $4 } END { print n + 0 }' "$st"
}

BIG=$STATE/bigsrc
mkdir -p "$BIG/packed" "$BIG/lz4" "$BIG/indexed" "$BIG/bgzf"
for _ in $(seq 20); do cat "$GEN/text" "$GEN/bin"; done >"$GEN/big"   # 60 MB
"$PACK" -q -B 64K -o "$BIG/packed/big.lz4" "$GEN/big"
lz4 -q -B4 "$GEN/big" "$BIG/lz4/big.lz4"
cp "$BIG/lz4/big.lz4" "$BIG/indexed/big.lz4"
"$PACK" -q --index "$BIG/indexed/big.lz4"
"$PACK" -q -c gzip -o "$BIG/bgzf/big.gz" "$GEN/big"
blocks=$(($(stat -c %s "$GEN/big") / 65536))
n_packed=$(preads_for_stat "$BIG/packed" big)
n_lz4=$(preads_for_stat "$BIG/lz4" big)
n_indexed=$(preads_for_stat "$BIG/indexed" big)
diag "pread64/preadv2 calls for mount + stat of a ${blocks}-block file: blockfs-pack $n_packed," \
	"--index $n_indexed, lz4 $n_lz4"
# a walk reads the whole file, in requests of up to 1 MiB (bfs_io_ahead)
chunks=$(($(stat -c %s "$BIG/lz4/big.lz4") / 1048576))
if ((n_packed >= 0 && n_packed <= 8 && n_lz4 >= chunks)); then
	ok "stat of a packed file reads the seek table, not the blocks ($n_packed preads vs $n_lz4)"
else
	not_ok "stat of a packed file" "packed: $n_packed preads, lz4-made: $n_lz4, blocks: $blocks"
fi
mkdir -p "$BIG/bgzf-nogzi"
cp "$BIG/bgzf/big.gz" "$BIG/bgzf-nogzi/big.gz"
n_bgzf=$(preads_for_stat "$BIG/bgzf" big)
n_walk=$(preads_for_stat "$BIG/bgzf-nogzi" big)
diag "BGZF: $n_bgzf preads with the .gzi, $n_walk without"
if ((n_bgzf >= 0 && n_bgzf <= 8 && n_walk >= $(($(stat -c %s "$BIG/bgzf/big.gz") / 1048576)))); then
	ok "stat of a -c gzip file reads its .gzi, not the members ($n_bgzf preads vs $n_walk)"
else
	not_ok "stat of a -c gzip file" "with .gzi: $n_bgzf preads, without: $n_walk"
fi
if ((n_indexed >= 0 && n_indexed <= 8)); then
	ok "after --index, stat of an lz4-made file reads $n_indexed times"
else
	not_ok "stat after --index" "$n_indexed preads"
fi
if bfs_mount "$BIG/packed" "$MNT" "$STATE/daemon-big.log" "readpath=pread"; then
	check "the large packed file reads back exactly through the mount" cmp "$MNT/big" "$GEN/big"
	bfs_umount || not_ok "unmount after the large file"
fi

# ------------------------------------- errors that repeat, and -u

# A tree of 30 incompressible files onto 2 MiB: the first file that does
# not fit stops the run with one message; rerun with -u elsewhere later.
ETREE=$STATE/etree
mkdir -p "$ETREE/sub"
for i in $(seq 1 30); do head -c 300000 /dev/urandom >"$ETREE/f$i"; done
cp "$GEN/text" "$ETREE/sub/text"
cp "$GEN/one" "$ETREE/sub/one"
if mount -t tmpfs -o size=2m tmpfs "$TMPFS" 2>/dev/null; then
	rc=0
	out=$("$PACK" -q -r "$ETREE" "$TMPFS/out" 2>&1) || rc=$?
	check_eq "-r onto a full disk: exit 1" 1 "$rc"
	check_eq "... with one message, not one per remaining file" 1 \
		"$(grep -c . <<<"$out")"
	check_eq "... which says why and what to do" 1 \
		"$(grep -c 'No space left on device; stopping.*-u' <<<"$out")"
	# A target gone read-only stops the same way.
	rm -rf "${TMPFS:?}/out"
	mount -o remount,ro "$TMPFS"
	rc=0
	out=$("$PACK" -q -u -r "$ETREE" "$TMPFS/out" 2>&1) || rc=$?
	check_eq "-r onto a read-only filesystem: exit 1, one message" "1 1" \
		"$rc $(grep -c . <<<"$out")"
	umount "$TMPFS"
else
	diag "no tmpfs: the full-disk tree checks are skipped"
fi

# -u resumes: an interrupted tree pack (SIGINT part-way), then a rerun.
UTREE=$STATE/utree
mkdir -p "$UTREE/a" "$UTREE/b"
for i in $(seq 1 12); do
	head -c 16M "$GEN/big" >"$UTREE/a/t$i"	# about 50 ms each with -j1
	cp "$GEN/bin" "$UTREE/b/b$i"
done
ln "$UTREE/a/t1" "$UTREE/b/t1-link"
"$PACK" -q -j1 -r "$UTREE" "$STATE/upacked" &
pid=$!
for _ in $(seq 500); do		# Ctrl-C once the first output is in place
	[[ -e "$STATE/upacked/a/t1.lz4" ]] && break
	sleep 0.01
done
kill -INT "$pid" 2>/dev/null
wait "$pid"
diag "interrupted: $(find "$STATE/upacked" -name '*.lz4' | wc -l) of 25 outputs written," \
	"$(find "$STATE/upacked" -name '.*' | wc -l) temporary files left"
check_fails "after Ctrl-C a plain rerun refuses the existing tree" "use -u" \
	"$PACK" -q -r "$UTREE" "$STATE/upacked"
check "-u finishes the interrupted tree" "$PACK" -q -u -r "$UTREE" "$STATE/upacked"
same_tree() {	# every file decodes to its source, hard link included
	local f
	for f in a/t{1..12} b/b{1..12} b/t1-link; do
		lz4 -dc "$STATE/upacked/$f.lz4" | cmp -s - "$UTREE/$f" || { echo "$f"; return 1; }
	done
	[[ $(stat -c %i "$STATE/upacked/a/t1.lz4") == $(stat -c %i "$STATE/upacked/b/t1-link.lz4") ]]
}
is "... and the result is the whole tree, the hard link kept" same_tree
# Identity of each output: inode and ctime, since a file removed and made
# again may get its old inode number back (seen once in CI for b/b4.lz4).
inodes() { find "$STATE/upacked" -name '*.lz4' -printf '%P %i %C@\n' | sort; }
before=$(inodes)
check "-u again: nothing to do" "$PACK" -q -u -r "$UTREE" "$STATE/upacked"
check_eq "... every output kept as it was (same inodes)" "$before" "$(inodes)"
# An input changed since, an output cut short, an output missing: made again.
touch -d '+1 hour' "$UTREE/a/t2"
truncate -s 1000 "$STATE/upacked/a/t3.lz4"
rm "$STATE/upacked/b/b4.lz4"
"$PACK" -q -u -r "$UTREE" "$STATE/upacked"
changed=$(diff <(echo "$before") <(inodes) | sed -n 's/^> \([^ ]*\) .*/\1/p' | tr '\n' ' ')
check_eq "-u makes again exactly the outdated, the damaged and the missing outputs" \
	"a/t2.lz4 a/t3.lz4 b/b4.lz4 " "$changed"
is "... and the tree is whole" same_tree
cp "$GEN/text" "$STATE/ufile"
"$PACK" -q "$STATE/ufile"
ino=$(stat -c %i "$STATE/ufile.lz4")
check "-u on a FILE whose output is current: exit 0" "$PACK" -q -u "$STATE/ufile"
check_eq "... the output kept" "$ino" "$(stat -c %i "$STATE/ufile.lz4")"
check_fails "without -u or -f: refused, naming -u" "-u to update" "$PACK" -q "$STATE/ufile"

# -------------------------------- .gzi of one member; one ratio convention

cp "$GEN/one" "$STATE/single"
"$PACK" -q -c gzip "$STATE/single"
check_eq "-c gzip of a one-member file writes no .gzi" "" "$(ls "$STATE/single.gz.gzi" 2>/dev/null)"
check "... and the file decodes" bash -c 'gzip -dc "$1.gz" | cmp -s - "$1"' _ "$STATE/single"
: >"$STATE/single.gz.gzi"		# a stale one from some earlier file
"$PACK" -q -f -c gzip "$STATE/single"
check_eq "-f over it removes a stale .gzi" "" "$(ls "$STATE/single.gz.gzi" 2>/dev/null)"
cp "$GEN/text" "$STATE/multi"
"$PACK" -q -c gzip "$STATE/multi"
check "-c gzip of a many-member file still writes its .gzi" test -s "$STATE/multi.gz.gzi"
GTREE=$STATE/gtree
mkdir -p "$GTREE/src"
cp "$GEN/one" "$GEN/empty" "$GTREE/src/"
cp "$GEN/text" "$GTREE/src/text"
"$PACK" -q -c gzip -r "$GTREE/src" "$GTREE/packed"
check_eq "-c gzip -r: a .gzi only beside the many-member file" "text.gz.gzi" \
	"$(cd "$GTREE/packed" && printf '%s\n' ./*.gzi | sed 's|^\./||')"
if bfs_mount "$GTREE/packed" "$MNT" "$STATE/daemon-g.log" "readpath=pread"; then
	check "diff -r of the mounted -c gzip tree and its source: nothing" \
		diff -r "$GTREE/src" "$MNT"
	bfs_umount || not_ok "unmount of the -c gzip tree"
fi

if [[ -n "$STAT" ]]; then
	mkdir -p "$STATE/ratio"
	line=$("$PACK" -v -o "$STATE/ratio/text.lz4" "$GEN/text" 2>&1)
	if bfs_mount "$STATE/ratio" "$MNT" "$STATE/daemon-r.log" "readpath=pread"; then
		check_eq "-v and blockfs-stat give one ratio (decompressed / compressed)" \
			"$(sed -n 's/.*(ratio \([0-9.]*\)).*/\1/p' <<<"$line")" \
			"$("$STAT" "$MNT/text" | awk '$1 == "ratio" { print $2 }')"
		bfs_umount || not_ok "unmount of the ratio tree"
	fi
fi


# ------------------------------------------------------------ zstd and xz

# Several frames / blocks of text, read back by the stock tools and through
# a mount: whole, and at seeded random offsets.
mkdir -p "$STATE/zx"
seq 1 400000 | sed 's/$/ some words of text to compress/' >"$STATE/zx/text"
check "-c zstd -B 256K packs" "$PACK" -q -c zstd -B 256K "$STATE/zx/text"
check "zstd -t accepts it" zstd -q -t "$STATE/zx/text.zst"
check "zstd -dc gives the input back" sh -c "zstd -q -dc '$STATE/zx/text.zst' | cmp - '$STATE/zx/text'"
nfr=$(tail -c 9 "$STATE/zx/text.zst" | od -An -tu4 -N4 | tr -d ' ')
want=$(( ($(stat -c %s "$STATE/zx/text") + 262143) / 262144 ))
check_eq "the seek table footer counts one frame per 256K" "$want" "$nfr"
check "-c xz -B 512K packs" "$PACK" -q -c xz -B 512K "$STATE/zx/text"
check "xz -t accepts it" xz -t "$STATE/zx/text.xz"
check "xz -dc gives the input back" sh -c "xz -dc '$STATE/zx/text.xz' | cmp - '$STATE/zx/text'"
check_eq "xz -l counts one block per 512K" \
	"$(( ($(stat -c %s "$STATE/zx/text") + 524287) / 524288 ))" \
	"$(xz --robot -l "$STATE/zx/text.xz" | awk '$1 == "file" { print $3 }')"
mkdir -p "$STATE/zxm"
mv "$STATE/zx/text.zst" "$STATE/zxm/z.zst"
mv "$STATE/zx/text.xz" "$STATE/zxm/x.xz"
: | "$PACK" -q -c zstd -o "$STATE/zxm/empty.zst" -
check "an empty input makes a zstd file zstd -t accepts" zstd -q -t "$STATE/zxm/empty.zst"
# seeded_misses GOT WANT N SEED: 1 if any of N 4 KiB reads of GOT at seeded
# offsets differs from WANT's bytes there, else 0.
seeded_misses() {
	local size i off miss=0
	size=$(stat -c %s "$2")
	for ((i = 1; i <= $3; i++)); do
		off=$(( (i * 7919 * 104729 + $4) % (size - 5000) ))
		cmp -s <(dd if="$1" bs=4096 count=1 iflag=skip_bytes skip=$off 2>/dev/null) \
		       <(dd if="$2" bs=4096 count=1 iflag=skip_bytes skip=$off 2>/dev/null) || miss=1
	done
	echo "$miss"
}

if bfs_mount "$STATE/zxm" "$MNT" "$STATE/daemon-zx.log" "readpath=pread"; then
	check_eq "blockfs indexes the zstd output from its seek table" "seektable" \
		"$(getfattr --only-values -n user.blockfs.index_source "$MNT/z" 2>/dev/null)"
	for f in z x; do
		check "$f: read whole through the mount" cmp "$MNT/$f" "$STATE/zx/text"
		check_eq "$f: 6 reads at seeded offsets match the input" 0 \
			"$(seeded_misses "$MNT/$f" "$STATE/zx/text" 6 12345)"
	done
	check_eq "the empty zstd output is shown empty" 0 "$(stat -c %s "$MNT/empty")"
	bfs_umount || not_ok "unmount of the zstd/xz tree"
else
	not_ok "mount of the zstd/xz tree"
	show_log
fi

# ----------------------- zstd, xz and bzip2 from their own writers

# Files of the real writers (zstd, pzstd, xz, xz -T2, bzip2) and of -c zstd
# / -c xz: -t, damaged copies, --index-cache then a mount, -u, and the
# warning of blockfs-stat with the command it gives, run as given.
if ! command -v zstd pzstd xz bzip2 getfattr >/dev/null 2>&1 ||
	[[ $(command -v zstd pzstd xz bzip2 getfattr | wc -l) != 5 ]]; then
	diag "zstd, pzstd, xz, bzip2 or getfattr missing: their section skipped"
else
W=$STATE/w			# the inputs
F=$STATE/f			# what the writers made
mkdir -p "$W" "$F"
seq 1 400000 | sed 's/$/ some words of text to compress/' >"$W/textsrc"
# mix: text and random bytes (11.5 MB); big: 7 of those (80.5 MB), one
# unit of which is past what blockfs decodes whole (zstd 32 MiB, xz 64
# MiB). The random bytes make the walks long enough (at least 8 reads)
# for their indexes to be worth an index cache entry.
{ head -c 9000000 "$W/textsrc"; head -c 2500000 /dev/urandom; } >"$W/mix"
for i in 1 2 3 4 5 6 7; do
	head -c 9000000 "$W/textsrc"
	head -c 2500000 /dev/urandom
done >"$W/big"
MIXSZ=$(stat -c %s "$W/mix") BIGSZ=$(stat -c %s "$W/big")
zstd -q -c "$W/mix" >"$F/z1.zst"			# one frame, with its content size
zstd -q -c -1 "$W/big" >"$F/zbig.zst"			# one frame of 71 MB: spans
pzstd -q -p 2 -c "$W/mix" >"$F/pz.zst"			# pzstd's frames
xz -q -T1 -0 -c "$W/mix" >"$F/x1.xz"			# one block
xz -q -T1 -0 -c "$W/big" >"$F/xbig.xz"			# one block of 71 MB: spans
xz -q -T2 -0 --block-size=1MiB -c "$W/mix" >"$F/xt2.xz"	# many blocks
bzip2 -q -c "$W/mix" >"$F/b.bz2"			# 900 kB blocks
"$PACK" -q -c zstd -o "$F/zs.zst" "$W/mix"
"$PACK" -q -c xz -o "$F/xs.xz" "$W/mix"

# -- -t

for f in z1.zst zbig.zst pz.zst x1.xz xbig.xz xt2.xz b.bz2 zs.zst xs.xz; do
	out=$(t "$PACK" -t -v "$F/$f" 2>&1)
	rc=$?
	check_eq "-t $f (by its writer): exit 0, OK" "0 $F/$f: OK" "$rc $(tail -n 1 <<<"$out")"
done
mkdir -p "$STATE/dmg"
# damaged COPY: a byte in the middle flipped, and the file cut at 2/3
for f in z1.zst pz.zst x1.xz xt2.xz b.bz2 zs.zst xs.xz; do
	size=$(stat -c %s "$F/$f")
	cp "$F/$f" "$STATE/dmg/flip-$f"
	python3 -c '
import sys
p, off = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0xff]))' \
		"$STATE/dmg/flip-$f" $((size / 2))
	head -c $((size * 2 / 3)) "$F/$f" >"$STATE/dmg/cut-$f"
	for d in flip cut; do
		out=$(t "$PACK" -t "$STATE/dmg/$d-$f" 2>&1)
		rc=$?
		if ((rc == 1)) && [[ $(grep -c . <<<"$out") == 1 &&
			$out == "blockfs-pack: $STATE/dmg/$d-$f: damaged"* ]]; then
			ok "-t $d-$f: exit 1, one line naming the file and the damage"
		else
			not_ok "-t $d-$f: exit 1, one line naming the file and the damage" \
				"exit $rc, output: $out"
		fi
	done
done
# a seek table entry damaged: zstd -t skips the table, blockfs walks the frames
size=$(stat -c %s "$F/zs.zst")
cp "$F/zs.zst" "$STATE/dmg/table-zs.zst"
printf '\x77' | dd of="$STATE/dmg/table-zs.zst" bs=1 seek=$((size - 20)) conv=notrunc 2>/dev/null
check "a -c zstd output with a seek table entry damaged: zstd -t accepts it" \
	zstd -q -t "$STATE/dmg/table-zs.zst"
check_fails "... -t does not: blockfs would walk it" "seek table unusable (blockfs ignores it" \
	"$PACK" -t "$STATE/dmg/table-zs.zst"
diag "-t of a damaged copy: $(t "$PACK" -t "$STATE/dmg/flip-b.bz2" 2>&1)"
diag "-t of a cut copy: $(t "$PACK" -t "$STATE/dmg/cut-xt2.xz" 2>&1)"
out=$(t "$PACK" -t "$F/zs.zst" "$STATE/dmg/cut-zs.zst" "$F/b.bz2" 2>&1)
check_eq "-t of three files, one bad: exit 1, one line" "1 1" "$? $(grep -c . <<<"$out")"

# -- --index and --index-cache

IC=$STATE/icache
mkdir -m 700 "$IC"
# the mount's source, linked first: a link changes the inode's ctime, which keys the entry
mkdir -p "$STATE/icsrc"
for f in zbig.zst xbig.xz b.bz2; do ln "$F/$f" "$STATE/icsrc/$f"; done
ids() { (cd "$F" && stat -c '%n %i %s %Y %Z' zbig.zst xbig.xz b.bz2 && md5sum zbig.zst xbig.xz b.bz2); }
before=$(ids)
out=$(t "$PACK" -v --index --index-cache "$IC" "$F/zbig.zst" "$F/xbig.xz" "$F/b.bz2" 2>&1)
check_eq "--index --index-cache of one-frame zstd, one-block xz, bzip2: exit 0" 0 "$?"
for c in zstd bzip2; do
	check "... kept a $c index (its walk reads the file)" grep -q "kept its $c index" <<<"$out"
done
# xz states every block's sizes in its own index: a mount reads that, a
# few reads from the end, and spans a big block without decoding it first
check "... none of the xz file (it has its own index: a few reads)" \
	grep -q "xbig.xz: walked in [0-9] reads.*not kept" <<<"$out"
check_eq "... 2 entries in the cache" 2 "$(find "$IC" -name '*.idx' | wc -l)"
check_eq "... the files left as they were" "$before" "$(ids)"
out=$(t "$PACK" --index --index-cache "$IC" "$F/zs.zst" "$F/xt2.xz" 2>&1)
check_eq "... a seekable zstd and a many-block xz: exit 0, nothing kept" \
	"0 2" "$? $(find "$IC" -name '*.idx' | wc -l)"
check "... saying why (a seek table; the xz index costs a few reads)" bash -c \
	'grep -q "has its own index (a seek table)" <<<"$1" && grep -q "walked in .* reads" <<<"$1"' \
	_ "$out"
check_fails "... a damaged bzip2 file refused" "damaged, not indexed" \
	"$PACK" --index --index-cache "$IC" "$STATE/dmg/flip-b.bz2"
check_fails "--index alone of a zstd file: nothing to add in place, and what does" \
	"--index-cache DIR keeps the index" "$PACK" --index "$F/z1.zst"
# A mount with that cache opens them from the entries: index_source cache,
# a few backing reads for the first stat; one without it walks them.
# first_stat NAME: "SOURCE READS" of NAME after a stat on a fresh mount
first_stat() {
	stat -c %s "$MNT/$1" >/dev/null
	echo "$(getfattr --only-values -n user.blockfs.index_source "$MNT/$1" 2>/dev/null)" \
		"$(getfattr --only-values -n user.blockfs.stats "$MNT/$1" 2>/dev/null |
			awk '$1 == "backing_syscalls" { print $2 }')"
}
declare -A WALKED SRC=([zbig]=big [xbig]=big [b]=mix)
if bfs_mount "$STATE/icsrc" "$MNT" "$STATE/daemon-ic0.log" "readpath=pread"; then
	for f in zbig xbig b; do WALKED[$f]=$(first_stat $f); done
	bfs_umount || not_ok "unmount of the uncached mount"
fi
if bfs_mount "$STATE/icsrc" "$MNT" "$STATE/daemon-ic.log" "readpath=pread,index_cache=$IC"; then
	for f in zbig xbig b; do
		src=${SRC[$f]}
		got=$(first_stat $f)
		walked=${WALKED[$f]:-?}
		diag "$f: first stat without the cache: index ${walked% *}, ${walked#* } reads;" \
			"with it: index ${got% *}, ${got#* } reads"
		if [[ $f == xbig ]]; then
			if [[ ${got% *} == xz-walk && ${got#* } -le 8 ]]; then
				ok "$f: the mount reads the xz index, no entry needed (${got#* } reads)"
			else
				not_ok "$f: the mount reads the xz index" "$got"
			fi
		elif [[ ${got% *} == cache && ${got#* } -le 2 && ${walked% *} == *-walk &&
			${walked#* } -gt ${got#* } ]]; then
			ok "$f: the mount takes the index from the entry, no walk (${got#* } reads, a walk ${walked#* })"
		else
			not_ok "$f: the mount takes the index from the entry, no walk" \
				"with the cache: $got; without: $walked"
		fi
		check_eq "$f: ... walk: complete" complete \
			"$(getfattr --only-values -n user.blockfs.walk "$MNT/$f" 2>/dev/null)"
		check "$f: ... and reads whole exact" cmp "$MNT/$f" "$W/$src"
		check_eq "$f: ... 4 reads at seeded offsets exact" 0 \
			"$(seeded_misses "$MNT/$f" "$W/$src" 4 4242)"
	done
	bfs_umount || not_ok "unmount of the cached mount"
else
	not_ok "mount with the index cache"
	show_log
fi

# -- -u: the codec asked says whether an output is current

U=$STATE/u
mkdir -p "$U"
cp -p "$W/mix" "$U/mix"
"$PACK" -q -c zstd "$U/mix"
"$PACK" -q -c xz "$U/mix"
idz() { stat -c '%i %Y %z' "$U/mix.zst"; }
idx_() { stat -c '%i %Y %z' "$U/mix.xz"; }
bz=$(idz) bx=$(idx_)
out=$(t "$PACK" -v -u -c zstd "$U/mix" 2>&1)
check_eq "-u -c zstd over its own output: kept, up to date" "0 $U/mix.zst: up to date" "$? $out"
check_eq "... the same file (inode, mtime, ctime)" "$bz" "$(idz)"
out=$(t "$PACK" -v -u -c xz "$U/mix" 2>&1)
check_eq "-u -c xz over its own output: kept, up to date" "0 $U/mix.xz: up to date" "$? $out"
check_eq "... the same file (inode, mtime, ctime)" "$bx" "$(idx_)"
t "$PACK" -q -u -c zstd -B 512K "$U/mix"
check "-u -c zstd -B 512K: frames of another size are made again" \
	test "$bz" != "$(idz)"
check_eq "... as 512K frames" $(( ($(stat -c %s "$U/mix") + 524287) / 524288 )) \
	"$(tail -c 9 "$U/mix.zst" | od -An -tu4 -N4 | tr -d ' ')"
# the stock tools' output, with the input's mtime (as they keep it): not seekable
rm "$U/mix.zst" "$U/mix.xz"
zstd -q -k "$U/mix"
xz -q -k -T1 -0 "$U/mix"
bz=$(idz) bx=$(idx_)
check_eq "(zstd and xz keep the input's mtime)" "$(stat -c %Y "$U/mix") $(stat -c %Y "$U/mix")" \
	"$(stat -c %Y "$U/mix.zst") $(stat -c %Y "$U/mix.xz")"
t "$PACK" -q -u -c zstd "$U/mix"
t "$PACK" -q -u -c xz "$U/mix"
check "-u over zstd's one frame and xz's one block: both made again" \
	test "$bz" != "$(idz)" -a "$bx" != "$(idx_)"
check "... as the seekable format (its footer) and many xz blocks" bash -c \
	'[[ $(tail -c 4 "$1.zst" | od -An -tx4 | tr -d " ") == 8f92eab1 ]] &&
	 (($(xz --robot -l "$1.xz" | awk "\$1 == \"file\" { print \$3 }") > 1))' _ "$U/mix"
check "... both pass -t" "$PACK" -t "$U/mix.zst" "$U/mix.xz"
cut=$(idz)
truncate -s -100 "$U/mix.zst"
touch -r "$U/mix" "$U/mix.zst"
t "$PACK" -q -u -c zstd "$U/mix"
check "-u over a cut -c zstd output: made again, whole" bash -c \
	'[[ $1 != $(stat -c "%i %Y %z" "$2.zst") ]] && zstd -q -dc "$2.zst" | cmp -s - "$2"' \
	_ "$cut" "$U/mix"

# -- blockfs-stat: the layout behind random reads, and the command that fixes it

if [[ -n "$STAT" ]]; then
	L=$STATE/layout
	mkdir -p "$L"
	ln "$F/zbig.zst" "$L/zbig.zst"
	ln "$F/z1.zst" "$L/z1.zst"
	ln "$F/x1.xz" "$L/x1.xz"
	ln "$F/b.bz2" "$L/b.bz2"
	ln "$F/zs.zst" "$L/zs.zst"
	ln "$F/xs.xz" "$L/xs.xz"
	if bfs_mount "$L" "$MNT" "$STATE/daemon-l.log" "readpath=pread"; then
		for f in zbig:"one zstd frame of .* ($BIGSZ) holds the whole file" \
			 z1:"one zstd frame of .* ($MIXSZ) holds the whole file" \
			 x1:"one xz block of .* ($MIXSZ) holds the whole file" \
			 b:"[0-9]* bzip2 blocks of up to"; do
			n=${f%%:*} want=${f#*:}
			case $n in z*) cmd="blockfs-pack -c zstd -o $n.zst $MNT/$n" ;;
				   *) cmd="blockfs-pack -c xz -o $n.xz $MNT/$n" ;; esac
			out=$(t "$STAT" "$MNT/$n" 2>&1)
			check "blockfs-stat $n: the warning names the layout and the command" bash -c \
				'grep -q "^  warning .*$2.*make it seekable.* with: $3\$" <<<"$1"' \
				_ "$out" "$want" "$cmd"
			check "... --json: warning and repack" python3 -c '
import json, re, subprocess, sys
[j] = json.loads(subprocess.run([sys.argv[1], "--json", sys.argv[2]], capture_output=True,
                                check=True).stdout)
want = sys.argv[3].replace("(", "[(]").replace(")", "[)]")
assert re.search(want, j["warning"]) and j["repack"] == sys.argv[4], j
assert j["units"] >= 1 and j["unit_max"] > 262144, j
' "$STAT" "$MNT/$n" "$want" "$cmd"
		done
		check "blockfs-stat zbig: shows its spans decoded as one unit" bash -c \
			'grep -q "^  decoded as  *1, the largest .* ($2)" <<<"$1"' _ \
			"$(t "$STAT" "$MNT/zbig")" "$BIGSZ"
		for n in zs xs; do
			check "blockfs-stat $n (blockfs-pack's 1 MiB units): no warning" python3 -c '
import json, subprocess, sys
[j] = json.loads(subprocess.run([sys.argv[1], "--json", sys.argv[2]], capture_output=True,
                                check=True).stdout)
assert j["warning"] is None and j["repack"] is None and j["unit_max"] == 1048576, j
' "$STAT" "$MNT/$n"
		done
		# The command as blockfs-stat gives it, run in a directory of its own.
		mkdir -p "$STATE/repack"
		for n in zbig x1 b; do
			cmd=$("$STAT" --json "$MNT/$n" | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["repack"])')
			check "$n: the command blockfs-stat gives runs" bash -c \
				'cd "$1" && PATH=$(dirname "$2"):$PATH eval "$3 -q"' _ "$STATE/repack" "$PACK" "$cmd"
		done
		bfs_umount || not_ok "unmount of the layout tree"
		check "... and makes files -t passes" "$PACK" -t "$STATE/repack/zbig.zst" \
			"$STATE/repack/x1.xz" "$STATE/repack/b.xz"
		check "... which decode to the originals" bash -c \
			'zstd -q -dc "$1/zbig.zst" | cmp -s - "$2/big" && xz -dc "$1/x1.xz" | cmp -s - "$2/mix" &&
			 xz -dc "$1/b.xz" | cmp -s - "$2/mix"' _ "$STATE/repack" "$W"
		rm -f "$L"/*
		mv "$STATE/repack/zbig.zst" "$STATE/repack/x1.xz" "$STATE/repack/b.xz" "$L/"
		if bfs_mount "$L" "$MNT" "$STATE/daemon-l2.log" "readpath=pread"; then
			for n in zbig x1 b; do
				check "$n repacked: no warning now, 1 MiB units" python3 -c '
import json, subprocess, sys
[j] = json.loads(subprocess.run([sys.argv[1], "--json", sys.argv[2]], capture_output=True,
                                check=True).stdout)
assert j["warning"] is None and j["unit_max"] == 1048576 and j["units"] > 1, j
' "$STAT" "$MNT/$n"
			done
			bfs_umount || not_ok "unmount of the repacked layout tree"
		fi
	else
		not_ok "mount of the layout tree"
		show_log
	fi
fi
fi

bfs_end
