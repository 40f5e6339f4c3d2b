#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# SOURCE on a real network filesystem: sshfs from a private sshd on
# 127.0.0.1, through a proxy adding 2 ms each way (remote_lib.sh). blockfs
# takes it as remote (its log says so; readpath=mmap asked for is logged
# as a risk); a tree of lz4 -B4, bgzip (no .gzi), gzip and plain files
# reads back exact; the first stat of a 32 MiB stock lz4 -B4 file costs
# at most one backing read per MiB (the read-ahead of walks, io.c); a
# backing file replaced on the server is seen on the next open.
# The server going away while a file is read (tests/README.md, "Remote
# SOURCE", sets out what a reader gets and what comes back):
#   stall    the network frozen 2 s (proxy stopped): the read only waits
#   cut      the network cut (proxy killed) and brought back: sshfs
#            reconnects; the reader gets EIO while it is gone; afterwards
#            every file reads exact, those opened before too (their
#            backing files are opened again by path on EIO)
#   sshfs dies   reads and lookups get ENOTCONN (of names never looked up
#            too); blockfs answers only after both sshfs and blockfs are
#            mounted again
# The daemon stays alive throughout and unmounts with exit status 0.
# About 30 s.
#
# Usage: remote.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: remote.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
# shellcheck source-path=SCRIPTDIR source=remote_lib.sh
. "$HERE/remote_lib.sh"
bfs_begin remote lz4 bgzip gzip getfattr setfattr python3 dd
remote_begin 2

E=$T/server S=$T/sshfs M=$T/mnt W=$T/want
mkdir -p "$E/tree/sub" "$S" "$M" "$W/tree/sub"

# --- the files: the server's side ($E) and what each must read as ($W) ----------
python3 - "$W" <<'PY'
import base64, os, random, sys
w = sys.argv[1]
r = random.Random(20)
words = ["GET", "PUT", "/index.html", "/api/v1/items", "200", "404", "ok", "slow",
         "cache", "miss", "hit", "user", "session", "zigzag"]
def text(n):
    out, size, i = [], 0, 0
    while size < n:
        line = "%08d %s %d\n" % (i, " ".join(r.choices(words, k=r.randint(1, 9))),
                                 r.randint(0, 1 << 30))
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out).encode()[:n]
for name, n in (("tree/t1.txt", 3 << 20), ("tree/t2.vcf", 2 << 20), ("tree/t3.csv", 2 << 20),
                ("tree/sub/t4.txt", 300000), ("tree/t5.txt", 1 << 20), ("fresh.txt", 1 << 20),
                ("late.txt", 500000), ("t1.new", 1500000)):
    open(os.path.join(w, name), "wb").write(text(n))
