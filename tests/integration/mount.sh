#!/usr/bin/env bash
# shellcheck disable=SC2016 # bash -c scripts expand their own arguments
# SPDX-License-Identifier: MIT
#
# Real-mount integration suite: what blockfs(8) and README promise a user
# of a mount.
#
# Builds a fixture tree with the real lz4 and bgzip CLIs, mounts it with
# "blockfs -f", and checks what a user sees: names, contents (cmp, md5sum,
# random preads across block boundaries, grep), sizes, times and modes,
# symlinks, the collision rules, the user.blockfs.* xattrs, EROFS for every
# kind of write, EIO on corrupt and truncated files with the rest intact,
# refused option values, and a clean unmount with exit status 0.
#
# Usage: mount.sh BLOCKFS [BLOCKFS_CAT]   (meson passes both; the 2nd is unused)
# Exit: 0 all passed, 1 something failed, 77 skipped (no FUSE/tools/root).
# Environment: BFS_KEEP=1 keeps the state directory; VALGRIND=... prefixes
# the daemon; BFS_RANDREADS sets preads per file (default 200).

set -u

BLOCKFS=${1:?usage: mount.sh BLOCKFS [BLOCKFS_CAT]}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

bfs_begin mount lz4 bgzip setfattr getfattr python3 mountpoint gzip
if [[ ! -x "$BLOCKFS" ]]; then
	not_ok "blockfs binary $BLOCKFS is not executable"
	exit 1
fi
BLOCKFS=$(realpath "$BLOCKFS")

PY=(python3 "$HERE/helper.py")
py() {
	"${PY[@]}" "$@"
}

STATE=$T		# bfs_begin's state directory
SRC=$STATE/src      # the backing tree
ORIG=$STATE/orig    # what the mount must look like (good files only)
BADORIG=$STATE/bad  # originals of the damaged files in $SRC/bad
GEN=$STATE/gen      # generated originals
MNT=$STATE/mnt
MNT2=$STATE/mnt2    # for option and daemon-mode checks
mkdir -p "$SRC" "$ORIG" "$BADORIG" "$GEN" "$MNT" "$MNT2"

bfs_at_exit bfs_lazy_umount "$MNT2"	# the daemon-mode checks mount there

START=$SECONDS
RARE=zyzzogeton
RANDREADS=${BFS_RANDREADS:-200}

# ------------------------------------------------------------- fixtures
#
# Each helper writes the backing file(s) into $SRC and the bytes the mount
# must show into $ORIG under the shown name.

# lz4f ORIGINAL SHOWN LZ4-FLAGS...: SHOWN.lz4, shown decompressed as SHOWN.
lz4f() {
	local in=$1 shown=$2
	shift 2
	mkdir -p "$(dirname "$SRC/$shown")" "$(dirname "$ORIG/$shown")"
	lz4 -q -f "$@" "$in" "$SRC/$shown.lz4" || return 1
	cp "$in" "$ORIG/$shown"
}

# bgzf ORIGINAL SHOWN EXT BGZIP-FLAGS...: SHOWN.EXT in BGZF, shown as SHOWN.
bgzf() {
	local in=$1 shown=$2 ext=$3
	shift 3
	mkdir -p "$(dirname "$SRC/$shown")" "$(dirname "$ORIG/$shown")"
	bgzip "$@" -c "$in" >"$SRC/$shown.$ext" || return 1
	cp "$in" "$ORIG/$shown"
}

# raw FILE SHOWN: a backing file shown unchanged under its own name.
raw() {
	mkdir -p "$(dirname "$SRC/$2")" "$(dirname "$ORIG/$2")"
	cp "$1" "$SRC/$2"
	cp "$1" "$ORIG/$2"
}

