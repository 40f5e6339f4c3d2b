#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Build the Debian package from this checkout and check it with lintian.
# Installs what the build needs (devscripts, debhelper, lintian and the
# Build-Depends of debian/control) with apt-get when missing. The tree is
# copied into build-deb/src first, so dpkg-buildpackage's outputs land in
# build-deb/ and nothing is written into the checkout.
#
# Usage: tools/package.sh [--check]
#   --check: then install the package (apt-get install ./blockfs_*.deb),
#   mount a sample tree with mount -t blockfs and through an fstab line,
#   compare every file, find the man page, and purge the package again.
#   Refused when blockfs is already installed (by dpkg or ninja install).
set -euo pipefail
CHECK=0
[ "${1:-}" = --check ] && CHECK=1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/build-deb

need=()
for p in devscripts debhelper lintian equivs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi

rm -rf "$OUT"
mkdir -p "$OUT/src"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
	tar --null -T - -cf -) | tar -xf - -C "$OUT/src"

cd "$OUT/src"
# The Build-Depends, through a dummy package apt can resolve (mk-build-deps).
if ! dpkg-checkbuilddeps >/dev/null 2>&1; then
	DEBIAN_FRONTEND=noninteractive mk-build-deps --install --remove \
		--tool 'apt-get -y -q --no-install-recommends' debian/control
	rm -f blockfs-build-deps_*
fi
dpkg-buildpackage -us -uc -b
cd "$OUT"
ls -l blockfs_*.deb
# Errors fail the script; warnings and notes are printed.
lintian --fail-on error --display-info blockfs_*.changes

[ "$CHECK" = 1 ] || exit 0

if dpkg-query -W blockfs >/dev/null 2>&1 || [ -e /sbin/mount.blockfs ]; then
	echo "package.sh --check: blockfs is installed already; not touching it" >&2
	exit 1
fi
T=$(mktemp -d)
cleanup() {
	for m in "$T/mnt" "$T/mnt2"; do mountpoint -q "$m" && umount -l "$m"; done
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -q blockfs >/dev/null 2>&1 || true
	rm -rf "$T"
}
trap cleanup EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$OUT"/blockfs_*.deb
mkdir -p "$T/src" "$T/mnt" "$T/mnt2"
seq 1 200000 >"$T/plain"
lz4 -q "$T/plain" "$T/src/a.lz4"
gzip -c "$T/plain" >"$T/src/b.gz"
zstd -q "$T/plain" -o "$T/src/c.zst"
xz -c "$T/plain" >"$T/src/d.xz"
bzip2 -c "$T/plain" >"$T/src/e.bz2"
mount -t blockfs -o index_cache=off "$T/src" "$T/mnt"
for f in a b c d e; do cmp "$T/plain" "$T/mnt/$f"; done
umount "$T/mnt"
printf '%s %s fuse.blockfs ro,index_cache=off 0 0\n' "$T/src" "$T/mnt2" >"$T/fstab"
mount -T "$T/fstab" "$T/mnt2"
for f in a b c d e; do cmp "$T/plain" "$T/mnt2/$f"; done
umount "$T/mnt2"
man -w blockfs >/dev/null
man -w 5 blockfs >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q blockfs
left=$(ls /sbin/mount.blockfs /sbin/mount.fuse.blockfs /usr/sbin/blockfs /usr/share/doc/blockfs 2>/dev/null || true)
[ -z "$left" ] || { echo "package.sh --check: left behind: $left" >&2; exit 1; }
echo "package.sh --check: installed, mounted (mount -t blockfs, fstab), read back, purged"
