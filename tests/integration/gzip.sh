#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Plain gzip, decoded by default (-o gzip=index): files from gzip -1 and
# -9, pigz, Python's gzip module (flushing) and multi-member concatenations
# (empty members too) are shown under NAME with the size and bytes gzip
# -dc gives, whole and in seeded random ranges; BGZF stays on the BGZF
# codec; gzip=raw shows their bytes unchanged under NAME. Damage: a truncated file and a
# flipped byte serve the intact prefix, then EIO. A file replaced (by
# rename) during its walk is seen fresh afterwards. With index_cache the
# walk is not repeated after a remount (counted backing reads), nor at
# all after blockfs-pack --index --index-cache made the entry (which must
# have the mount's gzip_span, and refuses a damaged file). Bad option
# values are refused.
#
# Usage: gzip.sh BLOCKFS PACK      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: gzip.sh BLOCKFS PACK}")
PACK=$(realpath "${2:?usage: gzip.sh BLOCKFS PACK}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin gzip gzip pigz bgzip getfattr python3
S=$T/src M=$T/mnt C=$T/cache W=$T/work
mkdir -p "$S" "$M" "$C" "$W"
chmod 700 "$C"

# Log-like text, about 4:1 under gzip: 16 MiB, and 3 MiB pieces.
python3 - "$W" <<'PY'
import random, sys
w = sys.argv[1]
r = random.Random(15)
words = ["GET", "PUT", "/index.html", "/api/v1/items", "200", "404", "ok", "slow",
         "cache", "miss", "hit", "user", "session", "checkpoint"]
def text(n):
    out, size, i = [], 0, 0
    while size < n:
        line = "%09d %s %s %d\n" % (i, r.choice(words), " ".join(r.choices(words, k=4)),
                                    r.randint(0, 1 << 20))
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out).encode()[:n]
open(w + "/big", "wb").write(text(16 << 20))
for name in ("p1", "p2", "p3"):
    open(w + "/" + name, "wb").write(text(3 << 20))
PY
gzip -1 -c "$W/big" >"$S/g1.gz"
gzip -9 -c "$W/big" >"$S/g9.gz"
pigz -c -p 2 "$W/big" >"$S/pigz.gz"
python3 - "$W/big" "$S/py.gz" <<'PY'
import gzip, sys
data = open(sys.argv[1], "rb").read()
with gzip.open(sys.argv[2], "wb", compresslevel=6) as g:
    for i in range(0, len(data), 1 << 20):
        g.write(data[i:i + (1 << 20)])
        g.flush()
PY
: | gzip -c >"$T/empty.gz"
{ gzip -c "$W/p1"; cat "$T/empty.gz"; gzip -1 -c "$W/p2"; pigz -c "$W/p3"; cat "$T/empty.gz"; } >"$S/multi.gz"
cat "$W/p1" "$W/p2" "$W/p3" >"$W/multi"
bgzip -c "$W/p1" >"$S/bg.gz"
cp "$W/p1" "$W/bg"
for f in g1 g9 pigz py; do cp "$W/big" "$W/$f"; done
# damage: 3 members, the second flipped in the middle; and one cut short
{ gzip -c "$W/p1"; gzip -c "$W/p2"; gzip -c "$W/p3"; } >"$S/flip.gz"
m1=$(gzip -c "$W/p1" | wc -c) m2=$(gzip -c "$W/p2" | wc -c)
printf '\x77' | dd of="$S/flip.gz" bs=1 seek=$((m1 + m2 / 2)) conv=notrunc 2>/dev/null
head -c $((m1 + m2 / 3)) "$S/flip.gz" >"$S/cut.gz"

# ranges.py FILE REF: 200 seeded random reads (offsets anywhere, 1 B to 3 MiB)
cat >"$T/ranges.py" <<'PY'
import os, random, sys
a, b = (open(p, "rb") for p in sys.argv[1:3])
size = os.fstat(b.fileno()).st_size
r = random.Random(7)
for i in range(200):
    off = r.randrange(size)
    n = r.choice([1, 4096, 65536, 1 << 20, 3 << 20, r.randrange(1, 200000)])
    a.seek(off); b.seek(off)
    if a.read(n) != b.read(n):
        sys.exit("range %d at %d, %d bytes differs" % (i, off, n))
PY

# --- gzip=raw: named by the suffix, bytes unchanged ------------------------------
mount_o "gzip=raw,readpath=pread"
check_fails "gzip=raw: g1.gz is listed as g1" "No such file" stat "$M/g1.gz"
check "gzip=raw: g1 reads as the backing file" cmp "$M/g1" "$S/g1.gz"
check_eq "gzip=raw: g1's format raw" raw "$(xattr format g1)"
check_eq "gzip=raw: BGZF still decoded" bgzf "$(xattr format bg)"
umount_o

# --- the default: decoded; ls -l walks the big files side by side -------------
mount_o "readpath=pread,workers=2,index_cache=off"
got=$(t ls -l "$M" | awk '$9 == "g1" || $9 == "g9" || $9 == "pigz" || $9 == "py" { print $5 }' |
	sort -u)
