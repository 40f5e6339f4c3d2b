#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# SIGTERM at a random moment while four readers keep the mount busy (two
# cat small files and a stock lz4 file, two read the stock lz4 file
# slowly, so that its pages are pushed into the page cache ahead of them),
# RUNS times (default 20): each time the daemon exits 0
# within 30 s. A daemon that hangs is aborted through fusectl and killed
# (tests/integration/lib.sh, bfs_reap), and its threads' wait channels
# are printed. By hand, not in the suite: it takes about 3 s a run, and
# what it looks for is rare (loop.sh has one such run).
#
# Usage: sigterm_stress.sh BLOCKFS [RUNS]      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: sigterm_stress.sh BLOCKFS [RUNS]}")
RUNS=${2:-20}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin sigterm_stress lz4 bgzip python3

S=$T/src M=$T/mnt W=$T/want
mkdir -p "$M"
bfs_small_and_big "$W" "$S" 100 2000000 7
# slow READER: 64 KiB reads 2 ms apart, from the start again at the end
slow() {
	python3 -c 'import sys, time
while True:
    with open(sys.argv[1], "rb") as f:
        while f.read(65536):
            time.sleep(0.002)' "$1" 2>/dev/null
}

for ((run = 1; run <= RUNS; run++)); do
	bfs_mount "$S" "$M" "$T/daemon.log" "index_cache=off" || { not_ok "run $run: mount"; break; }
	readers=()
	for i in 1 2; do
		(cd "$M" && while cat big.txt small/*.txt >/dev/null 2>&1; do :; done) &
		readers+=($!)
		slow "$M/big.txt" &
		readers+=($!)
	done
	sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.2 + r % 130 / 100 }')"
	bfs_sigterm
	check_eq "run $run: SIGTERM while busy, the daemon exits 0" 0 "$BFS_TERM_RC"
	bfs_end_readers "${readers[@]}"
	bfs_lazy_umount "$M"
done

bfs_end