make_fixtures() {
	local f n

	# Originals: text with $RARE on a known number of lines, binaries,
	# random bytes, and exact multiples of the block sizes.
	py gentext "$GEN/text" 2000000 1 "$RARE" 7 || return 1
	py gentext "$GEN/big" 5000000 2 "$RARE" 11 || return 1
	: >"$GEN/bin"
	while IFS= read -r f; do
		cat "$f" >>"$GEN/bin"
		(($(stat -c %s "$GEN/bin") >= 2000000)) && break
	done < <(find /usr/lib /usr/bin -maxdepth 2 -type f -size +100k 2>/dev/null | sort)
	truncate -s 1999999 "$GEN/bin"
	head -c 1000000 /dev/urandom >"$GEN/rnd"
	: >"$GEN/empty"
	printf 'x' >"$GEN/one"
	{ head -c 131072 "$GEN/text"; head -c 131072 "$GEN/rnd"; } >"$GEN/exact4"   # 4 x 64 KiB
	{ cat "$GEN/exact4"; printf 'z'; } >"$GEN/exact4p1"                         # 4 x 64 KiB + 1
	{ head -c 130560 "$GEN/text"; head -c 65280 "$GEN/rnd"; } >"$GEN/exactg"    # 3 x 65280
	head -c 300001 "$GEN/text" >"$GEN/part_a"
	head -c 700000 "$GEN/bin" >"$GEN/part_b"
	head -c 400000 "$GEN/text" >"$GEN/small"

	# LZ4 frames across CLI flag combinations.
	lz4f "$GEN/text" t_b4.txt -B4 &&
		lz4f "$GEN/text" t_b5.txt -B5 &&
		lz4f "$GEN/big" big_b6.txt -B6 &&
		lz4f "$GEN/big" big_b7.txt -B7 &&
		lz4f "$GEN/text" t_default.txt &&
		lz4f "$GEN/text" t_bx.txt -B4 -BX &&
		lz4f "$GEN/text" t_cs.txt -B4 --content-size &&
		lz4f "$GEN/text" t_nocrc.txt -B4 --no-frame-crc &&
		lz4f "$GEN/text" t_all.txt -B5 -BX --content-size --no-frame-crc &&
		lz4f "$GEN/text" t_hc.txt -9 -B4 &&
		lz4f "$GEN/bin" bin_b4.so -B4 &&
		lz4f "$GEN/bin" bin_b6x.so -B6 -BX --content-size &&
		lz4f "$GEN/rnd" rnd_b4.bin -B4 &&
		lz4f "$GEN/rnd" rnd_b5x.bin -B5 -BX &&
		lz4f "$GEN/exact4" exact4.bin -B4 &&
		lz4f "$GEN/exact4p1" exact4p1.bin -B4 &&
		lz4f "$GEN/empty" empty &&
		lz4f "$GEN/empty" empty_cs --content-size &&
		lz4f "$GEN/one" one -B4 &&
		lz4f "$GEN/small" sub/inner.txt -B4 -BX || return 1

	# Several frames concatenated (different block sizes, an empty frame in
	# the middle), and skippable frames before (100-byte and 4-byte
	# payloads), after and between frames.
	lz4 -q -f -B4 "$GEN/part_a" "$GEN/a.lz4" &&
		lz4 -q -f -B5 -BX --content-size "$GEN/part_b" "$GEN/b.lz4" &&
		lz4 -q -f "$GEN/empty" "$GEN/e.lz4" || return 1
	cat "$GEN/a.lz4" "$GEN/e.lz4" "$GEN/b.lz4" >"$SRC/concat.txt.lz4"
	cat "$GEN/part_a" "$GEN/part_b" >"$ORIG/concat.txt"
	: >"$SRC/skip_pre.txt.lz4"
	py skippable "$SRC/skip_pre.txt.lz4" 100 0 &&
		cat "$GEN/a.lz4" >>"$SRC/skip_pre.txt.lz4" &&
		cp "$GEN/a.lz4" "$SRC/skip_post.txt.lz4" &&
		py skippable "$SRC/skip_post.txt.lz4" 4096 15 &&
		cp "$GEN/a.lz4" "$SRC/skip_mid.txt.lz4" &&
		py skippable "$SRC/skip_mid.txt.lz4" 0 5 &&
		cat "$GEN/b.lz4" >>"$SRC/skip_mid.txt.lz4" || return 1
	: >"$SRC/skip_pre4.txt.lz4"
	py skippable "$SRC/skip_pre4.txt.lz4" 4 1 && cat "$GEN/a.lz4" >>"$SRC/skip_pre4.txt.lz4" || return 1
	cp "$GEN/part_a" "$ORIG/skip_pre.txt"
	cp "$GEN/part_a" "$ORIG/skip_pre4.txt"
	cp "$GEN/part_a" "$ORIG/skip_post.txt"
	cat "$GEN/part_a" "$GEN/part_b" >"$ORIG/skip_mid.txt"

	# BGZF, with and without a .gzi index; .gz and .bgz; concatenated.
	bgzf "$GEN/text" tg.txt gz &&
		bgzf "$GEN/text" tg_l1.txt gz -l 1 &&
		bgzf "$GEN/text" tg_l0.txt gz -l 0 &&
		bgzf "$GEN/bin" bin_g.so bgz &&
		bgzf "$GEN/rnd" rnd_g.bin gz &&
		bgzf "$GEN/big" big_g.txt gz -@ 2 &&
		bgzf "$GEN/exactg" exactg.bin gz &&
		bgzf "$GEN/empty" empty_g gz &&
		bgzf "$GEN/one" one_g gz &&
		bgzf "$GEN/small" sub/deeper/inner2.txt gz || return 1
	bgzip -i -I "$SRC/tgi.txt.gz.gzi" -c "$GEN/text" >"$SRC/tgi.txt.gz" || return 1
	cp "$GEN/text" "$ORIG/tgi.txt"	# its .gzi is hidden beside the decoded tgi.txt
	bgzip -c "$GEN/part_a" >"$GEN/a.gz" && bgzip -c "$GEN/part_b" >"$GEN/b.gz" || return 1
	cat "$GEN/a.gz" "$GEN/b.gz" >"$SRC/tg_cat.txt.gz"
	cat "$GEN/part_a" "$GEN/part_b" >"$ORIG/tg_cat.txt"

	# Plain gzip and linked-block LZ4: decoded like the others.
	gzip -c "$GEN/text" >"$SRC/plain.txt.gz" && cp "$GEN/text" "$ORIG/plain.txt"
	lz4f "$GEN/text" linked.txt -BD -B4 || return 1
	# Misnamed: listed by their suffix, their reads fail (check_misnamed).
	cp "$GEN/text" "$SRC/notlz4.lz4"    # .lz4 name, not LZ4 content
	cp "$GEN/bin" "$SRC/notgz.gz"       # .gz name, not gzip content
	cp "$GEN/empty" "$SRC/empty_named.lz4"  # empty file with an .lz4 name
	raw "$GEN/rnd" raw.dat
	raw "$GEN/empty" empty_raw
	raw "$GEN/one" sub/one_raw

	# Collisions. NAME beside NAME.lz4: NAME is the plain file, NAME.lz4 is
	# shown as compressed bytes. Same for NAME.gz. x.lz4 beside x.gz (no x):
	# x is the LZ4 one, x.gz is shown unchanged.
	printf 'the plain one\n' >"$GEN/coll_plain"
	raw "$GEN/coll_plain" coll.txt
	lz4 -q -f -B4 "$GEN/part_a" "$GEN/coll.txt.lz4" && raw "$GEN/coll.txt.lz4" coll.txt.lz4
	raw "$GEN/coll_plain" coll2.txt
	bgzip -c "$GEN/part_a" >"$GEN/coll2.txt.gz" && raw "$GEN/coll2.txt.gz" coll2.txt.gz
	lz4 -q -f -B4 "$GEN/part_a" "$SRC/dup.lz4" && cp "$GEN/part_a" "$ORIG/dup"
	bgzip -c "$GEN/part_b" >"$GEN/dup.gz" && raw "$GEN/dup.gz" dup.gz

	# Symlinks, directories.
	ln -s t_b4.txt "$SRC/link.txt" && ln -s t_b4.txt "$ORIG/link.txt"
	ln -s ../tg.txt "$SRC/sub/uplink" && ln -s ../tg.txt "$ORIG/sub/uplink"
	mkdir -p "$SRC/emptydir" "$ORIG/emptydir"

	# Times, mode and a user xattr on one backing file.
	chmod 640 "$SRC/t_b4.txt.lz4"
	touch -d '2001-02-03 04:05:06' "$SRC/t_b4.txt.lz4"
	chmod 604 "$SRC/tg.txt.gz"
	HAVE_USER_XATTR=0
	if setfattr -n user.origin -v backing "$SRC/t_b4.txt.lz4" 2>/dev/null; then
		HAVE_USER_XATTR=1
	fi

	# Damaged files, in $SRC/bad; their originals in $BADORIG.
	mkdir -p "$SRC/bad"
	lz4 -q -f -B4 -BX "$GEN/small" "$SRC/bad/crc.txt.lz4" || return 1
	n=$(py lz4-blocks "$SRC/bad/crc.txt.lz4") && [[ $n == 7 ]] || return 1
	py flip-lz4 "$SRC/bad/crc.txt.lz4" 2 >/dev/null || return 1         # 3rd block
	bgzip -c "$GEN/small" >"$SRC/bad/crcg.txt.gz" || return 1
	n=$(py bgzf-members "$SRC/bad/crcg.txt.gz") && [[ $n == 8 ]] || return 1
	py flip-bgzf "$SRC/bad/crcg.txt.gz" 2 >/dev/null || return 1       # 3rd member
	lz4 -q -f -B4 "$GEN/small" "$SRC/bad/trunc.txt.lz4" || return 1
	py cut-lz4 "$SRC/bad/trunc.txt.lz4" 3 >/dev/null || return 1        # inside 4th block
	bgzip -c "$GEN/small" >"$SRC/bad/truncg.txt.gz" || return 1
	py cut-bgzf "$SRC/bad/truncg.txt.gz" 3 >/dev/null || return 1       # inside 4th member
	for f in crc crcg trunc truncg; do
		cp "$GEN/small" "$BADORIG/$f.txt"
	done

	# Backing files changed while mounted (check_live), in $SRC/live.
	mkdir -p "$SRC/live"
	lz4 -q -f -B4 "$GEN/part_a" "$SRC/live/fresh.txt.lz4" &&
		lz4 -q -f -B4 "$GEN/small" "$SRC/live/shrink.txt.lz4" || return 1

	# Known structure the xattr checks rely on.
	[[ $(py bgzf-members "$SRC/exactg.bin.gz") == 4 ]] || return 1     # 3 + EOF member
	[[ $(py lz4-blocks "$SRC/exact4.bin.lz4") == 4 ]] || return 1
	[[ $(py lz4-blocks "$SRC/exact4p1.bin.lz4") == 5 ]] || return 1
	return 0
}

