#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Pushing decoded pages into the kernel's page cache (stream.c, push.c),
# raced by everything that can race it, under readpath=pread and mmap:
# 16 sequential readers of different files at once; a slow reader, whose
# pages must be pushed ahead of it; a sequential reader,
# random readers and willneed on the same pages; dontneed again and again
# during a read; skewed random reads whose blocks get pushed whole; the
# backing file replaced, by rename and in place, while pushes are in
# flight (a new open must read the new bytes). Every byte is compared with
# the original, and the counters must show that pushes happened. Then the
# daemon's memory after streaming a 1 GiB file: far below the file.
#
# Usage: push.sh BLOCKFS BLOCKFS_PACK      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: push.sh BLOCKFS BLOCKFS_PACK}")
PACK=$(realpath "${2:?usage: push.sh BLOCKFS BLOCKFS_PACK}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin push lz4 bgzip python3 setfattr

S=$T/src M=$T/mnt O=$T/orig
mkdir -p "$S" "$M" "$O"

gen() {	# gen NAME MIB SEED
	python3 "$HERE/helper.py" gentext "$O/$1" $(($2 << 20)) "$3" zigzag 3
}

streams=()
for i in $(seq 1 16); do
	n=s$i
	case $((i % 4)) in
	0) gen "$n" 4 "$i" && lz4 -q -B4 "$O/$n" "$S/$n.lz4" ;;
	1) gen "$n" 10 "$i" && lz4 -q "$O/$n" "$S/$n.lz4" ;;		# 4 MiB blocks
	2) gen "$n" 4 "$i" && bgzip -c "$O/$n" > "$S/$n.gz" ;;
	3) gen "$n" 4 "$i" && "$PACK" -q -o "$S/$n.lz4" "$O/$n" ;;
	esac
	streams+=("$n")
done
gen race 24 100 && lz4 -q -B4 "$O/race" "$S/race.lz4"
gen dn 16 101 && lz4 -q -B4 "$O/dn" "$S/dn.lz4"
gen zipf 16 102 && lz4 -q -B5 "$O/zipf" "$S/zipf.lz4"
gen v1 16 103 && lz4 -q -B4 "$O/v1" "$T/v1.lz4"
gen v2 16 104 && lz4 -q -B4 "$O/v2" "$T/v2.lz4"

for rp in pread mmap; do
	if ! bfs_mount "$S" "$M" "$T/daemon-$rp.log" "readpath=$rp"; then
		not_ok "$rp: mount"; show_log; continue
	fi
	diag "readpath=$rp"
	OP_TIMEOUT=120 tap_import t python3 "$HERE/push.py" streams "$M" "$O" "${streams[@]}"
	OP_TIMEOUT=120 tap_import t python3 "$HERE/push.py" slow "$M" "$O" dn
	OP_TIMEOUT=120 tap_import t python3 "$HERE/push.py" race "$M" "$O" race
	OP_TIMEOUT=120 tap_import t python3 "$HERE/push.py" dontneed "$M" "$O" dn
	OP_TIMEOUT=120 tap_import t python3 "$HERE/push.py" zipf "$M" "$O" zipf
	for how in rename inplace; do
		for round in 1 2 3; do
			cp "$T/v1.lz4" "$S/v.lz4"
			# a fresh file version for each round: read v1 once, whole
			check "$rp: $how round $round: v1 reads right" cmp "$M/v" "$O/v1"
			OP_TIMEOUT=60 tap_import t python3 "$HERE/push.py" replace "$M" "$S/v.lz4" \
				"$T/v2.lz4" "$O/v2" "$how"
		done
	done
	rm -f "$S/v.lz4"
	check "$rp: the daemon is alive" kill -0 "$BFS_PID"
	check_eq "$rp: no errors counted" 0 "$(python3 "$HERE/push.py" stat "$M" errors)"
	bfs_umount
	check_eq "$rp: unmount; daemon exits 0" 0 "$?"
done

# Streaming a 1 GiB file: the kernel's page cache holds it; the daemon's
# own memory stays near its cache bound (default 32M) and far below 1 GiB.
python3 - "$T/big" <<'PY'
import random, sys
rng = random.Random(5)
chunk = bytes(rng.choice(b"abcdefgh ij\n") for _ in range(1 << 22))
with open(sys.argv[1], "wb") as f:
    for i in range(256):
        f.write(chunk[i:] + chunk[:i])
PY
lz4 -q -B4 "$T/big" "$S/big.lz4" && rm -f "$T/big"
if bfs_mount "$S" "$M" "$T/daemon-big.log" ""; then
	# shellcheck disable=SC2016 # sh -c expands its own arguments
	check "cat of a 1 GiB file" sh -c 'cat "$1" > /dev/null' _ "$M/big"
	hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$BFS_PID/status")
	diag "daemon VmHWM after streaming 1 GiB: $hwm kB"
	if bfs_sanitized "$BLOCKFS"; then
		ok "daemon peak RSS far below the file # SKIP sanitizer build"
	else
		check "daemon peak RSS far below the file: under 128 MiB" test "$hwm" -lt $((128 << 10))
	fi
	bfs_umount
	check_eq "big: unmount; daemon exits 0" 0 "$?"
else
	not_ok "big: mount"; show_log
fi
bfs_end
