#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Lint: shellcheck on every shell script of the repository (*.sh, and any
# file whose first line runs sh or bash), at its default severity, so
# notes count too. A finding is fixed, or disabled on its line with the
# reason (# shellcheck disable=SCnnnn # why).
#
# Usage: shellcheck.sh SOURCE_ROOT      Exit: 0 clean, 1 findings, 77 skip.

set -euo pipefail
root=$(realpath "${1:?usage: shellcheck.sh SOURCE_ROOT}")
command -v shellcheck >/dev/null || { echo "1..0 # SKIP no shellcheck (tools/deps.sh --test)"; exit 77; }
cd "$root"

scripts=()
while IFS= read -r -d '' f; do
	if [[ $f == *.sh ]] || head -n1 "$f" | grep -qE '^#!.*[/ ](ba|da)?sh( |$)'; then
		scripts+=("${f#./}")
	fi
done < <(find . \( -name .git -o -name 'build*' -o -path ./bench/data \) -prune -o \
	-type f -print0 | sort -z)

echo "# shellcheck $(shellcheck --version | sed -n 's/^version: //p') on ${#scripts[@]} scripts"
# -x: follow the scripts' "source" lines (lib.sh) as their directives say.
shellcheck -x "${scripts[@]}"
