#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# LZ4 with linked blocks and legacy frames through a real mount: lz4 -BD
# (-B4..-B7, with and without --content-size, -BX, --no-frame-crc), lz4 -l,
# python-lz4's lz4.frame.compress() and lz4.frame.open() writes (block
# sizes, content_checksum, linked blocks by default, flush() mid-stream),
# and concatenations of every kind are shown decoded, with the size from
# the first stat and the bytes lz4 -dc gives, whole (md5) and in seeded
# random ranges, under readpath=pread and mmap; again from the index
# cache after a remount. Damage (a cut file, flipped bytes) serves the
# intact prefix, then EIO, and the daemon and the other files live on.
#
# Usage: lz4_linked.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: lz4_linked.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin lz4_linked lz4 getfattr md5sum
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
"$PY" -c 'import lz4.frame' 2>/dev/null || skip "no python lz4 module (Debian: python3-lz4)"

S=$T/src M=$T/mnt C=$T/cache W=$T/work
mkdir -p "$S" "$M" "$C" "$W"
chmod 700 "$C"

# Originals: log-like text (compresses about 3:1) with stretches of random
# bytes (stored blocks), 6 MiB and 20 MiB (legacy: 8 MiB blocks).
"$PY" - "$W" <<'PY'
import random, sys
w = sys.argv[1]
r = random.Random(21)
words = ["read", "block", "span", "checkpoint", "linked", "frame", "cache", "hit", "miss",
         "/var/log/x", "200", "404", "ok"]
def data(n):
    out, size, i = [], 0, 0
    while size < n:
        if i % 97 == 96:
            chunk = r.randbytes(r.randrange(1000, 90000))
        else:
            chunk = ("%09d %s %d\n" % (i, " ".join(r.choices(words, k=6)),
                                       r.randint(0, 1 << 20))).encode()
        out.append(chunk)
        size += len(chunk)
        i += 1
    return b"".join(out)[:n]
open(w + "/d6", "wb").write(data(6 << 20))
open(w + "/d20", "wb").write(data(20 << 20))
open(w + "/small", "wb").write(data(5000))
PY

# name SRC-FILE: the shown name's original, from lz4 -dc of the backing file.
orig() {
	lz4 -dc "$S/$1.lz4" >"$W/$1" 2>/dev/null
}

names=()
for b in 4 5 6 7; do
	for v in plain csize bx nofcrc; do
		case $v in
		plain) opts=() ;;
		csize) opts=(--content-size) ;;
		bx) opts=(-BX) ;;
		nofcrc) opts=(--no-frame-crc) ;;
		esac
		n=bd$b-$v
		lz4 -q -f -BD -B$b "${opts[@]}" "$W/d6" "$S/$n.lz4" && names+=("$n")
	done
done
lz4 -q -f -l "$W/d20" "$S/legacy.lz4" && names+=(legacy)
lz4 -q -f -l "$W/small" "$S/legacy_small.lz4" && names+=(legacy_small)
"$PY" - "$W/d6" "$S" <<'PY' || { not_ok "python-lz4 writes the files"; exit 1; }
import sys
import lz4.frame as lf
data = open(sys.argv[1], "rb").read()
s = sys.argv[2]
sizes = {"64k": lf.BLOCKSIZE_MAX64KB, "256k": lf.BLOCKSIZE_MAX256KB,
         "1m": lf.BLOCKSIZE_MAX1MB, "4m": lf.BLOCKSIZE_MAX4MB}
open(s + "/py_default.lz4", "wb").write(lf.compress(data))
for tag, bs in sizes.items():
    open(s + "/py_%s_cc.lz4" % tag, "wb").write(
        lf.compress(data, block_size=bs, content_checksum=True))
# lz4.frame.open(): writes of odd sizes, flush() now and then (a short block each)
for tag, bs in (("64k", sizes["64k"]), ("1m", sizes["1m"])):
    with lf.open(s + "/py_open_%s.lz4" % tag, "wb", block_size=bs) as f:
        at, i = 0, 0
        while at < len(data):
            n = 7000 + 1013 * (i % 50)
            f.write(data[at:at + n])
            if i % 7 == 3:
                f.flush()
            at += n
            i += 1
PY
names+=(py_default py_64k_cc py_256k_cc py_1m_cc py_4m_cc py_open_64k py_open_1m)
# concatenations: linked, independent, legacy, skippable, linked again
lz4 -q -f -B5 "$W/small" "$T/indep.lz4"
{ cat "$S/bd4-plain.lz4" "$T/indep.lz4" "$S/legacy_small.lz4"
  printf '\x50\x2a\x4d\x18\x03\x00\x00\x00abc'; cat "$S/py_open_64k.lz4"; } >"$S/cat_kinds.lz4"
cat "$S/legacy_small.lz4" "$S/legacy_small.lz4" "$S/bd5-bx.lz4" >"$S/cat_legacy.lz4"
names+=(cat_kinds cat_legacy)
for n in "${names[@]}"; do
	orig "$n" || { not_ok "$n: lz4 -dc decodes it"; exit 1; }
