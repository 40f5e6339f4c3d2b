#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The block cache under load on a real mount: 16 readers read 16 different
# files at once through an 8 MiB cache. Every byte must match, the cache's
# own count must stay within its bound plus what readers hold in flight,
# and the daemon's resident memory within the bound plus a fixed overhead.
#
# Usage: cache.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: cache.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin cache lz4 getfattr

READERS=16
LIMIT=$((8 << 20))
# In flight: each reader holds at most the blocks of one request (1 MiB of
# 64 KiB blocks, plus the two it straddles), and the workers one each.
SLACK=$(((READERS * 18 + 4) * 65536))
RSS_OVERHEAD_KB=$((64 << 10))	# threads, buffers, index, libc: measured well below

S=$T/src M=$T/mnt
mkdir -p "$S" "$M"

for i in $(seq 0 $((READERS - 1))); do
	{ seq $((i * 1000000)) $((i * 1000000 + 400000)); head -c 1000000 /dev/urandom | base64; } > "$T/f$i"
	lz4 -q -B4 "$T/f$i" "$S/f$i.lz4"
done

if ! bfs_mount "$S" "$M" "$T/daemon.log" cache_size=$LIMIT; then
	not_ok "mount"; exit 1
fi

# Sample the cache's own count and the daemon's RSS while the readers run.
sample() {
	local max=0 rss=0 v r
	while [[ ! -e "$T/done" ]]; do
		v=$(getfattr --only-values -n user.blockfs.stats "$M" 2>/dev/null |
			awk '$1=="cache_bytes"{print $2}')
		r=$(awk '/^VmRSS/{print $2}' "/proc/$BFS_PID/status" 2>/dev/null)
		((${v:-0} > max)) && max=$v
		((${r:-0} > rss)) && rss=$r
		sleep 0.02
	done
	echo "$max $rss" > "$T/peak"
}
sample &
sampler=$!
pids=()
for i in $(seq 0 $((READERS - 1))); do
	cmp -s "$T/f$i" "$M/f$i" && touch "$T/ok$i" &
	pids+=("$!")
done
wait "${pids[@]}"
touch "$T/done"
wait "$sampler"
read -r peak rss < "$T/peak"
diag "$READERS readers: peak cache_bytes $peak (limit $LIMIT), peak daemon RSS ${rss} KiB"

same=$(find "$T" -maxdepth 1 -name 'ok*' | wc -l)
check "$READERS concurrent readers: every file byte-identical ($same/$READERS)" test "$same" -eq "$READERS"
check "the cache stayed within cache_size plus what readers held" test "$peak" -le $((LIMIT + SLACK))
check "the cache was used (peak above zero)" test "$peak" -gt 0
if bfs_sanitized "$BLOCKFS"; then
	ok "daemon RSS within cache_size plus a fixed overhead # SKIP sanitizer build"
else
	check "daemon RSS within cache_size plus a fixed overhead" \
		test "$rss" -le $((LIMIT / 1024 + RSS_OVERHEAD_KB))
fi
check "the daemon is alive" kill -0 "$BFS_PID"
bfs_umount
check_eq "unmount; daemon exits 0" 0 "$?"
bfs_end
