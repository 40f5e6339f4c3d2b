#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Lint: every header compiles on its own, included first in an empty file
# with the flags the build compiles src/ with (its warnings, -Werror,
# -std=c11, the defines, the optimization level that turns some warnings
# on), so that a header names what it needs itself and works in any
# order of #includes.
#
# The flags are those of a file of blockfs-core in BUILD_ROOT's
# compile_commands.json, less its output and dependency-file options:
# a warning added in meson.build is a warning here too.
#
# Usage: headers.sh SOURCE_ROOT BUILD_ROOT      Exit: 0 clean, 1 a header fails.

set -uo pipefail
src=$(realpath "${1:?usage: headers.sh SOURCE_ROOT BUILD_ROOT}")
build=$(realpath "${2:?usage: headers.sh SOURCE_ROOT BUILD_ROOT}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The compiler and its flags, one word a line: the command that builds
# src/fs.c, without -o/-MQ/-MF and their file, -MD, -c and the source.
if ! python3 - "$build/compile_commands.json" >"$tmp/flags" <<'PY'; then
import json, shlex, sys
for e in json.load(open(sys.argv[1])):
    if e["file"].endswith("src/fs.c") and "libblockfs-core" in e.get("output", e["command"]):
        words = shlex.split(e["command"])
        break
else:
    sys.exit("no command for src/fs.c in " + sys.argv[1])
out, skip = [], False
for w in words:
    if skip:
        skip = False
    elif w in ("-o", "-MQ", "-MF"):
        skip = True
    elif w in ("-c", "-MD") or w.startswith("-fdiagnostics-color") or w.endswith("fs.c"):
        pass
    else:
        out.append(w)
print("\n".join(out))
PY
	echo "headers.sh: no compile command for src/fs.c in $build"
	exit 1
fi
mapfile -t cmd <"$tmp/flags"
cd "$build" || exit 1

bad=0 n=0
for h in "$src"/include/blockfs/*.h "$src"/src/*.h; do
	n=$((n + 1))
	printf '#include "%s"\n' "$h" >"$tmp/one.c"
	if ! out=$("${cmd[@]}" -c "$tmp/one.c" -o "$tmp/one.o" 2>&1); then
		echo "not alone: ${h#"$src"/}"
		printf '%s\n' "$out" | head -5 | sed 's/^/  /'
		bad=$((bad + 1))
	fi
done
if ((bad)); then
	echo "$bad of $n headers do not compile on their own"
	exit 1
fi
echo "# all $n headers compile on their own (${cmd[*]:0:1} ${cmd[*]:1})"
