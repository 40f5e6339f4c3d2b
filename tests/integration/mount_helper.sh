#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The ways a user starts blockfs other than "blockfs -f": the mount(8)
# helper convention (mount.blockfs SOURCE DIR -o OPTS, with fstab-only
# options and -f meaning "fake"), mount -t fuse.blockfs through
# mount.fuse3, daemon mode, -h, -V, and refusals. Every mount is undone
# by the EXIT trap, even on failure.
#
# Usage: mount_helper.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: mount_helper.sh BLOCKFS}")

[[ $(id -u) == 0 && -c /dev/fuse ]] || { echo "1..0 # SKIP needs root and /dev/fuse"; exit 77; }
for t in fusermount3 lz4 mountpoint; do
	command -v "$t" >/dev/null || { echo "1..0 # SKIP no $t"; exit 77; }
done

T=$(mktemp -d /tmp/blockfs-helper.XXXXXX)
mkdir -p "$T/bin" "$T/src" "$T/mnt"
ln -s "$BLOCKFS" "$T/bin/mount.blockfs"
ln -s "$BLOCKFS" "$T/bin/blockfs"
seq 1 100000 > "$T/orig"
lz4 -q "$T/orig" "$T/src/numbers.lz4"

cleanup() {
	mountpoint -q "$T/mnt" && fusermount3 -uz "$T/mnt"
	rm -rf "$T"
}
trap cleanup EXIT

n=0 failed=0
check() {	# check NAME COMMAND...: one TAP line
	local name=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name"
		failed=$((failed + 1))
	fi
}

# Daemonized mounts return before serving; give the mount a moment to show.
mounted_right() {
	for _ in $(seq 50); do
		mountpoint -q "$T/mnt" && break
		sleep 0.1
	done
	cmp -s "$T/orig" "$T/mnt/numbers"
}

unmount() {
	fusermount3 -u "$T/mnt" && ! mountpoint -q "$T/mnt"
}

helper_mounts() {
	"$T/bin/mount.blockfs" "$T/src" "$T/mnt" -n -o readpath=pread,defaults,noauto,nofail,_netdev,x-systemd.automount &&
		mounted_right && unmount
}
check "mount.blockfs drops fstab-only options and mounts" helper_mounts

helper_fake() {
	"$T/bin/mount.blockfs" "$T/src" "$T/mnt" -f -o readpath=pread && ! mountpoint -q "$T/mnt"
}
check "mount.blockfs -f (fake) mounts nothing" helper_fake

helper_bad_value() {
	local out rc
	out=$("$T/bin/mount.blockfs" "$T/src" "$T/mnt" -o readpath=sideways 2>&1)
	rc=$?
	[[ $rc == 1 && "$out" == *readpath* && "$out" == *"pread, mmap or auto"* ]] &&
		! mountpoint -q "$T/mnt"
}
check "mount.blockfs refuses a bad value, exit 1, nothing mounted" helper_bad_value

via_mount_fuse3() {
	command -v mount.fuse3 >/dev/null || [[ -x /sbin/mount.fuse3 ]] || return 0
	PATH="$T/bin:$PATH" mount -t fuse.blockfs "$T/src" "$T/mnt" -o readpath=pread,verify=on &&
		mounted_right && grep -q " $T/mnt fuse.blockfs " /proc/mounts && unmount
}
check "mount -t fuse.blockfs (mount.fuse3) mounts" via_mount_fuse3

daemon_mode() {
	"$BLOCKFS" "$T/src" "$T/mnt" && mounted_right && unmount
}
check "blockfs without -f detaches and serves" daemon_mode

missing_source() {
	local out
	out=$("$BLOCKFS" -f "$T/nonexistent" "$T/mnt" 2>&1)
	[[ $? == 1 && "$out" == *"cannot open SOURCE"* ]] && ! mountpoint -q "$T/mnt"
}
check "a missing SOURCE: exit 1 with a message" missing_source

no_mountpoint() {
	"$BLOCKFS" -f "$T/src" >/dev/null 2>&1
	[[ $? == 1 ]]
}
check "no MOUNTPOINT: exit 1" no_mountpoint

help_lists_options() {
	local out o
	out=$("$BLOCKFS" -h 2>&1) || return 1
	for o in readpath populate advice cache_size readahead workers verify allow_other; do
		[[ "$out" == *"$o"* ]] || { echo "# -h lacks $o"; return 1; }
	done
}
check "blockfs -h lists every option" help_lists_options

version_lists_libraries() {
	local out
	out=$("$BLOCKFS" -V 2>&1) || return 1
	[[ "$out" == *blockfs* && "$out" == *libfuse* && "$out" == *liblz4* && "$out" == *zlib* ]]
}
check "blockfs -V prints blockfs, libfuse, liblz4 and zlib versions" version_lists_libraries

echo "1..$n"
((failed == 0))
