#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Lint: every header compiles on its own, included first in an empty file
# with the project's warnings, so that a header names what it needs
# itself and works in any order of #includes.
#
# Usage: headers.sh SOURCE_ROOT BUILD_ROOT      Exit: 0 clean, 1 a header fails.

set -uo pipefail
src=${1:?usage: headers.sh SOURCE_ROOT BUILD_ROOT}
build=${2:?usage: headers.sh SOURCE_ROOT BUILD_ROOT}
cc=${CC:-cc}
# shellcheck disable=SC2207 # the flags are words
fuse=($(pkg-config --cflags fuse3 2>/dev/null))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0 n=0
for h in "$src"/include/blockfs/*.h "$src"/src/*.h; do
	n=$((n + 1))
	printf '#include "%s"\n' "$h" >"$tmp/one.c"
	if ! out=$("$cc" -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -DFUSE_USE_VERSION=314 \
		-I"$src/include" -I"$src/src" -I"$build" "${fuse[@]}" -Wall -Wextra -Werror \
		-fsyntax-only "$tmp/one.c" 2>&1); then
		echo "not alone: ${h#"$src"/}"
		printf '%s\n' "$out" | head -5 | sed 's/^/  /'
		bad=$((bad + 1))
	fi
done
if ((bad)); then
	echo "$bad of $n headers do not compile on their own"
	exit 1
fi
echo "# all $n headers compile on their own"
