#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The one list of what building and testing blockfs needs, as Debian 12
# packages, and its install: apt-get installs only what is missing, as
# root or through sudo. tools/demo.sh, tools/test.sh (so CI) and
# tools/fuzz.sh run it; so can a newcomer on a fresh machine.
#
#   tools/deps.sh           build blockfs, mount and run the demo
#   tools/deps.sh --test    also everything tools/test.sh's suites use
#   tools/deps.sh --fuzz    also clang and its libFuzzer runtime (tools/fuzz.sh)

set -euo pipefail

# Building: meson, gcc, the libraries (libdeflate is optional, but CI
# builds with it and without), cmocka (the unit tests build by default).
BUILD=(meson ninja-build pkg-config gcc libfuse3-dev liblz4-dev zlib1g-dev libzstd-dev liblzma-dev
	libbz2-dev libdeflate-dev libcmocka-dev)
# A mount and the demo: fusermount3, the lz4 and bgzip CLIs, getfattr.
RUN=(fuse3 lz4 tabix zstd xz-utils bzip2 attr)
# tools/test.sh: the fuzz tree (clang, libFuzzer in libclang-rt-dev), the
# integration scripts' tools (fio: load.sh; strace: pack.sh, mmap.sh;
# python3-lz4: sizes.sh; rsync: copies.sh; samtools: sidecars.sh; pigz: gzip.sh; the other
# writers of each format: pbzip2, lbzip2, pixz, python3-zstandard, bsdtar) and the
# lint suite (shellcheck; nm from binutils; clang-format, Debian 12's 14).
TEST=(clang libclang-rt-dev fio strace python3-lz4 rsync samtools shellcheck clang-format binutils pigz
	pbzip2 lbzip2 pixz python3-zstandard libarchive-tools
	# remote.sh and bench/remote.py: a private sshd and an sshfs mount of it
	openssh-server openssh-client sshfs)
FUZZ=(clang libclang-rt-dev)

usage() {
	echo "usage: tools/deps.sh [--test] [--fuzz]" >&2
	exit 2
}

packages=("${BUILD[@]}" "${RUN[@]}")
for arg in "$@"; do
	case $arg in
	--test) packages+=("${TEST[@]}") ;;
	--fuzz) packages+=("${FUZZ[@]}") ;;
	*) usage ;;
	esac
done

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		[[ " ${missing[*]} " == *" $p "* ]] || missing+=("$p")
	fi
done
((${#missing[@]})) || exit 0

echo "deps.sh: installing ${missing[*]}"
sudo=()
if (($(id -u) != 0)); then
	sudo=(sudo)
fi
"${sudo[@]}" apt-get update -qq
# Through env: sudo would drop DEBIAN_FRONTEND from its environment.
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