if ! make_fixtures; then
	not_ok "fixture generation failed"
	exit 1
fi
ok "fixtures: $(find "$SRC" -type f | wc -l) backing files ($(du -sh "$SRC" | cut -f1)) in $((SECONDS - START)) s"

# The names the mount must list: the good tree plus bad/ with its files.
EXPECTED_NAMES=$(
	{
		(cd "$ORIG" && find . -mindepth 1 -printf '%P\n')
		printf '%s\n' bad bad/crc.txt bad/crcg.txt bad/trunc.txt bad/truncg.txt \
			live live/fresh.txt live/shrink.txt notlz4 notgz empty_named
	} | LC_ALL=C sort
)

# ------------------------------------------------------------- checks

# xattr FILE NAME: print the value (no newline) or fail.
xattr() {
	t getfattr --absolute-names --only-values -n "$2" "$1"
}

check_names() {
	local p=$1 got
	got=$(cd "$MNT" && t find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort)
	if [[ "$got" == "$EXPECTED_NAMES" ]]; then
		ok "$p: find lists exactly the expected names"
	else
		not_ok "$p: find lists exactly the expected names" \
			"diff expected got:" "$(diff <(echo "$EXPECTED_NAMES") <(echo "$got"))"
	fi
	got=$(t ls -la "$MNT" 2>&1)
	if [[ $? == 0 && "$got" == *" t_b4.txt"* && "$got" != *" tgi.txt.gz.gzi"* &&
		"$got" != *"t_b4.txt.lz4"* && "$got" != *" tg.txt.gz"* && "$got" != *"big_b7.txt.lz4"* ]]; then
		ok "$p: ls -la shows shown names, hides backing names and their sidecars"
	else
		not_ok "$p: ls -la shows shown names, hides backing names and their sidecars" "$got"
	fi
	check "$p: ls -la sub/deeper" ls -la "$MNT/sub/deeper"
	got=$(t ls -A "$MNT/emptydir" 2>&1)
	check_eq "$p: empty directory lists empty" "" "$got"
}

