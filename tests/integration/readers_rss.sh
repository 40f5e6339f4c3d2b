#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Memory of 16 readers of zstd, xz and bzip2 files at once, each writer
# at its default window: zstd (one frame, 2 MiB window), xz -T1 (one
# block over 64 MiB: chained spans and parked decoders), xz -T2 (blocks
# of 24 MiB, decoded whole), bzip2 -9 (blocks of 900 kB). Four readers
# cat each file, all at once, on one mount with the default cache_size:
#   - every reader's bytes equal X -dc of its file;
#   - the daemon's peak resident set (VmHWM) stays within the bound of
#     blockfs(8): cache_size + 32 MiB, plus one decoder window per stream
#     being decoded, here each reader's: what its format's tool says one
#     decoder needs (zstd -lv: the window; xz -lvv: the memory, dictionary
#     and state, plus the block for xz -T2, whose blocks of up to 64 MiB
#     blockfs decodes whole; bzip2(1): 100 kB + 4 x the block size).
#     Measured peaks: 88-153 MiB under this load (bench/results/codecs/),
#     against a bound of about 247 MiB.
#
# Usage: readers_rss.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: readers_rss.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin readers_rss zstd xz bzip2 python3
PER_FILE=4
MIB=$((1 << 20))

S=$T/src M=$T/mnt W=$T/want
mkdir -p "$S" "$M" "$W"

# Log-like text: 4 MiB of random lines, repeated with a running number so
# that no two lines are equal; 72 MiB (xz -T1 makes one block over the 64
# MiB blockfs decodes whole, so it is served as chained spans), 32 MiB for
# bzip2 (its decode is the slow one).
python3 - "$T/text" 72 <<'PY'
import random, sys
r = random.Random(16)
words = ["GET", "PUT", "/index.html", "/api/v1/items", "200", "404", "ok", "slow",
         "cache", "miss", "hit", "user", "session", "checkpoint"]
chunk = []
size = 0
while size < 4 << 20:
    line = " ".join(r.choice(words) for _ in range(r.randint(3, 12)))
    chunk.append(line)
    size += len(line) + 10
with open(sys.argv[1], "w") as f:
    n = 0
    for _ in range(int(sys.argv[2]) // 4):
        for line in chunk:
            f.write("%08d %s\n" % (n, line))
            n += 1
PY
head -c $((32 * MIB)) "$T/text" > "$T/text32"
# xz at the default window (dictionary 8 MiB), with preset 1's faster match finder
XZ_OPTS=("--lzma2=preset=1,dict=8MiB")
zstd -q -c "$T/text" > "$S/z.zst"
xz -T1 "${XZ_OPTS[@]}" -c "$T/text" > "$S/one.xz"
xz -T2 "${XZ_OPTS[@]}" -c "$T/text" > "$S/blocks.xz"
bzip2 -9 -c "$T/text32" > "$S/b.bz2"
zstd -dc "$S/z.zst" > "$W/z"
xz -dc "$S/one.xz" > "$W/one"
xz -dc "$S/blocks.xz" > "$W/blocks"
bzip2 -dc "$S/b.bz2" > "$W/b"
is "xz -T1 made one block" test "$(xz -lv "$S/one.xz" | awk '/Blocks:/{print $2; exit}')" = 1
is "xz -T2 made blocks of 24 MiB" \
	test "$(xz -lv "$S/blocks.xz" | awk '/Blocks:/{print $2; exit}')" -ge 3

# Each reader's window, in bytes, from the format's own tool.
zwin=$(zstd -lv "$S/z.zst" 2>&1 | awk '/Window Size:/{gsub(/[()B]/, "", $5); print $5; exit}')
xzmem=$(xz -lvv --robot "$S/one.xz" | awk -F'\t' '$1 == "summary" {print $2; exit}')
xzmem2=$(xz -lvv --robot "$S/blocks.xz" | awk -F'\t' '$1 == "summary" {print $2; exit}')
# xz -T2's blocks (24 MiB) are decoded whole: the largest counts with its decoder
xzblk=$(xz -lvv --robot "$S/blocks.xz" | awk -F'\t' '$1 == "block" && $8 > m {m = $8} END {print m}')
bzmem=$((100000 + 4 * 900000))
is "the windows are known" test -n "$zwin" -a -n "$xzmem" -a -n "$xzmem2" -a -n "$xzblk"
xzmem2=$((xzmem2 + xzblk))
diag "windows: zstd $zwin, xz -T1 $xzmem, xz -T2 $xzmem2 (block $xzblk), bzip2 $bzmem bytes"

# meson test sets MALLOC_PERTURB_, with which glibc fills every block it
# hands out: pages a decode would never touch become resident.
unset MALLOC_PERTURB_
if ! bfs_mount "$S" "$M" "$T/daemon.log" index_cache=off; then
	not_ok "mount"; exit 1
fi
CACHE=$((32 * MIB))	# cache_size's default
for f in z one blocks b; do
	stat "$M/$f" > /dev/null
done

pids=() names=()
for f in z one blocks b; do
	for i in $(seq "$PER_FILE"); do
		cmp "$M/$f" "$W/$f" > "$T/cmp.$f.$i" 2>&1 &
		pids+=($!)
		names+=("$f.$i")
	done
done
bad=0
for i in "${!pids[@]}"; do
	if ! wait "${pids[$i]}"; then
		bad=$((bad + 1))
		diag "reader ${names[$i]}: $(cat "$T/cmp.${names[$i]}")"
	fi
done
check_eq "16 readers: every reader's bytes equal X -dc" 0 "$bad"

hwm=$(awk '/^VmHWM/{print $2 * 1024}' "/proc/$BFS_PID/status")
# The bound: cache_size + 32 MiB + one window per stream being decoded.
bound=$((CACHE + 32 * MIB + PER_FILE * (zwin + xzmem + xzmem2 + bzmem)))
diag "peak RSS (VmHWM) $((hwm / MIB)) MiB; bound $((bound / MIB)) MiB =" \
	"cache_size $((CACHE / MIB)) + 32 + $PER_FILE x (zstd $((zwin / MIB)) + xz" \
	"$((xzmem / MIB)) + xz -T2 $((xzmem2 / MIB)) MiB + bzip2 3.7 MB)"
if bfs_sanitized "$BLOCKFS"; then
	ok "peak RSS within cache_size + 32 MiB + one window per stream # SKIP sanitizer build"
else
	check "peak RSS within cache_size + 32 MiB + one window per stream" test "$hwm" -le "$bound"
fi
is "daemon alive" daemon_alive
bfs_umount
bfs_end