open(os.path.join(w, "tree/plain1.txt"), "wb").write(text(700000))
open(os.path.join(w, "tree/sub/plain2.bin"), "wb").write(r.randbytes(1 << 20))
open(os.path.join(w, "tree/plain3.txt"), "wb").write(b"")
# base64 of random bytes: lz4 keeps it about the same size, so these stock
# lz4 -B4 files hold about 32 and 16 MiB of 64 KiB blocks
for name, n in (("big.txt", 32 << 20), ("stall.txt", 16 << 20), ("cut.txt", 16 << 20),
                ("gone.txt", 16 << 20), ("swap.txt", 24 << 20), ("swap.new", 8 << 20)):
    with open(os.path.join(w, name), "wb") as f:
        f.write(base64.encodebytes(r.randbytes(n * 3 // 4)))
PY
for f in tree/t1.txt tree/sub/t4.txt tree/t5.txt fresh.txt big.txt stall.txt cut.txt gone.txt \
	swap.txt; do
	lz4 -q -B4 "$W/$f" "$E/$f.lz4"
done
lz4 -q -B4 "$W/swap.new" "$T/swap.new.lz4"
lz4 -q -B4 "$W/t1.new" "$T/t1.new.lz4"
bgzip -c "$W/tree/t2.vcf" >"$E/tree/t2.vcf.gz"
gzip -6 -c "$W/tree/t3.csv" >"$E/tree/t3.csv.gz"
cp "$W/tree/plain1.txt" "$W/tree/plain3.txt" "$E/tree/"
cp "$W/tree/sub/plain2.bin" "$E/tree/sub/"
TREE=(tree/t1.txt tree/t2.vcf tree/t3.csv tree/sub/t4.txt tree/t5.txt tree/plain1.txt
	tree/sub/plain2.bin tree/plain3.txt)

# reader.py FILE WANT PROGRESS GO_ON [SECONDS_PER_MIB]: reads FILE in 512 KiB
# preads, 1 MiB per SECONDS_PER_MIB (0.4), comparing with WANT, writing how far
# it got to PROGRESS. Prints "exact N SECONDS LONGEST" (LONGEST: the longest
# pread, seconds) or, at the first error,
# "error OFFSET ERRNO"; then waits for GO_ON to exist and prints "retry R"
# (the same pread on the same descriptor) and "reopen R" (a new open read
# whole), R: "exact", an errno name, or "differs".
cat >"$T/reader.py" <<'PY'
import errno, os, sys, time
path, want, progress, go_on = sys.argv[1:5]
pace = float(sys.argv[5]) if len(sys.argv) > 5 else 0.4
ref = open(want, "rb").read()
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))
def whole():
    try:
        with open(path, "rb") as f:
            return "exact" if f.read() == ref else "differs"
    except OSError as e:
        return name(e)
t0 = time.monotonic()
fd = os.open(path, os.O_RDONLY)
off = 0
longest = 0.0
while True:
    try:
        t = time.monotonic()
        b = os.pread(fd, 1 << 19, off)
        longest = max(longest, time.monotonic() - t)
    except OSError as e:
        print("error %d %s" % (off, name(e)), flush=True)
        break
    if b != ref[off:off + len(b)]:
        print("wrong bytes at %d" % off, flush=True)
        sys.exit(1)
    if not b:
        print("exact %d %.1f %.2f" % (off, time.monotonic() - t0, longest), flush=True)
        sys.exit(0 if off == len(ref) else 1)
    off += len(b)
    with open(progress + ".tmp", "w") as p:
        p.write("%d\n" % off)
    os.rename(progress + ".tmp", progress)
    time.sleep(pace / 2)
deadline = time.monotonic() + 60
while not os.path.exists(go_on) and time.monotonic() < deadline:
    time.sleep(0.1)
try:
    b = os.pread(fd, 1 << 19, off)
    print("retry " + ("exact" if b == ref[off:off + len(b)] and b else "differs"), flush=True)
except OSError as e:
    print("retry " + name(e), flush=True)
os.close(fd)
print("reopen " + whole(), flush=True)
PY

# start_reader NAME FILE WANT [PACE]: reader.py in the background (READER_PID);
# its output in $T/NAME.out
READER_PID=
start_reader() {
	rm -f "$T/$1.progress" "$T/$1.go"
	python3 "$T/reader.py" "$2" "$3" "$T/$1.progress" "$T/$1.go" "${4:-0.4}" >"$T/$1.out" 2>&1 &
	READER_PID=$!
}

# wait_progress NAME BYTES: until the reader has read BYTES (30 s at most)
wait_progress() {
	local deadline=$((SECONDS + 30)) got
	while :; do
		got=$(cat "$T/$1.progress" 2>/dev/null)
		((${got:-0} >= $2)) && return 0
		((SECONDS < deadline)) || return 1
		sleep 0.05
	done
}

# errno_of OP PATH: the errno name OP (stat, open: read whole, list) meets
# on PATH, or "ok"
errno_of() {
	t python3 - "$1" "$2" <<'PY'
import errno, os, sys
op, path = sys.argv[1:3]
try:
    if op == "stat":
        os.stat(path)
    elif op == "list":
        os.listdir(path)
    else:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}

# uncache PATH...: drop what blockfs (on the mount) and the kernel (on the
# mount and on sshfs) hold of each file, so that a read of it goes to the server
uncache() {
	local f
	for f in "$@"; do
		t setfattr -n user.blockfs.advice -v dontneed "$M/$f" 2>/dev/null
		t dd if="$M/$f" iflag=nocache count=0 status=none 2>/dev/null
	done
}
uncache_sshfs() {
	local f
	for f in "$@"; do
		t dd if="$S/$f" iflag=nocache count=0 status=none
	done
}

stats_of() {
	t getfattr --only-values -n user.blockfs.stats "$M/$1" 2>/dev/null |
		awk -v k="$2" '$1 == k { print $2 }'
}

# sshfs: its directory cache kept 1 s (default 20), so that what changes on
# the server shows within about 2 s
remote_mount "$E" "$S" dcache_timeout=1 || { not_ok "sshfs mount"; exit 1; }
check_eq "sshfs shows the server's directory" "$(find "$E/tree" -printf '%P\n' | sort)" \
	"$(t find "$S/tree" -printf '%P\n' | sort)"

# --- readpath=mmap on a remote SOURCE: honoured, with a warning ----------------
if bfs_mount "$S" "$M" "$T/daemon-mmap.log" readpath=mmap,index_cache=off; then
	check "readpath=mmap: the log names the risk" \
		grep -q "readpath=mmap on a remote SOURCE" "$T/daemon-mmap.log"
	check "readpath=mmap: t1.txt exact" cmp "$M/tree/t1.txt" "$W/tree/t1.txt"
	bfs_umount
	check_eq "readpath=mmap: unmount; daemon exits 0" 0 "$?"
else
	not_ok "mount -o readpath=mmap" "daemon exit status: ${BFS_EXIT:-none}"
fi

# --- the tree, the first stat's reads ---------------------------------------------
if ! bfs_mount "$S" "$M" "$T/daemon.log" index_cache=off; then
	not_ok "mount" "daemon exit status: ${BFS_EXIT:-none}"
	exit 1
fi
check "the log says SOURCE is taken as remote" grep -q "taken as remote" "$T/daemon.log"

csize=$(stat -c %s "$E/big.txt.lz4")
t0=$(date +%s%N)
got=$(t stat -c %s "$M/big.txt")
t1=$(date +%s%N)
check_eq "big.txt: exact size from the first stat" "$(stat -c %s "$W/big.txt")" "$got"
n=$(stats_of big.txt backing_syscalls)
max=$((csize / 1048576 + 6))
blocks=$(((csize + 65535) / 65536))
diag "big.txt.lz4: $csize bytes (about $blocks blocks): first stat $(((t1 - t0) / 1000000)) ms, $n backing reads"
if [[ -n $n ]] && ((n >= 1 && n <= max)); then
	ok "big.txt: the first stat made $n backing reads (at most $max: 1 MiB requests)"
else
	not_ok "big.txt: the first stat's backing reads" "got: ${n:-none}, at most $max" \
		"(one a block would be about $blocks)"
fi

for f in "${TREE[@]}" big.txt; do
	check "$f reads back exact" cmp "$M/$f" "$W/$f"
done
check_eq "ls -R lists the tree as decoded names" \
	"$(cd "$W/tree" && find . | sort)" "$(cd "$M/tree" && t find . | sort)"

# --- a backing file replaced on the server: seen on the next open -------------
sleep 1.1	# sshfs's times are whole seconds: the new file's is another one
cp "$T/t1.new.lz4" "$E/tree/.t1.tmp"
mv -f "$E/tree/.t1.tmp" "$E/tree/t1.txt.lz4"
sleep 2.2	# sshfs's directory cache (1 s) and its kernel attributes (1 s)
check "replaced on the server: the next open reads the new file" cmp "$M/tree/t1.txt" "$W/t1.new"
check_eq "replaced on the server: its new size" "$(stat -c %s "$W/t1.new")" \
	"$(t stat -c %s "$M/tree/t1.txt")"
cp "$W/t1.new" "$W/tree/t1.txt"

# --- the network frozen 2 s mid-read: the reader waits, then gets every byte ----
t stat "$M/stall.txt" >/dev/null	# its walk, then nothing of it cached
uncache stall.txt
uncache_sshfs stall.txt.lz4
start_reader stall "$M/stall.txt" "$W/stall.txt" 0.1
if wait_progress stall $((2 << 20)); then
	kill -STOP "$RMT_PROXY_PID"
	sleep 2
	kill -CONT "$RMT_PROXY_PID"
else
	not_ok "stall: the reader started" "$(cat "$T/stall.out")"
fi
bfs_end_readers "$READER_PID"
out=$(cat "$T/stall.out")
diag "stall: reader: $out"
check "stall: a 2 s freeze mid-read: every byte, no error" grep -q '^exact' "$T/stall.out"
# what blockfs read ahead lasts the reader 1.4 s at most: a pread waited
# shellcheck disable=SC2016 # awk's own fields
check "stall: a pread waited through the freeze (longest over 0.5 s)" \
	awk '$1 == "exact" && $4 > 0.5 { y = 1 } END { exit !y }' "$T/stall.out"
check "stall: the daemon is alive" kill -0 "$BFS_PID"

# --- the network cut mid-read, then brought back --------------------------------
t stat "$M/cut.txt" >/dev/null
uncache cut.txt
uncache_sshfs cut.txt.lz4
start_reader cut "$M/cut.txt" "$W/cut.txt"
CUT_PID=$READER_PID
# swap.txt: read when the network goes, replaced on the server meanwhile
t stat "$M/swap.txt" >/dev/null
uncache swap.txt
uncache_sshfs swap.txt.lz4
start_reader swap "$M/swap.txt" "$W/swap.txt"
SWAP_PID=$READER_PID
wait_progress cut $((2 << 20)) || not_ok "cut: the reader started" "$(cat "$T/cut.out")"
wait_progress swap $((2 << 20)) || not_ok "cut: swap's reader started" "$(cat "$T/swap.out")"
remote_proxy_kill
cp "$T/swap.new.lz4" "$E/.swap.tmp"
mv -f "$E/.swap.tmp" "$E/swap.txt.lz4"
deadline=$((SECONDS + 20))
until grep -q . "$T/cut.out" || ((SECONDS >= deadline)); do sleep 0.1; done
out=$(head -n 1 "$T/cut.out")
diag "cut: the reader got: $out"
check_eq "cut: the reader's pread fails with EIO (sshfs's answer, passed through)" EIO \
	"$(awk 'NR == 1 && $1 == "error" { print $3 }' "$T/cut.out")"
check "cut: the daemon is alive with the server gone" kill -0 "$BFS_PID"
got=$(errno_of read "$M/fresh.txt")
diag "cut: a file not opened before, with the server gone: $got"
check_eq "cut: reading another file while the server is gone: EIO" EIO "$got"
remote_proxy_start || not_ok "cut: the proxy back on port $RMT_PROXY_PORT"
remote_wait_for "sshfs reconnected" 15 test -s "$S/tree/plain1.txt"
check "cut: sshfs answers again (it reconnected)" cmp "$S/tree/plain1.txt" "$W/tree/plain1.txt"
touch "$T/cut.go"
bfs_end_readers "$CUT_PID"
diag "cut: after the reconnect, the reader: $(tail -n +2 "$T/cut.out" | tr '\n' ' ')"
check "cut: the daemon is alive" kill -0 "$BFS_PID"
check "cut: a file not opened before reads exact" cmp "$M/fresh.txt" "$W/fresh.txt"
lz4 -q -B4 "$W/late.txt" "$E/late.txt.lz4"
remote_wait_for "late.txt.lz4 on sshfs" 10 test -e "$S/late.txt.lz4"
# blockfs answers from its memo of the directory until the directory's
# times change, and sshfs shows them up to 1 s late (kernel attributes),
# plus its directory cache's (1 s here, 20 s by default)
diag "cut: late.txt, at once: $(errno_of read "$M/late.txt")"
sleep 2.2
check "cut: a file made on the server afterwards reads exact (2 s later)" \
	cmp "$M/late.txt" "$W/late.txt"
check "cut: a listing answers" ls "$M/tree"
# What blockfs still holds from before the cut are sshfs handles of the
# old connection, which sshfs answers with EIO for good: a backing read
# that fails so opens the file again by path, once, and reads on if it is
# still the same file (device, inode, size, times).
check_eq "cut: the reader's descriptor reads on (its backing file opened again)" "retry exact" \
	"$(grep '^retry' "$T/cut.out")"
check_eq "cut: a new open of the file cut mid-read reads exact" "reopen exact" \
	"$(grep '^reopen' "$T/cut.out")"
uncache tree/plain1.txt tree/t5.txt
uncache_sshfs tree/plain1.txt tree/t5.txt.lz4
check_eq "cut: a codec file opened before the cut, its caches dropped: exact" ok \
	"$(errno_of read "$M/tree/t5.txt")"
check "cut: a raw file opened before the cut, its caches dropped: exact" \
	cmp "$M/tree/plain1.txt" "$W/tree/plain1.txt"
check "cut: the log says a backing file was opened again" \
	grep -q "cut.txt.lz4: a backing read failed (Input/output error): opened again by name" \
	"$T/daemon.log"
# the failed block's line says what the read met, not "shrank"
diag "cut: the log on cut.txt: $(grep -m 3 'cut.txt.lz4: block' "$T/daemon.log" | tr '\n' ' ')"
check "cut: the log names the read's error (EIO), not a file that shrank" \
	grep -q "cut.txt.lz4: block [0-9]* at byte [0-9]*: Input/output error" "$T/daemon.log"
check_eq "cut: the log says cut.txt did not shrink" 0 "$(grep -c 'cut.txt.lz4.*shrank' "$T/daemon.log")"
# swap.txt.lz4 is another file now: what was open of it stays EIO, a new open reads the new one
sleep 2.2	# sshfs's directory cache and its kernel attributes
touch "$T/swap.go"
bfs_end_readers "$SWAP_PID"
diag "cut: swap.txt, replaced on the server while the network was gone: $(tr '\n' ' ' <"$T/swap.out")"
check_eq "cut: a file replaced meanwhile: the reader's descriptor: EIO" "retry EIO" \
	"$(grep '^retry' "$T/swap.out")"
check "cut: a file replaced meanwhile: a new open reads the new file" cmp "$M/swap.txt" "$W/swap.new"
diag "cut: the log on swap.txt: $(grep 'swap.txt' "$T/daemon.log" | tr '\n' ' ')"
sleep 1.1
touch "$E/cut.txt.lz4"
sleep 2.2
check "cut: the codec file changed on the server (touch): a new open reads exact" \
	cmp "$M/cut.txt" "$W/cut.txt"
bfs_umount
check_eq "cut: unmount; daemon exits 0" 0 "$?"
if bfs_mount "$S" "$M" "$T/daemon2.log" index_cache=off; then
	for f in tree/t5.txt tree/plain1.txt; do
		check "cut: mounted again: $f exact" cmp "$M/$f" "$W/$f"
	done
else
	not_ok "mount again" "daemon exit status: ${BFS_EXIT:-none}"
	exit 1
fi

# --- sshfs dies mid-read ------------------------------------------------------------
t stat "$M/gone.txt" >/dev/null
uncache gone.txt
uncache_sshfs gone.txt.lz4
start_reader gone "$M/gone.txt" "$W/gone.txt"
wait_progress gone $((2 << 20)) || not_ok "sshfs dies: the reader started" "$(cat "$T/gone.out")"
{
	kill -KILL "$RMT_SSHFS_PID"
	wait "$RMT_SSHFS_PID"
} 2>/dev/null
RMT_SSHFS_PID=
touch "$T/gone.go"
bfs_end_readers "$READER_PID"
diag "sshfs dies: the reader: $(tr '\n' ' ' <"$T/gone.out")"
check_eq "sshfs dies: the reader's pread fails with ENOTCONN (passed through)" ENOTCONN \
	"$(awk 'NR == 1 && $1 == "error" { print $3 }' "$T/gone.out")"
check "sshfs dies: the daemon is alive" kill -0 "$BFS_PID"
check_eq "sshfs dies: listing the mount: ENOTCONN" ENOTCONN "$(errno_of list "$M/tree")"
diag "sshfs dies: stat of a file looked up before: $(errno_of stat "$M/tree/t5.txt")"
# the name rules ask "is there a file X.lz4?": a stat that fails for
# another reason than "no such name" fails the lookup with it
check_eq "sshfs dies: a name not looked up on this mount: ENOTCONN (not ENOENT)" ENOTCONN \
	"$(errno_of stat "$M/late.txt")"
check_eq "sshfs dies: a name that is nowhere: ENOTCONN (not ENOENT)" ENOTCONN \
	"$(errno_of stat "$M/nowhere.txt")"
fusermount3 -uz "$S"
remote_mount "$E" "$S" dcache_timeout=1 || not_ok "sshfs mounted again"
check "sshfs dies: sshfs mounted again answers" cmp "$S/tree/plain1.txt" "$W/tree/plain1.txt"
check_eq "sshfs dies: blockfs still on the dead sshfs mount: ENOTCONN" ENOTCONN \
	"$(errno_of list "$M/tree")"
bfs_umount
check_eq "sshfs dies: unmount; daemon exits 0" 0 "$?"
if bfs_mount "$S" "$M" "$T/daemon3.log" index_cache=off; then
	for f in "${TREE[@]}" gone.txt; do
		check "sshfs dies: both mounted again: $f exact" cmp "$M/$f" "$W/$f"
	done
	bfs_umount
	check_eq "unmount; daemon exits 0" 0 "$?"
else
	not_ok "mount on the new sshfs" "daemon exit status: ${BFS_EXIT:-none}"
fi
bfs_end