check_contents() {
	local p=$1 rel bad=() want got out
	while IFS= read -r rel; do
		if out=$(t cmp "$ORIG/$rel" "$MNT/$rel" 2>&1); then
			ok "$p: cmp $rel"
		else
			not_ok "$p: cmp $rel" "$out"
		fi
	done < <(cd "$ORIG" && find . -type f -printf '%P\n' | LC_ALL=C sort)

	(cd "$ORIG" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) >"$STATE/md5sums"
	if out=$(cd "$MNT" && t md5sum --quiet -c "$STATE/md5sums" 2>&1); then
		ok "$p: md5sum -c of all $(wc -l <"$STATE/md5sums") files"
	else
		not_ok "$p: md5sum -c of all files" "$out"
	fi

	while IFS= read -r rel; do
		want=$(stat -c %s "$ORIG/$rel")
		got=$(t stat -c %s "$MNT/$rel" 2>&1)
		[[ "$want" == "$got" ]] || bad+=("$rel: want $want, got $got")
	done < <(cd "$ORIG" && find . -type f -printf '%P\n' | LC_ALL=C sort)
	if ((${#bad[@]} == 0)); then
		ok "$p: stat -c %s equals the original's size for every file"
	else
		not_ok "$p: stat -c %s equals the original's size for every file" "${bad[@]}"
	fi

	tap_import timeout -k 5 300 "${PY[@]}" randread "$ORIG" "$MNT" "$RANDREADS" 12345 "$p:"

	for rel in t_b4.txt t_default.txt t_all.txt tg.txt tgi.txt tg_l0.txt; do
		got=$(t grep -c "$RARE" "$MNT/$rel" 2>&1)
		check_eq "$p: grep -c $RARE $rel" 7 "$got"
	done
	for rel in big_b6.txt big_b7.txt big_g.txt; do
		got=$(t grep -c "$RARE" "$MNT/$rel" 2>&1)
		check_eq "$p: grep -c $RARE $rel" 11 "$got"
	done
}

# Misnamed files: listed once under the name their suffix gives, with
# their backing size; opening or reading fails with EIO, the daemon and the
# rest of the mount go on, and the log names the file and what it holds.
check_misnamed() {
	local p=$1 name backing got
	for name in notlz4:notlz4.lz4 notgz:notgz.gz empty_named:empty_named.lz4; do
		backing=${name#*:}
		name=${name%%:*}
		got=$(t stat -c %s "$MNT/$name" 2>&1)
		check_eq "$p: misnamed $name: st_size is the backing file's" \
			"$(stat -c %s "$SRC/$backing")" "$got"
		check_fails "$p: misnamed $name: cat fails with EIO" "Input/output error" \
			cat "$MNT/$name"
		check_fails "$p: misnamed $name: not listed under $backing" "No such file" \
			stat "$MNT/$backing"
	done
	got=$(cd "$MNT" && t ls | grep -c '^notlz4')
	check_eq "$p: misnamed: ls lists notlz4 once" 1 "$got"
	check "$p: misnamed: the log names notgz.gz and what it holds" \
		grep -q 'notgz.gz: named as bgzf but holds raw: EIO' "$BFS_LOG"
	check "$p: misnamed: the mount still reads t_b4.txt" cmp "$GEN/text" "$MNT/t_b4.txt"
}

check_links_and_collisions() {
	local p=$1 got
	got=$(t readlink "$MNT/link.txt" 2>&1)
	check_eq "$p: readlink link.txt" t_b4.txt "$got"
	got=$(t stat -c %F "$MNT/link.txt" 2>&1)
	check_eq "$p: link.txt is a symbolic link" "symbolic link" "$got"
	got=$(t readlink "$MNT/sub/uplink" 2>&1)
	check_eq "$p: readlink sub/uplink" ../tg.txt "$got"
	check "$p: cat through link.txt" cmp "$GEN/text" "$MNT/link.txt"
	check "$p: cat through sub/uplink" cmp "$GEN/text" "$MNT/sub/uplink"
	got=$(t stat -c %F "$MNT/sub" 2>&1)
	check_eq "$p: sub is a directory" directory "$got"

	check "$p: collision: coll.txt is the plain file" cmp "$GEN/coll_plain" "$MNT/coll.txt"
	check "$p: collision: coll.txt.lz4 is the compressed bytes" cmp "$SRC/coll.txt.lz4" "$MNT/coll.txt.lz4"
	check "$p: collision: coll2.txt is the plain file" cmp "$GEN/coll_plain" "$MNT/coll2.txt"
	check "$p: collision: coll2.txt.gz is the compressed bytes" cmp "$SRC/coll2.txt.gz" "$MNT/coll2.txt.gz"
	check "$p: collision: dup is dup.lz4 decompressed" cmp "$GEN/part_a" "$MNT/dup"
	check "$p: collision: dup.gz is shown unchanged" cmp "$SRC/dup.gz" "$MNT/dup.gz"
	check "$p: plain gzip decoded" cmp "$GEN/text" "$MNT/plain.txt"
	check "$p: lz4 -BD decoded" cmp "$GEN/text" "$MNT/linked.txt"
	check_fails "$p: the .gzi of a decoded file is hidden" "No such file" \
		stat "$MNT/tgi.txt.gz.gzi"

	got=$(t stat -c '%a %Y' "$MNT/t_b4.txt" 2>&1)
	check_eq "$p: mode and mtime of t_b4.txt are the backing file's" \
		"$(stat -c '%a %Y' "$SRC/t_b4.txt.lz4")" "$got"
	got=$(t stat -c '%a %Y' "$MNT/tg.txt" 2>&1)
	check_eq "$p: mode and mtime of tg.txt are the backing file's" \
		"$(stat -c '%a %Y' "$SRC/tg.txt.gz")" "$got"
	got=$(t stat -c '%a %Y' "$MNT/raw.dat" 2>&1)
	check_eq "$p: mode and mtime of raw.dat are the backing file's" \
		"$(stat -c '%a %Y' "$SRC/raw.dat")" "$got"
}

check_xattrs() {
	local p=$1 spec shown backing want got
	for spec in t_b4.txt:lz4 t_all.txt:lz4 concat.txt:lz4 skip_mid.txt:lz4 skip_pre.txt:lz4 empty:lz4 \
		sub/inner.txt:lz4 tg.txt:bgzf tgi.txt:bgzf bin_g.so:bgzf tg_cat.txt:bgzf \
		empty_g:bgzf sub/deeper/inner2.txt:bgzf dup:lz4 \
		plain.txt:gzip linked.txt:lz4 raw.dat:raw \
		coll.txt:raw coll.txt.lz4:raw coll2.txt.gz:raw dup.gz:raw \
		'notlz4:raw (not lz4)' 'notgz:raw (not bgzf)' 'empty_named:raw (not lz4)'; do
		shown=${spec%:*}
		want=${spec##*:}
		got=$(xattr "$MNT/$shown" user.blockfs.format 2>&1)
		check_eq "$p: user.blockfs.format of $shown" "$want" "$got"
	done

	for spec in t_b4.txt:t_b4.txt.lz4 big_b7.txt:big_b7.txt.lz4 concat.txt:concat.txt.lz4 \
		tg.txt:tg.txt.gz bin_g.so:bin_g.so.bgz empty:empty.lz4 empty_g:empty_g.gz \
		raw.dat:raw.dat coll.txt.lz4:coll.txt.lz4 dup:dup.lz4 dup.gz:dup.gz \
		sub/deeper/inner2.txt:sub/deeper/inner2.txt.gz; do
		shown=${spec%%:*}
		backing=${spec#*:}
		got=$(xattr "$MNT/$shown" user.blockfs.compressed_size 2>&1)
		check_eq "$p: user.blockfs.compressed_size of $shown" \
			"$(stat -c %s "$SRC/$backing")" "$got"
	done

	for spec in t_b4.txt:65536 t_b5.txt:262144 big_b6.txt:1048576 big_b7.txt:4194304 \
		t_default.txt:4194304 exact4.bin:65536 tg.txt:65280 exactg.bin:65280; do
		shown=${spec%:*}
		got=$(xattr "$MNT/$shown" user.blockfs.block_size 2>&1)
		check_eq "$p: user.blockfs.block_size of $shown" "${spec##*:}" "$got"
	done

	# Data blocks: 4 x 64 KiB; 4 x 64 KiB + 1; 5 MB in 1 MiB / 4 MiB blocks;
	# 300001 B in 64 KiB + empty frame + 700000 B in 256 KiB; 3 x 65280 in
	# BGZF (the empty EOF member holds no data); empty files.
	for spec in exact4.bin:4 exact4p1.bin:5 big_b6.txt:5 big_b7.txt:2 concat.txt:8 \
		exactg.bin:3 empty:0 empty_g:0 one:1; do
		shown=${spec%:*}
		got=$(xattr "$MNT/$shown" user.blockfs.blocks 2>&1)
		check_eq "$p: user.blockfs.blocks of $shown" "${spec##*:}" "$got"
	done

	check_fails "$p: getfattr of unknown user.blockfs.foo is ENODATA" "No such attribute" \
		getfattr -n user.blockfs.foo "$MNT/t_b4.txt"
	check_fails "$p: setfattr of user.blockfs.anything is ENOTSUP" "Operation not supported" \
		setfattr -n user.blockfs.anything -v x "$MNT/t_b4.txt"
	check_fails "$p: setfattr of user.other is EROFS" "Read-only file system" \
		setfattr -n user.other -v x "$MNT/t_b4.txt"
	check_fails "$p: setfattr -x of user.origin is EROFS" "Read-only file system" \
		setfattr -x user.origin "$MNT/t_b4.txt"
	if ((HAVE_USER_XATTR)); then
		got=$(xattr "$MNT/t_b4.txt" user.origin 2>&1)
		check_eq "$p: backing file's user.origin shown" backing "$got"
	fi
	# The computed names are read by name only: copies must not carry them.
	got=$(t getfattr --absolute-names -d -m '^user\.blockfs\.' "$MNT/t_b4.txt" 2>&1)
	if [[ "$got" != *user.blockfs.* ]]; then
		ok "$p: listxattr lists no computed user.blockfs name"
	else
		not_ok "$p: listxattr lists no computed user.blockfs name" "$got"
	fi
}

check_erofs() {
	local p=$1 f=$MNT/t_b4.txt msg="Read-only file system"
	check_fails "$p: EROFS: touch new file" "$msg" touch "$MNT/newfile"
	check_fails "$p: EROFS: touch existing file" "$msg" touch "$f"
	check_fails "$p: EROFS: echo > file" "$msg" bash -c 'echo x >"$1"' _ "$f"
	check_fails "$p: EROFS: echo >> file" "$msg" bash -c 'echo x >>"$1"' _ "$f"
	check_fails "$p: EROFS: echo > new file" "$msg" bash -c 'echo x >"$1"' _ "$MNT/sub/newfile"
	check_fails "$p: EROFS: mkdir" "$msg" mkdir "$MNT/newdir"
	check_fails "$p: EROFS: rm" "$msg" rm -f "$f"
	check_fails "$p: EROFS: rm raw file" "$msg" rm -f "$MNT/raw.dat"
	check_fails "$p: EROFS: rmdir" "$msg" rmdir "$MNT/emptydir"
	check_fails "$p: EROFS: mv" "$msg" mv "$f" "$MNT/moved"
	check_fails "$p: EROFS: mv into subdir" "$msg" mv "$MNT/raw.dat" "$MNT/sub/raw.dat"
	check_fails "$p: EROFS: chmod" "$msg" chmod 600 "$f"
	check_fails "$p: EROFS: chown" "$msg" chown 1:1 "$f"
	check_fails "$p: EROFS: truncate" "$msg" truncate -s 0 "$f"
	check_fails "$p: EROFS: ln -s" "$msg" ln -s t_b4.txt "$MNT/newlink"
	check_fails "$p: EROFS: ln (hard link)" "$msg" ln "$f" "$MNT/hardlink"
	check_fails "$p: EROFS: mkfifo" "$msg" mkfifo "$MNT/fifo"
	check "$p: t_b4.txt intact after the write attempts" cmp "$GEN/text" "$f"
	check "$p: raw.dat intact after the write attempts" cmp "$GEN/rnd" "$MNT/raw.dat"
	check "$p: backing file intact after the write attempts" \
		bash -c '[[ $(lz4 -dc "$1" | md5sum) == $(md5sum <"$2") ]]' _ "$SRC/t_b4.txt.lz4" "$GEN/text"
}

# range_is P NAME FILE OFF LEN EXPECT: pread must give EXPECT ("data" or EIO).
range_is() {
	local p=$1 name=$2 file=$3 off=$4 len=$5 expect=$6 got
	got=$(t "${PY[@]}" range "$MNT/bad/$file" "$BADORIG/$file" "$off" "$len" "$expect" 2>&1)
	check_eq "$p: $name: pread($off, $len) gives $expect" "$expect" "$got"
}

# check_bad_block P FILE WHAT BS STRICT: FILE's 3rd block [2*BS, 3*BS) is
# corrupt. Reads through the page cache come in whole pages, so the good
# ranges checked are the pages entirely outside the bad block; STRICT=0
# (verify=off, checksums not checked) does not require EIO on the bad block.
check_bad_block() {
	local p=$1 file=$2 what=$3 bs=$4 strict=$5 got out
	local b2=$((2 * bs)) b3=$((3 * bs))
	local before=$((b2 / 4096 * 4096)) after=$(((b3 + 4095) / 4096 * 4096))
	range_is "$p" "$what" "$file" 0 "$before" data
	range_is "$p" "$what" "$file" "$after" 1000000 data
	range_is "$p" "$what" "$file" "$after" 1 data
	range_is "$p" "$what" "$file" $((before - 1)) 1 data
	if ((strict)); then
		range_is "$p" "$what" "$file" "$b2" "$bs" EIO
		range_is "$p" "$what" "$file" $((b2 - 100)) 200 EIO
		range_is "$p" "$what" "$file" $((b3 - 100)) 200 EIO
		range_is "$p" "$what" "$file" $((b2 + bs / 2)) 1 EIO
		range_is "$p" "$what" "$file" 0 $((b3 + 100)) EIO
		check_fails "$p: $what: dd of the bad block fails with EIO" "Input/output error" \
			dd if="$MNT/bad/$file" of=/dev/null bs="$bs" skip=2 count=1 status=none
		check_fails "$p: $what: cat fails with EIO" "Input/output error" cat "$MNT/bad/$file"
		if grep -qF "$file" "$BFS_LOG"; then
			ok "$p: $what: daemon log names the file"
		else
			not_ok "$p: $what: daemon log names the file" "log: $(tail -n 5 "$BFS_LOG")"
		fi
	else
		got=$(t "${PY[@]}" range "$MNT/bad/$file" "$BADORIG/$file" "$b2" "$bs" data 2>&1)
		diag "$p: $what: with verify=off the corrupt block read gave: $got"
	fi
	# The good blocks again, after the error, with dd across block boundaries.
	range_is "$p" "$what" "$file" 0 "$before" data
	if out=$(t dd if="$MNT/bad/$file" bs=4096 skip=$((after / 4096)) status=none 2>&1 |
		cmp - <(tail -c +$((after + 1)) "$BADORIG/$file") 2>&1); then
		ok "$p: $what: dd bs=4096 skip=$((after / 4096)) (all blocks after the bad one) reads correctly"
	else
		not_ok "$p: $what: dd bs=4096 skip=$((after / 4096)) (all blocks after the bad one) reads correctly" "$out"
	fi
	if out=$(t dd if="$MNT/bad/$file" bs=4096 count=$((before / 4096)) status=none 2>&1 |
		cmp - <(head -c "$before" "$BADORIG/$file") 2>&1); then
		ok "$p: $what: dd bs=4096 count=$((before / 4096)) (the blocks before the bad one) reads correctly"
	else
		not_ok "$p: $what: dd bs=4096 count=$((before / 4096)) (the blocks before the bad one) reads correctly" "$out"
	fi
}

check_damage() {
	local p=$1 strict=$2 got
	check_bad_block "$p" crc.txt "lz4 -BX, flipped byte in block 3" 65536 "$strict"
	check_bad_block "$p" crcg.txt "BGZF, flipped byte in member 3" 65280 "$strict"

	check "$p: truncated lz4: sequential read gives the 3 intact blocks then EIO" \
		"${PY[@]}" prefix "$MNT/bad/trunc.txt" "$BADORIG/trunc.txt" $((3 * 65536)) 4096
	check "$p: truncated BGZF: sequential read gives the 3 intact members then EIO" \
		"${PY[@]}" prefix "$MNT/bad/truncg.txt" "$BADORIG/truncg.txt" $((3 * 65280)) 65536
	check_fails "$p: truncated lz4: cat fails with EIO" "Input/output error" cat "$MNT/bad/trunc.txt"
	check_fails "$p: truncated BGZF: cat fails with EIO" "Input/output error" cat "$MNT/bad/truncg.txt"
	got=$(t "${PY[@]}" range "$MNT/bad/trunc.txt" "$BADORIG/trunc.txt" 65000 1000 data 2>&1)
	check_eq "$p: truncated lz4: pread inside the intact prefix" data "$got"

	if daemon_alive; then
		ok "$p: daemon alive after the damaged files"
	else
		not_ok "$p: daemon alive after the damaged files"
	fi
	check "$p: other files read fine after the damaged files (t_b4.txt)" cmp "$GEN/text" "$MNT/t_b4.txt"
	check "$p: other files read fine after the damaged files (tg.txt)" cmp "$GEN/text" "$MNT/tg.txt"
	check "$p: other files read fine after the damaged files (bin_b6x.so)" cmp "$GEN/bin" "$MNT/bin_b6x.so"
}

# Several readers at once, on different files and on the same file.
check_parallel() {
	local p=$1 pids=() rel pid failed=0
	for rel in t_b4.txt tg.txt bin_b4.so rnd_g.bin big_b6.txt t_b4.txt tg.txt concat.txt; do
		t cmp "$ORIG/$rel" "$MNT/$rel" &
		pids+=("$!")
	done
	for pid in "${pids[@]}"; do
		wait "$pid" || failed=$((failed + 1))
	done
	check_eq "$p: 8 concurrent readers all compare equal (failures)" 0 "$failed"
}

# blockfs(8), CACHING: a backing file replaced while mounted is seen fresh on its next
# open; one truncated under an open reader gives EIO, never a dead daemon.
check_live() {
	local p=$1 out
	check "$p: live: fresh.txt before the change" cmp "$GEN/part_a" "$MNT/live/fresh.txt"
	lz4 -q -f -B5 "$GEN/part_b" "$STATE/fresh.new" && mv "$STATE/fresh.new" "$SRC/live/fresh.txt.lz4"
	check "$p: live: fresh.txt replaced on the backing side is seen on the next open" \
		cmp "$GEN/part_b" "$MNT/live/fresh.txt"
	# One dd only: its skip moves the offset that fd 3 shares.
	out=$(t bash -c 'exec 3<"$1" && head -c 4096 <&3 >/dev/null && truncate -s 20000 "$2" || exit 99
		dd bs=65536 skip=4 count=1 status=none <&3 2>&1 >/dev/null
		echo "dd exit $?"' _ \
		"$MNT/live/shrink.txt" "$SRC/live/shrink.txt.lz4" 2>&1)
	if [[ "$out" == *"Input/output error"* ]]; then
		ok "$p: live: reading a file truncated under an open reader gives EIO"
	else
		not_ok "$p: live: reading a file truncated under an open reader gives EIO" "got: $out"
	fi
	if daemon_alive; then
		ok "$p: live: daemon alive after the backing changes"
	else
		not_ok "$p: live: daemon alive after the backing changes"
	fi
}

# run_pass LABEL OPTIONS STRICT LIVE: mount, run the read set, unmount.
# STRICT: corrupt blocks must give EIO (checksums verified). LIVE: also
# change backing files under the mount (last pass only).
run_pass() {
	local p=$1 opts=$2 strict=$3 live=$4 rc t0=$SECONDS
	if bfs_mount "$SRC" "$MNT" "$STATE/daemon-$p.log" "$opts"; then
		ok "$p: mounted with -o $opts"
	else
		not_ok "$p: mounted with -o $opts" "daemon exit status ${BFS_EXIT:-none}"
		show_log
		bfs_kill
		return
	fi
	check_names "$p"
	check_misnamed "$p"
	check_contents "$p"
	check_links_and_collisions "$p"
	check_xattrs "$p"
	check_erofs "$p"
	check_damage "$p" "$strict"
	check_parallel "$p"
	if ((live)); then
		check_live "$p"
	fi
	if bfs_umount; then
		ok "$p: fusermount3 -u; daemon exited 0"
	else
		rc=$?
		not_ok "$p: fusermount3 -u; daemon exited 0" "exit status $rc"
		show_log
		bfs_kill
	fi
	if is_mounted "$MNT"; then
		not_ok "$p: nothing mounted after unmount"
	fi
	diag "$p: pass took $((SECONDS - t0)) s"
}

# check_refused OPTIONS WORD: blockfs must exit 1, name WORD, mount nothing.
check_refused() {
	local opts=$1 word=$2 out rc=0
	out=$(timeout -k 5 20 "$BLOCKFS" -f "$SRC" "$MNT2" -o "$opts" 2>&1) || rc=$?
	if ((rc == 1)) && [[ "$out" == *"$word"* ]] && ! is_mounted "$MNT2"; then
		ok "-o $opts refused: exit 1, message names $word, nothing mounted"
	else
		not_ok "-o $opts refused: exit 1, message names $word, nothing mounted" \
			"exit $rc, mounted: $(is_mounted "$MNT2" && echo yes || echo no)" "output: ${out:0:500}"
	fi
	if is_mounted "$MNT2"; then
		fusermount3 -uz "$MNT2" >/dev/null 2>&1 || true
	fi
}

# check_readpath_later MODE: mmap and auto may be refused as "not built yet"
# for now; once they mount, every file must compare equal.
check_readpath_later() {
	local mode=$1 out p="readpath=$1"
	local log="$STATE/daemon-$p.log"
	if ! bfs_mount "$SRC" "$MNT" "$log" "readpath=$mode"; then
		if [[ "$BFS_EXIT" == 1 ]] && grep -q "not built yet" "$log" && ! is_mounted "$MNT"; then
			ok "$p: refused for now: exit 1, \"not built yet\", nothing mounted # SKIP not built yet"
		else
			not_ok "$p: mounts, or is refused as \"not built yet\"" \
				"exit ${BFS_EXIT:-none}, log: $(head -c 500 "$log")"
		fi
		bfs_kill
		return
	fi
	ok "$p: mounted"
	(cd "$ORIG" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) >"$STATE/md5sums"
	if out=$(cd "$MNT" && t md5sum --quiet -c "$STATE/md5sums" 2>&1); then
		ok "$p: md5sum -c of all files"
	else
		not_ok "$p: md5sum -c of all files" "$out"
	fi
	tap_import timeout -k 5 300 "${PY[@]}" randread "$ORIG" "$MNT" 50 777 "$p:"
	if bfs_umount; then
		ok "$p: fusermount3 -u; daemon exited 0"
	else
		not_ok "$p: fusermount3 -u; daemon exited 0" "exit status $?"
		show_log
		bfs_kill
	fi
}

check_options() {
	check_refused readpath=bogus readpath
	check_refused readpath= readpath
	check_refused verify=maybe verify
	check_refused cache_size=12Q cache_size
	check_readpath_later mmap
	check_readpath_later auto
}

# Without -f, blockfs mounts, daemonizes, and the command returns 0.
check_daemon_mode() {
	local out rc=0 deadline
	out=$(timeout -k 5 30 "$BLOCKFS" "$SRC" "$MNT2" -o readpath=pread 2>&1 </dev/null) || rc=$?
	if ((rc == 0)) && is_mounted "$MNT2"; then
		ok "without -f: blockfs returns 0 with the mount in place"
	else
		not_ok "without -f: blockfs returns 0 with the mount in place" "exit $rc, output: ${out:0:500}"
		fusermount3 -uz "$MNT2" >/dev/null 2>&1 || true
		return
	fi
	check "without -f: reads work" cmp "$GEN/text" "$MNT2/tg.txt"
	check "without -f: fusermount3 -u" fusermount3 -u "$MNT2"
	deadline=$((SECONDS + 10))
	while is_mounted "$MNT2" && ((SECONDS < deadline)); do
		sleep 0.1
	done
	if is_mounted "$MNT2"; then
		not_ok "without -f: unmounted"
		fusermount3 -uz "$MNT2" >/dev/null 2>&1 || true
	fi
}

check_help_version() {
	local out rc=0 w
	out=$(t "$BLOCKFS" -h 2>&1) || rc=$?
	for w in readpath populate advice cache_size readahead workers verify; do
		[[ "$out" == *"$w"* ]] || rc="$rc, no $w"
	done
	check_eq "blockfs -h: exit 0, lists the main options of blockfs(8)" 0 "$rc"
	rc=0
	out=$(t "$BLOCKFS" -V 2>&1) || rc=$?
	for w in blockfs libfuse liblz4 zlib; do
		[[ "$out" == *"$w"* ]] || rc="$rc, no $w"
	done
	check_eq "blockfs -V: exit 0, versions of blockfs, libfuse, liblz4, zlib" 0 "$rc"
}

run_pass verify=on readpath=pread,verify=on 1 0
run_pass verify=off readpath=pread,verify=off 0 1
check_help_version
check_options
check_daemon_mode

# Every pass has its own daemon log: show them all, not only the last.
if ((T_FAIL > 0)); then
	for log in "$STATE"/daemon-*.log; do
		[[ -s "$log" ]] || continue
		diag "---- $log ----"
		tail -n 100 "$log" | sed 's/^/#   /'
	done
	BFS_LOG=	# shown above
fi
bfs_end
