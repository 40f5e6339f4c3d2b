#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Lint: comments cite the repository's own documents (README, the manual
# pages, doc/), never a document outside it or a tracker's issue numbers:
# a reader of the tree has only the tree. Checks src/, include/, tools/,
# tests/ and bench/ (not bench/results/, whose files record where a run
# came from) for the contract and style documents kept outside the tree
# and for "issue N". tests/integration/docs.sh checks README and doc/.
#
# Usage: citations.sh SOURCE_ROOT      Exit: 0 clean, 1 citations found.

set -uo pipefail
root=$(realpath "${1:?usage: citations.sh SOURCE_ROOT}")
cd "$root" || exit 1
# The patterns are split so that this file does not match itself.
spec='SP''EC(\.md)?\b' style='ST''YLE\.md' issue='\b[Ii]ssues? #?[0-9]+'
found=$(grep -rnIE "$spec|$style|$issue" src include tools tests bench \
	--exclude-dir=results --exclude-dir=data --exclude=docs.sh)
if [[ -n $found ]]; then
	printf '%s\n' "$found"
	echo "cite README, the manual pages or doc/ instead (or state the reason)"
	exit 1
fi
echo "# no citation of documents outside the tree in src/ include/ tools/ tests/ bench/"
