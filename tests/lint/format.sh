#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Lint: every C file of the tree is as .clang-format lays it out, so that
# nobody's editor reflows a neighbour's lines and a diff holds only what
# changed. The formatter is Debian 12's clang-format, version 14: other
# versions place a few things differently, so another one is refused
# rather than trusted. To fix a file: clang-format-14 -i FILE.
#
# Usage: format.sh SOURCE_ROOT      Exit: 0 formatted, 1 a file differs
# or no clang-format 14 is found.

set -uo pipefail
root=$(realpath "${1:?usage: format.sh SOURCE_ROOT}")
cd "$root" || exit 1

fmt=
for c in clang-format-14 clang-format; do
	if command -v "$c" >/dev/null && "$c" --version | grep -q 'version 14\.'; then
		fmt=$c
		break
	fi
done
if [[ -z $fmt ]]; then
	echo "clang-format 14 not found (tools/deps.sh --test installs it)"
	exit 1
fi

mapfile -t files < <(find src include tools tests bench \( -name results -o -name data \) -prune -o \
	-type f \( -name '*.c' -o -name '*.h' \) -print | sort)
bad=0
for f in "${files[@]}"; do
	if ! "$fmt" --dry-run --Werror "$f" 2>/dev/null; then
		echo "not formatted: $f  (diff: $fmt $f | diff -u $f -)"
		bad=1
	fi
done
(( bad )) && exit 1
echo "# ${#files[@]} C files laid out as .clang-format says ($fmt)"
