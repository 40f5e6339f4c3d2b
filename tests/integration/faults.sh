#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Backing-store faults while mounted and while files are open and being
# read: a backing file replaced by rename, appended to, truncated,
# deleted; a backing directory renamed or removed (faults.py says what
# each must give). Under readpath=pread and readpath=mmap: on the mmap
# path a truncation is a SIGBUS inside the daemon, which must become EIO.
# After all of it the daemon lives, logged what it refused, and unmounts
# with exit status 0. Descriptor exhaustion (EMFILE) is limits.sh.
# The daemon runs as root without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH,
# so that a backing file's mode can make it unreadable to blockfs.
#
# Usage: faults.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: faults.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin faults lz4 bgzip python3 setpriv

S=$T/src M=$T/mnt W=$T/work
mkdir -p "$S" "$M" "$W"

seq 1 300000 > "$W/control"
lz4 -q -B4 "$W/control" "$S/control.lz4"

BFS_WRAP="setpriv --bounding-set=-dac_override,-dac_read_search --"
for rp in pread mmap; do
	if ! bfs_mount "$S" "$M" "$T/daemon-$rp.log" "readpath=$rp,cache_size=4M"; then
		not_ok "$rp: mount"; show_log; continue
	fi
	diag "readpath=$rp"
	OP_TIMEOUT=120 tap_import t python3 "$HERE/faults.py" "$S" "$M" "$W"
	check "$rp: the daemon is alive after every fault" kill -0 "$BFS_PID"
	check "$rp: the daemon logged the truncated files it refused" \
		grep -q 'tru/a' "$T/daemon-$rp.log"
	bfs_umount
	check_eq "$rp: unmount; daemon exits 0" 0 "$?"
done
bfs_end
