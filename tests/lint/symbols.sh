#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Lint: every global symbol that the blockfs-core static library defines
# starts with bfs_, so that no slip (squashfuse's
# stfs_ll_op_statfs) and no clash with a library the daemon, the tools or
# the tests link goes unseen. Statics are exempt: nm shows them local.
# So are names starting with __, which C reserves to the implementation:
# a sanitizer's (ASan's __odr_asan.bfs_ops in build-asan/), never ours.
#
# Usage: symbols.sh LIBBLOCKFS-CORE.a      Exit: 0 clean, 1 a stray symbol.

set -euo pipefail
lib=${1:?usage: symbols.sh LIBBLOCKFS-CORE.a}

# nm -g --defined-only: "ADDRESS TYPE NAME" per global the archive's
# objects define, "FILE.o:" before each object's.
bad=$(nm -g --defined-only "$lib" | awk '
	/:$/ { obj = $1; next }
	NF == 3 && $3 !~ /^(bfs_|__)/ { print obj " " $3 }')
n=$(nm -g --defined-only "$lib" | awk 'NF == 3 && $3 !~ /^__/' | wc -l)
if [[ -n $bad ]]; then
	echo "globals of $(basename "$lib") without the bfs_ prefix (object, symbol):"
	printf '%s\n' "$bad" | sed 's/^/  /'
	exit 1
fi
echo "# all $n globals of $(basename "$lib") start with bfs_"
