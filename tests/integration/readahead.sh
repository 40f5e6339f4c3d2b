#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The kernel's read-ahead into the mount (-o kernel_readahead): the daemon
# sets its own backing device's read_ahead_kb, found through
# /proc/self/mountinfo (so the mount point here has a space in it, which
# mountinfo escapes), and asks for as much in FUSE INIT. Shown by the bdi
# value and by the size of the FUSE reads a 64 KiB reader causes: the
# daemon's "reads" counter, not a timer.
#
# Usage: readahead.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: readahead.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin readahead lz4 getfattr setfattr mountpoint

S=$T/src M="$T/mnt point"
mkdir -p "$S" "$M"

SIZE=$((32 << 20))
head -c $SIZE /dev/urandom > "$T/r32"
lz4 -q -B4 "$T/r32" "$S/r32.lz4"

bdi_kb() { cat "/sys/class/bdi/$(mountpoint -d "$M")/read_ahead_kb"; }
fuse_reads() {
	getfattr --absolute-names --only-values -n user.blockfs.stats "$M/r32" | awk '$1 == "reads" { print $2 }'
}
# dd_reads: FUSE reads that a cold sequential pass in 64 KiB reads causes.
dd_reads() {
	local before
	setfattr -n user.blockfs.advice -v dontneed "$M/r32"	# the kernel's pages too
	before=$(fuse_reads)
	dd if="$M/r32" of=/dev/null bs=64K status=none || return 1
	echo $(($(fuse_reads) - before))
}

# name, mount options, expected read_ahead_kb, bound on the reads (le|ge N)
run() {
	local name=$1 opts=$2 want_kb=$3 op=$4 bound=$5 n
	if ! bfs_mount "$S" "$M" "$T/daemon.log" "$opts"; then
		not_ok "$name: mount"; show_log; return
	fi
	check_eq "$name: read_ahead_kb of the mount" "$want_kb" "$(bdi_kb)"
	check "$name: bytes as the original" cmp "$T/r32" "$M/r32"
	n=$(dd_reads)
	diag "$name: a cold 64 KiB dd of 32 MiB caused $n FUSE reads"
	check "$name: FUSE reads $op $bound" test "${n:-0}" -"$op" "$bound" -a "${n:-0}" -gt 0
	bfs_umount
	check_eq "$name: unmount; daemon exits 0" 0 "$?"
}

# 1 MiB is also the largest FUSE read libfuse allows (max_pages 256), so
# the default should cost about one request per MiB; the kernel's own
# 128 KiB window, one per 128 KiB. readahead=0: pages blockfs pushes ahead
# of the reader would spare the kernel READs, and these count the kernel's.
run "default" "readpath=pread,readahead=0" 1024 le $((SIZE / (512 << 10)))
run "kernel_readahead=4M" "kernel_readahead=4M,readahead=0" 4096 le $((SIZE / (512 << 10)))
run "kernel_readahead=0" "kernel_readahead=0,readahead=0" 128 ge $((SIZE / (256 << 10)))

if bfs_mount "$S" "$M" "$T/daemon.log" "kernel_readahead=2G"; then
	not_ok "kernel_readahead=2G is refused"
	bfs_umount
else
	check_eq "kernel_readahead=2G is refused with exit status 1" 1 "$BFS_EXIT"
	check "... naming the option and the bound" \
		grep -q "bad value '2G' for option kernel_readahead: expected 0 or a size from 4K to 1G" \
		"$T/daemon.log"
fi
bfs_end
