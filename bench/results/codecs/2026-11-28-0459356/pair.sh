#!/bin/bash
# Paired rounds, the order alternating each round: BASE against NEW, stat + cat
# of one file through a fresh mount; prints seconds and the daemon's user/system CPU.
# Usage: pair.sh SRC FILE [blockfs options...]   (MNT, BASE, NEW from the environment)
src=$1 file=$2
shift 2
mnt=${MNT:-/tmp/xz/mnt}
base=${BASE:-/tmp/bbase/src/blockfs}
new=${NEW:-build/src/blockfs}
for r in 1 2 3 4 5 6; do
	line="round $r"
	if [ $((r % 2)) = 1 ]; then order="base:$base new:$new"; else order="new:$new base:$base"; fi
	for v in $order; do
		"${v#*:}" -o index_cache=off "$@" "$src" "$mnt"
		pid=$(pgrep -n -x blockfs)
		s=$(date +%s.%N)
		stat "$mnt/$file" >/dev/null
		cat "$mnt/$file" >/dev/null
		u=$(date +%s.%N)
		cpu=$(awk '{printf "%.2f/%.2f", $14/100, $15/100}' "/proc/$pid/stat")
		line="$line ${v%%:*} $(echo "$u-$s" | bc | cut -c1-5) ($cpu)"
		umount "$mnt"
	done
	echo "$line"
done
