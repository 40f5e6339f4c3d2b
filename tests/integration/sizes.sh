#!/usr/bin/env bash
# shellcheck disable=SC2016 # bash -c and eval scripts expand their own arguments
# SPDX-License-Identifier: MIT
#
# Exact sizes for LZ4 files from writers that flush mid-frame (sizes.py
# makes them with python-lz4): st_size is the content's size from the
# first stat(2) of a fresh mount, and cat, tail -c, tar, Python's
# f.read() and seeded random reads give exactly the original bytes,
# under readpath=pread and readpath=mmap. Before the fix a first stat
# said 33 MB for a 1.3 MB file, and readers that trusted it got zeros.
#
# Usage: sizes.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: sizes.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin sizes lz4 tar
# Debian's python3-lz4 is python-lz4; it lives with Debian's interpreter.
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
"$PY" -c 'import lz4.frame' 2>/dev/null || skip "no python lz4 module (Debian: python3-lz4)"

S=$T/src M=$T/mnt W=$T/work
mkdir -p "$S" "$M" "$W"

"$PY" "$HERE/sizes.py" make "$S" "$W" || { not_ok "python-lz4 writes the files"; exit 1; }
names=$(cd "$W" && ls)
for n in $names; do
	check "$n: lz4 -d decodes the backing file to the original" \
		sh -c 'lz4 -dc "$1" | cmp -s - "$2"' _ "$S/$n.lz4" "$W/$n"
done

for rp in pread mmap; do
	if ! bfs_mount "$S" "$M" "$T/daemon-$rp.log" "readpath=$rp"; then
		not_ok "$rp: mount"; show_log; continue
	fi
	diag "readpath=$rp"
	tap_import t "$PY" "$HERE/sizes.py" stat "$M" "$W"
	for n in $names; do
		check "$rp: $n: cat gives the original" cmp "$M/$n" "$W/$n"
		check_eq "$rp: $n: tail -c 16" "$(tail -c 16 "$W/$n" | od -An -tx1)" \
			"$(t tail -c 16 "$M/$n" | od -An -tx1)"
	done
	rm -rf "$T/x" && mkdir "$T/x"
	check "$rp: tar -c of the mount, extracted, equals the originals" \
		sh -c 'tar -C "$1" -cf - . | tar -C "$2" -xf - && diff -r "$2" "$3"' _ "$M" "$T/x" "$W"
	tap_import t "$PY" "$HERE/sizes.py" read "$M" "$W"
	bfs_umount
	check_eq "$rp: unmount; daemon exits 0" 0 "$?"
done
bfs_end