check_eq "default: ls -l sizes the four walked files" "$(stat -c %s "$W/big")" "$got"
got=$(t getfattr --only-values -n user.blockfs.stats "$M" | awk '$1 == "walked_ahead" { print $2 }')
check "default: ls -l of the directory walked them side by side (walked_ahead $got)" \
	test "${got:-0}" -ge 4
check "default: g1 decoded" cmp "$M/g1" "$W/g1"
check_eq "default: g1's format gzip" gzip "$(xattr format g1)"
umount_o

# --- user.blockfs.walk while a walk goes on ---------------------------------------
# A file rewritten in place is walked again by its next open; meanwhile
# (attributes still cached, so no GETATTR waits for the walk) the attribute
# says how far the walk is, without waiting for it.
printf 'x' | gzip -c >"$S/grow.gz"
mount_o "index_cache=off"
t stat "$M/grow" >/dev/null
for _ in 1 2 3 4 5 6 7 8; do cat "$S/g1.gz"; done >"$S/grow.gz"
# The open goes first (a head start), else a getxattr could find the file
# changed and walk it itself.
got=$(t python3 - "$M/grow" <<'PY'
import os, sys, threading, time
path = sys.argv[1]
t = threading.Thread(target=lambda: open(path, "rb").read(10))
t.start()
time.sleep(0.03)
seen = ""
while t.is_alive() and not seen:
    v = os.getxattr(path, "user.blockfs.walk").decode()
    if v.startswith("walking "):
        seen = v
t.join()
print(seen or "none", "|", os.getxattr(path, "user.blockfs.walk").decode())
PY
)
check "walk progress: '${got% |*}' while it went on" test "${got:0:8}" = "walking "
check_eq "walk progress: complete after it" complete "${got##*| }"
umount_o

# --- gzip=index ------------------------------------------------------------------
for rp in pread mmap; do
	mount_o "gzip=index,readpath=$rp"
	diag "readpath=$rp"
	for f in g1 g9 pigz py multi; do
		check_eq "$rp: $f: size from the first stat" "$(stat -c %s "$W/$f")" \
			"$(t stat -c %s "$M/$f")"
		check_eq "$rp: $f: format gzip" gzip "$(xattr format "$f")"
		check_eq "$rp: $f: walk complete" complete "$(xattr walk "$f")"
		check "$rp: $f: cat equals gzip -dc" cmp "$M/$f" "$W/$f"
		check "$rp: $f: 200 random ranges" python3 "$T/ranges.py" "$M/$f" "$W/$f"
	done
	n=$(xattr checkpoints g9)
	if ((n >= 14)); then ok "$rp: g9: $n checkpoints (1 MiB spans)"; else
		not_ok "$rp: g9: checkpoints" "$n"; fi
	check_fails "$rp: the .gz name is not shown" "No such file" stat "$M/g1.gz"
	check_eq "$rp: BGZF stays BGZF" bgzf "$(xattr format bg)"
	check "$rp: bg reads exact" cmp "$M/bg" "$W/bg"
	# damage: the intact prefix, then EIO
	check_eq "$rp: flip: walk damaged" damaged "$(xattr walk flip)"
	check_fails "$rp: flip: cat ends in EIO" "Input/output error" cat "$M/flip"
	# shellcheck disable=SC2016 # the script's own arguments
	check "$rp: flip: the first member's bytes, then EIO" sh -c '
		cat "$1" 2>/dev/null | cmp -s - "$2"' _ "$M/flip" "$W/p1"
	check_fails "$rp: cut: cat ends in EIO" "Input/output error" cat "$M/cut"
	# shellcheck disable=SC2016 # the script's own arguments
	check "$rp: cut: what cat gets is gzip -dc's prefix, past the first member" sh -c '
		cat "$1" 2>/dev/null >"$3.got"; gzip -dc "$2" 2>/dev/null >"$3.want"
		[ "$(wc -c <"$3.got")" -gt "$(wc -c <"$4")" ] &&
		cmp -s "$3.got" "$3.want" || cmp "$3.got" "$3.want" 2>&1 | grep -q EOF' \
		_ "$M/cut" "$S/cut.gz" "$T/cut" "$W/p1"
	umount_o
done

# --- a file replaced during its walk ---------------------------------------------
for i in 1 2 3 4 5 6 7 8; do cat "$W/big"; done >"$W/huge"	# a walk of about 0.5 s
gzip -1 -c "$W/huge" >"$S/repl.gz"
cp "$W/p1" "$W/repl.new"
gzip -c "$W/p1" >"$T/repl.new.gz"
mount_o "gzip=index"
t stat -c %s "$M/repl" >"$T/first-size" &
sleep 0.1
mv "$T/repl.new.gz" "$S/repl.gz"
wait $!
sz=$(cat "$T/first-size")
if [[ "$sz" == $(stat -c %s "$W/huge") || "$sz" == $(stat -c %s "$W/repl.new") ]]; then
	ok "replaced during the walk: the stat saw one whole version ($sz)"
else
	not_ok "replaced during the walk: stat" "$sz"
