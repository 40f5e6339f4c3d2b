#!/usr/bin/env bash
# shellcheck disable=SC2016 # bash -c scripts expand their own arguments
# SPDX-License-Identifier: MIT
#
# -o kernel_open: the first open answers ENOSYS and the kernel opens and
# releases files alone from then on, so READs come without a handle and
# the files read last share one each (fs.c). Checked: one OPEN and no
# RELEASE reach the daemon; small lz4 files, a stock lz4 file of several
# blocks, BGZF and a raw file read back exactly, alone, four at a time
# and at random offsets, with more files read than the ring keeps; a file
# rewritten or replaced behind the mount reads its new bytes once the
# kernel has its new size; a file evicted from the ring and rewritten
# while the kernel still holds its old size gets EIO, then its new bytes
# after the next stat; writes still fail with EROFS; kernel_open=1 is
# refused. Every mount unmounts cleanly.
#
# Usage: kernel_open.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: kernel_open.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin kernel_open lz4 bgzip python3

S=$T/src M=$T/mnt W=$T/want
mkdir -p "$M"
# 200 small files (more than the 64 shared handles kept), each lz4 -B4;
# 24 MiB of text: stock lz4 (4 MiB blocks) and BGZF; and a raw file.
bfs_small_and_big "$W" "$S" 200 700000 12
head -c 300000 "$W/big.txt" >"$S/raw.txt"
cp "$S/raw.txt" "$W/raw.txt"

# want NAME: the md5 of what NAME should read as.
want() { md5sum <"$W/$1" | cut -d' ' -f1; }
got() { t md5sum <"$M/$1" | cut -d' ' -f1; }
opcodes() { grep -c "opcode: $1 " "$BFS_LOG"; }

# --- a static tree ---------------------------------------------------------
bfs_mount "$S" "$M" "$T/daemon-1.log" "kernel_open,debug" || { not_ok "mount"; show_log; exit 1; }
ok "mount with kernel_open"
bad=0
for f in "$W"/small/*.txt; do
	cmp -s "$f" "$M/small/${f##*/}" || bad=$((bad + 1))
done
check_eq "200 small lz4 files read exactly, one after another" 0 "$bad"
for n in big.txt big.vcf raw.txt; do
	check_eq "$n: md5sum" "$(want "$n")" "$(got "$n")"
done
check_eq "one OPEN reached the daemon (answered ENOSYS)" 1 "$(opcodes OPEN)"
check_eq "no RELEASE reached it" 0 "$(opcodes RELEASE)"
check "random ranges of big.txt and big.vcf equal the original's" python3 - "$M" "$W" <<'EOF'
import os, random, sys
r = random.Random(3)
size = os.path.getsize(os.path.join(sys.argv[2], "big.txt"))
with open(os.path.join(sys.argv[2], "big.txt"), "rb") as w:
    want = w.read()
for name in ("big.txt", "big.vcf"):
    with open(os.path.join(sys.argv[1], name), "rb") as f:
        for _ in range(300):
            off, n = r.randrange(size), r.randint(1, 300000)
            f.seek(off)
            if f.read(n) != want[off:off + n]:
                sys.exit("%s: %d bytes at %d differ" % (name, n, off))
EOF
# four readers at once, each over files the others read too
sums=$(cd "$M" && find . -type f -print0 | t xargs -0 -P4 -n 7 md5sum | sort -k2)
check_eq "four readers at once: every file's md5" "$(cd "$W" && find . -type f -print0 | xargs -0 md5sum | sort -k2)" "$sums"

is "the daemon is alive" daemon_alive
bfs_umount
check_eq "unmount; daemon exits 0" 0 "$?"

# --- changed behind the mount, the kernel asking each time ------------------
bfs_mount "$S" "$M" "$T/daemon-2.log" "kernel_open,attr_timeout=0,entry_timeout=0" ||
	{ not_ok "mount with attr_timeout=0"; show_log; exit 1; }
