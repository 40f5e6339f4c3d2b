#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The main job, end to end (README): install what is missing, build, pack
# a sample tree with the stock lz4 and bgzip, mount it with blockfs, read
# every file with md5sum and grep, compare with the originals, unmount.
# Exit status 0 only if every file read back identical.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tools/deps.sh

[[ -f build/build.ninja ]] || meson setup build >/dev/null
ninja -C build >/dev/null
BLOCKFS=$PWD/build/src/blockfs

work=$(mktemp -d /tmp/blockfs-demo.XXXXXX)
orig=$work/orig src=$work/packed mnt=$work/mnt
daemon=
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
	fusermount3 -uz "$mnt" 2>/dev/null || true
	[[ -n "$daemon" ]] && kill "$daemon" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$orig/text" "$orig/bin" "$src/text" "$src/bin" "$mnt"

# Sample data nobody here wrote: C headers and licences (text), programs (binary).
tar -C /usr/include -cf "$orig/text/include.tar" .
cat /usr/share/common-licenses/* > "$orig/text/licenses.txt"
cp /usr/bin/ls /usr/bin/bash "$orig/bin/"

echo "demo: packing with lz4 and bgzip"
lz4 -q -B4 -BX "$orig/text/include.tar" "$src/text/include.tar.lz4"
bgzip -c -i -I "$src/text/licenses.txt.gz.gzi" "$orig/text/licenses.txt" > "$src/text/licenses.txt.gz"
lz4 -q "$orig/bin/ls" "$src/bin/ls.lz4"
bgzip -c "$orig/bin/bash" > "$src/bin/bash.gz"
du -sh "$orig" "$src" | sed 's/^/demo: /'

"$BLOCKFS" -f "$src" "$mnt" -o readpath=pread 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 300); do
	mountpoint -q "$mnt" && break
	kill -0 "$daemon" 2>/dev/null || { cat "$work/daemon.log"; exit 1; }
	sleep 0.1
done
mountpoint -q "$mnt" || { echo "demo: mount did not come up"; exit 1; }

echo "demo: mounted $src at $mnt:"
# shellcheck disable=SC2012 # shown to the user, not parsed
ls -lR "$mnt" | sed 's/^/  /'
status=0
for f in text/include.tar text/licenses.txt bin/ls bin/bash; do
	want=$(md5sum < "$orig/$f") got=$(md5sum < "$mnt/$f")
	if [[ "$want" == "$got" ]]; then
		echo "demo: md5 ok      $f  ($(getfattr --absolute-names --only-values -n user.blockfs.format "$mnt/$f"))"
	else
		echo "demo: md5 DIFFERS $f"; status=1
	fi
done
want=$(grep -c GPL "$orig/text/licenses.txt") got=$(grep -c GPL "$mnt/text/licenses.txt")
echo "demo: grep -c GPL: $got lines through the mount, $want in the original"
[[ "$want" == "$got" ]] || status=1
fusermount3 -u "$mnt"
wait "$daemon" || status=1
daemon=
((status == 0)) && echo "demo: all files read back identical" || echo "demo: FAILED"
exit $status