fi
sleep 1.2		# the kernel's attribute timeout
check "replaced during the walk: the new file reads exact" cmp "$M/repl" "$W/repl.new"
umount_o

# --- the index cache: one walk per file version ------------------------------------
mount_o "gzip=index,index_cache=$C"
t stat "$M/g9" "$M/multi" >/dev/null
check_eq "first mount: g9 walked" gzip-walk "$(xattr index_source g9)"
w=$(reads g9)
umount_o
mount_o "gzip=index,index_cache=$C"
check_eq "remount: g9's size" "$(stat -c %s "$W/g9")" "$(t stat -c %s "$M/g9")"
n=$(reads g9)
if ((n <= 10)); then ok "remount: first stat of g9: $n backing reads (walk: $w)"; else
	not_ok "remount: first stat of g9: $n backing reads (walk: $w)"; fi
check_eq "remount: g9 from the cache" cache "$(xattr index_source g9)"
check "remount: g9 random ranges" python3 "$T/ranges.py" "$M/g9" "$W/g9"
check "remount: multi reads exact" cmp "$M/multi" "$W/multi"
check_eq "remount: flip (damaged) was not kept" gzip-walk "$(xattr index_source flip)"
umount_o

# --- blockfs-pack --index --index-cache: the walk before any mount ------------------
P=$T/packed
mkdir -m 700 "$P"
before=$(cd "$S" && stat -c '%n %s %Y' g9.gz multi.gz bg.gz bg.gz.gzi 2>&1; md5sum g9.gz multi.gz bg.gz)
check "pack --index --index-cache: g9, multi, bg" \
	"$PACK" --index --index-cache "$P" "$S/g9.gz" "$S/multi.gz" "$S/bg.gz"
check_eq "pack --index --index-cache: the files are left as they were, no .gzi made" \
	"$before" "$(cd "$S" && stat -c '%n %s %Y' g9.gz multi.gz bg.gz bg.gz.gzi 2>&1; md5sum g9.gz multi.gz bg.gz)"
check_fails "pack --index --index-cache: flip refused as damaged" "damaged, not indexed" \
	"$PACK" --index --index-cache "$P" "$S/flip.gz"
check_fails "pack: plain gzip without --index-cache" "can only go to an index cache" \
	"$PACK" --index "$S/g9.gz"
check_fails "pack: --gzip-span 1K refused" "from 64K to 32M" \
	"$PACK" --index --index-cache "$P" --gzip-span 1K "$S/g9.gz"
check_fails "pack: --index-cache without --index refused" "--index-cache goes with --index" \
	"$PACK" --index-cache "$P" "$S/g9.gz"
check_fails "pack: --gzip-span without --index-cache refused" "--gzip-span goes with --index-cache" \
	"$PACK" --index --gzip-span 1M "$S/g9.gz"
check_fails "pack: a missing cache directory refused" "index_cache directory" \
	"$PACK" --index --index-cache "$T/nonexistent" "$S/g9.gz"
chmod 777 "$P"
check_fails "pack: a cache directory others may write refused" "written by others" \
	"$PACK" --index --index-cache "$P" "$S/g9.gz"
chmod 700 "$P"
mount_o "gzip=index,index_cache=$P"
check_eq "after pack: g9's size" "$(stat -c %s "$W/g9")" "$(t stat -c %s "$M/g9")"
n=$(reads g9)
if ((n <= 10)); then ok "after pack: first stat of g9: $n backing reads"; else
	not_ok "after pack: first stat of g9: $n backing reads"; fi
for f in g9 multi bg; do
	check_eq "after pack: $f from the cache" cache "$(xattr index_source $f)"
	check "after pack: $f reads exact" cmp "$M/$f" "$W/$f"
done
check "after pack: g9 random ranges" python3 "$T/ranges.py" "$M/g9" "$W/g9"
check_eq "after pack: flip walked, not cached" gzip-walk "$(xattr index_source flip)"
umount_o
mount_o "gzip=index,gzip_span=256K,index_cache=$P"
check_eq "after pack: another gzip_span walks again" gzip-walk "$(xattr index_source g9)"
umount_o
check "pack --gzip-span 256K: kept for that span" \
	"$PACK" --index --index-cache "$P" --gzip-span 256K "$S/g9.gz"
mount_o "gzip=index,gzip_span=256K,index_cache=$P"
check_eq "after pack --gzip-span 256K: g9 from the cache" cache "$(xattr index_source g9)"
check "after pack --gzip-span 256K: g9 random ranges" python3 "$T/ranges.py" "$M/g9" "$W/g9"
umount_o

# --- bad values ----------------------------------------------------------------------
check_fails "gzip=bogus refused" "bad value 'bogus' for option gzip" \
	"$BLOCKFS" -f "$S" "$M" -o gzip=bogus
check_fails "gzip_span=1K refused" "bad value '1K' for option gzip_span" \
	"$BLOCKFS" -f "$S" "$M" -o gzip=index,gzip_span=1K
check_fails "gzip_span=64M refused" "bad value '64M' for option gzip_span" \
	"$BLOCKFS" -f "$S" "$M" -o gzip=index,gzip_span=64M

bfs_end
