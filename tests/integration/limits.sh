#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Descriptors: a daemon started with 4000 of them (hard limit, which it
# may not raise) serves a tree of 6000 compressed files of 20 KiB (above
# the 16 KiB up to which a file read whole is kept and needs no
# descriptor at all). Each inode's O_PATH descriptor is a bounded cache
# entry (a quarter of the limit) and a file version holds a descriptor
# only while it is open or read, so:
#   - ls -lR lists every file with its decompressed size, and reading
#     every file gives the right bytes;
#   - the daemon's descriptors stay under the bound while it does;
#   - more files held open at once than the daemon can hold, the kernel's
#     pages of each dropped before its read: the excess fails with EMFILE
#     and nothing else (at the open, or at the first read of an open of an
#     unchanged file, which takes no descriptor until then), the daemon
#     lives, and once they are closed everything reads again;
#   - files of at most 16 KiB are kept whole when first read and need
#     no descriptor: 5000 of them held open at once all open and read;
#   - it unmounts and exits 0 (it once aborted there: glibc could not
#     load libgcc_s for pthread_cancel without a descriptor).
#
# Usage: limits.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: limits.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin limits lz4 python3
NFILES=6000

S=$T/src M=$T/mnt
mkdir -p "$S" "$M"

# a line, then random bytes: lz4 cannot make it smaller than 16 KiB
{ printf 'a small file\n'; head -c $((20 << 10)) /dev/urandom; } > "$T/one"
SIZE=$(stat -c %s "$T/one")
lz4 -q "$T/one" "$T/one.lz4"
python3 - "$T/one.lz4" "$S" "$NFILES" <<'PY'
import os, shutil, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for d in range(n // 1000):
    os.mkdir(os.path.join(dst, "d%02d" % d))
    for i in range(1000):
        shutil.copyfile(src, os.path.join(dst, "d%02d" % d, "f%04d.lz4" % i))
PY

# The daemon's hard limit: prlimit execs it, so $BFS_PID is the daemon.
LIMIT=4000
BUDGET=$((LIMIT / 4))
BFS_WRAP="prlimit --nofile=$LIMIT:$LIMIT --"
if ! bfs_mount "$S" "$M" "$T/daemon.log" readpath=pread; then
	not_ok "mount"; exit 1
fi
nfds() { find "/proc/$BFS_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
# settled_nfds MAX: the count once it is at most MAX, or after 10 s; the
# kernel sends RELEASE after close(2) returns, so a count can lag.
settled_nfds() {
	local n deadline=$((SECONDS + 10))
	while n=$(nfds) && ((n > $1 && SECONDS < deadline)); do
		sleep 0.1
	done
	echo "$n"
}

ls -lR "$M" > "$T/ls.out" 2>"$T/ls.err"
# Names ls could not stat print as "-?????????": count the stat'ed ones.
listed=$(grep -c '^-r.* f[0-9]*$' "$T/ls.out")
sized=$(grep '^-r.* f[0-9]*$' "$T/ls.out" | awk -v n="$SIZE" '$5 == n' | wc -l)
diag "ls -lR listed $listed of $NFILES files, $sized with the decompressed size $SIZE; $(wc -l < "$T/ls.err") errors"
check_eq "ls -lR lists every file with its decompressed size" "$NFILES $NFILES 0" \
	"$listed $sized $(wc -l < "$T/ls.err")"
n=$(settled_nfds $((BUDGET + 32)))
diag "daemon descriptors after ls -lR: $n (bound $BUDGET + a few)"
check "its descriptors stay within the bound" test "$n" -le $((BUDGET + 32))

want=$(for ((i = 0; i < NFILES; i++)); do cat "$T/one"; done | md5sum)
got=$(cd "$M" && find . -type f -print0 | sort -z | t xargs -0 cat | md5sum)
check_eq "cat of every file gives every byte" "$want" "$got"
n=$(settled_nfds $((BUDGET + 32)))
diag "daemon descriptors after reading every file: $n"
check "its descriptors stay within the bound after reading" test "$n" -le $((BUDGET + 32))

# Hold more files open than the daemon has descriptors; count the outcomes.
cat > "$T/hold.py" <<'PY'
import errno, os, resource, sys
mnt, n = sys.argv[1], int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 64, n + 64))
paths = sorted(os.path.join(r, f) for r, _, fs in os.walk(mnt) for f in fs)[:n]
fds, emfile, other = [], 0, 0
for p in paths:
    try:
        fds.append(os.open(p, os.O_RDONLY))
    except OSError as e:
        if e.errno == errno.EMFILE:
            emfile += 1
        else:
            other += 1
            print("unexpected:", p, e, file=sys.stderr)
good = 0
for fd in fds:
    try:
        # the kernel's pages of it dropped (this file's only: other tests run
        # beside), so that the read reaches blockfs and needs a descriptor
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        good += os.pread(fd, 13, 0) == b"a small file\n"
    except OSError as e:
        # an open of an unchanged file asks for no descriptor until a read reaches blockfs
        if e.errno == errno.EMFILE:
            emfile += 1
        else:
            other += 1
            print("unexpected read:", e, file=sys.stderr)
print(len(fds), good, emfile, other)
PY
read -r opened good emfile other < <(t python3 "$T/hold.py" "$M" 3000)
diag "3000 held open: $opened opened ($good read right), $emfile EMFILE, $other other errors"
check_eq "3000 files held open at once all open and read" "3000 3000 0" "$opened $good $other"
read -r opened good emfile other < <(t python3 "$T/hold.py" "$M" 5000)
diag "5000 held open: $opened opened ($good read right), $emfile EMFILE, $other other errors"
check "5000 held open: the excess fails with EMFILE only, at the open or its first read" \
	test "$other" -eq 0 -a "$((good + emfile))" -eq 5000 -a "$emfile" -gt 0
check "the daemon is alive" kill -0 "$BFS_PID"
# Wait for the RELEASEs of the holder's 3994 files: until the daemon has
# handled them it still holds their descriptors, and an opendir meanwhile
# gets EMFILE (seen in CI under ASan).
n=$(settled_nfds $((BUDGET + 32)))
diag "daemon descriptors once the holder's files are released: $n"
got=$(cd "$M" && find . -type f -print0 | sort -z | t xargs -0 cat | md5sum)
check_eq "once closed, every file reads again" "$want" "$got"
n=$(settled_nfds $((BUDGET + 32)))
diag "daemon descriptors after: $n"
check "its descriptors are back within the bound" test "$n" -le $((BUDGET + 32))

# Files small enough to be kept whole need no descriptor while open.
printf 'a small file\n' > "$T/tiny"
lz4 -q "$T/tiny" "$T/tiny.lz4"
mkdir "$S/small"
for ((i = 0; i < 5000; i++)); do
	cp "$T/tiny.lz4" "$S/small/f$i.lz4" || break
done
read -r opened good emfile other < <(t python3 "$T/hold.py" "$M/small" 5000)
diag "5000 small files held open: $opened opened ($good read right), $emfile EMFILE, $other other errors"
check_eq "5000 small files held open at once all open and read" "5000 5000 0" \
	"$opened $good $((emfile + other))"
n=$(settled_nfds $((BUDGET + 32)))
diag "daemon descriptors after: $n"
check "and the descriptors are within the bound" test "$n" -le $((BUDGET + 32))
bfs_umount
check_eq "unmount; daemon exits 0" 0 "$?"
bfs_end