done

# Damage: the second of two linked frames flipped (only its content checksum
# vouched for it: dropped whole), a -BX frame flipped (its blocks up to the
# damaged one serve), frames cut short, a legacy frame followed by junk.
cat "$S/py_64k_cc.lz4" "$S/py_64k_cc.lz4" >"$T/two.lz4"
one=$(stat -c %s "$S/py_64k_cc.lz4")
cp "$T/two.lz4" "$S/flip_cc.lz4"
printf '\x55' | dd of="$S/flip_cc.lz4" bs=1 seek=$((one + one / 2)) conv=notrunc 2>/dev/null
cp "$S/bd4-bx.lz4" "$S/flip_bx.lz4"
bx=$(stat -c %s "$S/bd4-bx.lz4")
printf '\x55' | dd of="$S/flip_bx.lz4" bs=1 seek=$((bx / 2)) conv=notrunc 2>/dev/null
head -c $((one + one / 3)) "$T/two.lz4" >"$S/cut_py.lz4"
head -c $(($(stat -c %s "$S/legacy.lz4") - 1000)) "$S/legacy.lz4" >"$S/cut_legacy.lz4"
{ cat "$S/legacy_small.lz4"; printf 'junk after the frame'; } >"$S/junk_legacy.lz4"
damaged=(flip_cc flip_bx cut_py cut_legacy junk_legacy)

# ranges.py FILE REF: 150 seeded random reads: 4 KiB preads and ranges up to 3 MiB
cat >"$T/ranges.py" <<'PY'
import os, random, sys
a, b = (os.open(p, os.O_RDONLY) for p in sys.argv[1:3])
size = os.fstat(b).st_size
r = random.Random(int(sys.argv[3]))
for i in range(150):
    off = r.randrange(size)
    n = r.choice([1, 4096, 4096, 65536, 1 << 20, 3 << 20, r.randrange(1, 300000)])
    if os.pread(a, n, off) != os.pread(b, n, off):
        sys.exit("range %d at %d, %d bytes differs" % (i, off, n))
PY

# prefix_then_eio RP SHOWN: cat fails with EIO, and what it gave (kept in
# $T/SHOWN.got) is a prefix of what lz4 -dc gives.
prefix_then_eio() {
	local name="$1: $2: the intact prefix, then EIO" got=$T/$2.got err
	if t cat "$M/$2" >"$got" 2>"$T/$2.err"; then
		not_ok "$name" "cat succeeded"
		return
	fi
	err=$(cat "$T/$2.err")
	if [[ $err != *"Input/output error"* ]]; then
		not_ok "$name" "$err"
	elif lz4 -dc "$S/$2.lz4" 2>/dev/null | cmp -s - "$got" ||
		lz4 -dc "$S/$2.lz4" 2>/dev/null | cmp - "$got" 2>&1 | grep -q "EOF on $got"; then
		ok "$name ($(stat -c %s "$got") bytes)"
	else
		not_ok "$name" "$(lz4 -dc "$S/$2.lz4" 2>/dev/null | cmp - "$got" 2>&1)"
	fi
}

for rp in pread mmap; do
	mount_o "readpath=$rp,index_cache=$C"
	diag "readpath=$rp"
	seed=1
	for n in "${names[@]}"; do
		check_eq "$rp: $n: size from the first stat" "$(stat -c %s "$W/$n")" \
			"$(t stat -c %s "$M/$n")"
		check_eq "$rp: $n: format lz4" lz4 "$(xattr format "$n")"
		check_eq "$rp: $n: md5 equals lz4 -dc's" "$(md5sum <"$W/$n")" \
			"$(t md5sum <"$M/$n")"
		check "$rp: $n: random ranges" "$PY" "$T/ranges.py" "$M/$n" "$W/$n" $((seed++))
	done
	for n in "${damaged[@]}"; do
		prefix_then_eio "$rp" "$n"
	done
	check "$rp: flip_cc: the first frame whole before the EIO" \
		cmp -n "$(stat -c %s "$W/py_64k_cc")" "$T/flip_cc.got" "$W/py_64k_cc"
	check "$rp: flip_bx: some of the frame before the EIO" test -s "$T/flip_bx.got"
	check "$rp: after the damage: the daemon serves" cmp "$M/bd4-plain" "$W/bd4-plain"
	umount_o
done

# Remounted: every index (the checkpoints with it) comes from the cache.
mount_o "index_cache=$C"
seed=100
for n in bd4-plain bd5-bx py_default py_open_64k cat_kinds legacy; do
	check_eq "cache: $n: size" "$(stat -c %s "$W/$n")" "$(t stat -c %s "$M/$n")"
	check_eq "cache: $n: index from the cache" cache "$(xattr index_source "$n")"
	check "cache: $n: random ranges" "$PY" "$T/ranges.py" "$M/$n" "$W/$n" $((seed++))
	check_eq "cache: $n: md5" "$(md5sum <"$W/$n")" "$(t md5sum <"$M/$n")"
done
umount_o
bfs_end
