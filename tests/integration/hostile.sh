#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Hostile backing files in a real mount (blockfs(8): a corrupt block fails
# with EIO, the daemon goes on). hostile.py makes several
# hundred damaged variants of real lz4/bgzip/blockfs-pack files (bit flips,
# truncations, zeroed ranges, absurd size fields, junk appended, lying seek
# tables and .gzi indexes) in one source tree. The tree is mounted under
# each read path; every read of every variant must return exactly the
# reference bytes (the original, or the prefix the format's own tool
# accepts) or fail with EIO, within a timeout; intact control files in the
# same mount must keep reading back exactly; the daemon must live, log each
# bad file by name, stay within cache_size plus a fixed overhead in its own
# memory, and exit 0 at unmount. Prints the outcome figures as diagnostics.
#
# Usage: hostile.sh BLOCKFS BLOCKFS-PACK      Exit: 0 pass, 1 fail, 77 skip.
# HOSTILE_ONLY=STRING checks only the variants whose names contain STRING.

set -u
BLOCKFS=$(realpath "${1:?usage: hostile.sh BLOCKFS BLOCKFS-PACK}")
PACK=$(realpath "${2:?usage: hostile.sh BLOCKFS BLOCKFS-PACK}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin hostile lz4 bgzip gzip python3

# A small cache, so that eviction runs all the time.
CACHE=$((1 << 20))
# Memory of the daemon's own above the cache: the binary and its libraries
# (~4 MiB), per FUSE thread a receive buffer, a compressed-read buffer and
# the blocks it holds while replying (at most one 128 KiB request's worth
# of these 64 KiB blocks), per file version its index, and malloc's free
# lists. Measured for this tree: about 8 MiB. 24 MiB leaves room for a
# busier machine, yet a leak of 20 KiB per variant (700 of them) fails.
OVERHEAD_KB=$((24 << 10))
SANITIZED=
bfs_sanitized "$BLOCKFS" && SANITIZED=1
# ASan and UBSan builds are several times slower per read.
VARIANT_TIMEOUT=$((SANITIZED ? 60 : 20))

W=$T/work S=$T/src M=$T/mnt
mkdir -p "$M"

if out=$(python3 "$HERE/hostile.py" gen --work "$W" --src "$S" --pack "$PACK" 2>&1); then
	printf '%s\n' "$out"
	ok "generated the hostile tree with lz4, bgzip and blockfs-pack"
else
	not_ok "generate the hostile tree" "${out:0:3000}"
	exit 1
fi

# run_pass LABEL OPTIONS: mount, check every variant, log, memory, unmount.
run_pass() {
	local label=$1 opts=$2 hwm bound rc
	local anon=()
	if ! bfs_mount "$S" "$M" "$T/$label.log" "$opts"; then
		not_ok "$label: mount with -o $opts (exit ${BFS_EXIT:-none})"
		show_log
		return
	fi
	# ASan's shadow memory and quarantine are not blockfs's.
	[[ -n "$SANITIZED" ]] || anon=(--anon-bound-kb $(((CACHE >> 10) + OVERHEAD_KB)))
	tap_import timeout -k 10 900 python3 "$HERE/hostile.py" check --manifest "$W/manifest.json" \
		--mnt "$M" --pid "$BFS_PID" --label "$label" --log "$T/$label.log" \
		--timeout "$VARIANT_TIMEOUT" "${anon[@]}" ${HOSTILE_ONLY:+--only "$HOSTILE_ONLY"}
	# The peak of all resident memory. Through mmap it also counts the
	# backing files' pages the daemon mapped: at most the whole tree.
	bound=$(((CACHE >> 10) + OVERHEAD_KB))
	[[ $opts == *readpath=mmap* ]] && bound=$((bound + TREE_KB))
	hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$BFS_PID/status" 2>/dev/null)
	diag "$label: daemon peak RSS (VmHWM) ${hwm:-?} KiB; bound $bound KiB"
	if [[ -n "$SANITIZED" ]]; then
		ok "$label: peak RSS (VmHWM) within its bound # SKIP sanitizer build"
	else
		check "$label: peak RSS (VmHWM) ${hwm:-?} KiB within $bound KiB" \
			test "${hwm:-999999999}" -le "$bound"
	fi
	bfs_umount
	rc=$?
	check_eq "$label: unmount; the daemon exits 0" 0 "$rc"
	((rc == 0)) || show_log
}

TREE_KB=$(du -sk "$S" | cut -f1)
run_pass pread "readpath=pread,cache_size=$CACHE"
run_pass mmap "readpath=mmap,cache_size=$CACHE"
run_pass mmap-populate "readpath=mmap,populate=on,cache_size=$CACHE,readahead=0"

bfs_end
