#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The documentation stands alone and says what is installed:
# - README, doc/ and the man pages point to nothing outside the repository,
#   cite no tracker numbers, and every relative link in them leads to a file;
# - README names every man page, and every page in man/ is installed;
# - README's table of installed files is what "meson install" installs
#   (into a DESTDIR, nothing on the machine changes);
# - every man page renders without a groff warning;
# - blockfs -h documents every option of the man page's "blockfs options",
#   and the man page every option of blockfs -h (opts.c's table).
#
# Usage: docs.sh SOURCE_ROOT BUILD_ROOT      Exit: 0 pass, 1 fail, 77 skip.

set -u
ROOT=$(realpath "${1:?usage: docs.sh SOURCE_ROOT BUILD_ROOT}")
BUILD=$(realpath "${2:?usage: docs.sh SOURCE_ROOT BUILD_ROOT}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
# Nothing is mounted: no root or FUSE needed.
bfs_begin --no-fuse docs meson
README=$ROOT/README.md
PAGES=(blockfs.8 blockfs.5 blockfs-pack.1 blockfs-stat.1)

outside=$(grep -n -e '\.\./shared' -e 'SPEC\.md' -e 'STYLE\.md' "$README" "$ROOT"/man/*.in)
check_eq "README and man pages point to nothing outside the repository" "" "$outside"
DOCS=("$README" "$ROOT"/doc/*.md "$ROOT"/doc/decisions/*.md "$ROOT"/bench/results/README.md)
outside=$(grep -n -i -e '\.\./shared' -e 'SPEC\.md' -e 'STYLE\.md' -e 'issue *[0-9]' -e 'bench/results/issue' "${DOCS[@]}")
check_eq "README, doc/ and the results index cite no tracker numbers" "" "$outside"
dead=
for f in "${DOCS[@]}"; do
	while read -r l; do
		[ -e "$(dirname "$f")/$l" ] || dead+="$f: $l "
	done < <(grep -o '](\([^)#:]*\))' "$f" | sed 's/^](//; s/)$//')
done
check_eq "every relative link in README and doc/ leads to a file" "" "$dead"

named=ok
for p in "${PAGES[@]}"; do
	grep -q "${p%.*}(${p##*.})" "$README" || named="README does not name ${p%.*}(${p##*.})"
done
check_eq "README names every man page" ok "$named"
check_eq "every page in man/ is one of them" "${PAGES[*]}" \
	"$(cd "$ROOT/man" && printf '%s\n' ./*.in | sed 's|^\./||; s|\.in$||' | sort -t. -k2,2r -k1,1 | tr '\n' ' ' | sed 's/ $//')"

if t meson install -C "$BUILD" --destdir "$T/dest" --quiet >"$T/install.log" 2>&1; then
	# README's table: | `path`, `path` | what |, man pages as manN/NAME.N.
	# shellcheck disable=SC2016 # the backquotes are README's, not the shell's
	want=$(sed -n '/^### Installed files/,/^#/p' "$README" | grep '^| `' |
		cut -d'|' -f2 | grep -o '`[^`]*`' | tr -d '`' |
		sed 's|^\(man[0-9]/\)|/usr/local/share/man/\1|' | sort)
	got=$(cd "$T/dest" && find . ! -type d | sed 's|^\.||' | sort)
	check_eq "README's installed files are what meson install installs" "$want" "$got"
	check_eq "mount.blockfs and mount.fuse.blockfs link to the daemon" \
		"/usr/local/sbin/blockfs /usr/local/sbin/blockfs" \
		"$(readlink "$T/dest/sbin/mount.blockfs") $(readlink "$T/dest/sbin/mount.fuse.blockfs")"
else
	not_ok "meson install into a DESTDIR" "$(cat "$T/install.log")"
fi

if command -v groff >/dev/null; then
	for p in "${PAGES[@]}"; do
		out=$(groff -man -ww -z "$BUILD/man/$p" 2>&1)
		check_eq "man page $p renders without a warning" "" "$out"
	done
else
	diag "no groff: the pages are not rendered"
fi

# The tag line after each .TP of the section names the option(s): .BR name= ... or .BR a ", " b
man_opts=$(awk '/^\.SS "blockfs options"/ { on = 1; next } /^\.S[SH]/ { on = 0 }
	on && prev == ".TP" { two = $0 ~ /", "/; gsub(/^\.B[IR]* /, ""); gsub(/[",=]/, " ")
		print $1; if (two) print $2 } { prev = $0 }' "$ROOT/man/blockfs.8.in" | sort -u)
help_opts=$("$BUILD/src/blockfs" -h | awk '/^blockfs options:/ { on = 1; next } /^[^ ]/ { on = 0 }
	on && $1 == "-o" { sub(/=.*/, "", $2); print $2 }' | sort -u)
check_eq "blockfs -h lists every option of the man page" "" "$(comm -23 <(echo "$man_opts") <(echo "$help_opts"))"
# and the other way: every row of opts.c's table that -h shows
check_eq "the man page documents every option of blockfs -h" "" "$(comm -13 <(echo "$man_opts") <(echo "$help_opts"))"

bfs_end