cat "$M/small/f000.txt" "$M/big.txt" >/dev/null
# in place (the same backing inode), other sizes
head -c 5000 "$W/big.txt" >"$W/small/f000.txt"
lz4 -q -c "$W/small/f000.txt" >"$S/small/f000.txt.lz4"
tail -c 3000000 "$W/big.txt" >"$T/tail.txt"
lz4 -q -c "$T/tail.txt" >"$S/big.txt.lz4"
check_eq "rewritten in place: stat shows the new size" 5000 "$(t stat -c %s "$M/small/f000.txt")"
check "rewritten in place: cat gives the new bytes" cmp "$M/small/f000.txt" "$W/small/f000.txt"
check "a big file rewritten in place: cat gives the new bytes" cmp "$M/big.txt" "$T/tail.txt"
# replaced by rename (another backing inode)
head -c 7000 "$W/raw.txt" >"$W/small/f001.txt"
lz4 -q -c "$W/small/f001.txt" >"$S/small/new.lz4" && mv "$S/small/new.lz4" "$S/small/f001.txt.lz4"
check "replaced by rename: cat gives the new bytes" cmp "$M/small/f001.txt" "$W/small/f001.txt"
is "the daemon is alive" daemon_alive
bfs_umount
check_eq "unmount; daemon exits 0" 0 "$?"

# --- changed while the kernel holds the old size ------------------------------
bfs_mount "$S" "$M" "$T/daemon-3.log" "kernel_open,attr_timeout=60,entry_timeout=60" ||
	{ not_ok "mount with attr_timeout=60"; show_log; exit 1; }
check "f002 reads as it is" cmp "$M/small/f002.txt" "$W/small/f002.txt"
# osread.py FILE [dontneed]: read FILE whole with os.open and os.read, no
# stat, so the kernel asks for no attributes (then have it drop the
# file's pages); print the byte count.
cat >"$T/osread.py" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
n = 0
while True:
    b = os.read(fd, 1 << 20)
    if not b:
        break
    n += len(b)
if len(sys.argv) > 2:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
print(n)
EOF
old=$(stat -c %s "$W/small/f002.txt")
# The kernel drops f002's pages; 100 other files push its shared handle out of the ring.
check_eq "read without a stat: the whole file" "$old" "$(t python3 "$T/osread.py" "$M/small/f002.txt" dontneed)"
cat "$M"/small/f1*.txt >/dev/null
head -c $((old + 777)) "$W/big.txt" >"$W/small/f002.txt"
lz4 -q -c "$W/small/f002.txt" >"$S/small/f002.txt.lz4"
check_fails "rewritten while the kernel holds its old size: EIO, not the new bytes cut short" \
	"Input/output error" python3 "$T/osread.py" "$M/small/f002.txt"
check_eq "the next stat shows the new size" $((old + 777)) "$(t stat -c %s "$M/small/f002.txt")"
check "then cat gives the new bytes" cmp "$M/small/f002.txt" "$W/small/f002.txt"
check "another file still reads" cmp "$M/small/f003.txt" "$W/small/f003.txt"
# With atomic O_TRUNC (libfuse's default) the kernel would leave truncating
# to the OPEN it no longer sends, and show the file empty.
check_fails "a write still fails: EROFS" "Read-only file system" bash -c 'echo x >>"$1"' _ "$M/raw.txt"
check_fails "an O_TRUNC open fails: EROFS" "Read-only file system" bash -c ': >"$1"' _ "$M/raw.txt"
check_eq "raw.txt still shows its size" 300000 "$(t stat -c %s "$M/raw.txt")"
check_eq "raw.txt is unchanged" "$(want raw.txt)" "$(got raw.txt)"
is "the daemon is alive" daemon_alive
bfs_umount
check_eq "unmount; daemon exits 0" 0 "$?"

check_fails "kernel_open=1 is refused" "unknown option" "$BLOCKFS" -f "$S" "$M" -o kernel_open=1
bfs_end
