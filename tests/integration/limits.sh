#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Descriptors: every inode blockfs knows holds one, and every file version
# another, and the daemon may not raise a hard limit it was started with
# (no CAP_SYS_RESOURCE in some containers). Started with 4000 descriptors,
# `ls -lR` of a tree of 6000 compressed files runs blockfs out of them.
# What must hold: the files it can list show their decompressed sizes,
# the rest fail with EMFILE ("Too many open files"), never a wrong size;
# the daemon lives; and it unmounts and exits 0 (it once aborted there:
# glibc could not load libgcc_s for pthread_cancel without a descriptor).
# Bounding the descriptors themselves is still to do.
#
# Usage: limits.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: limits.sh BLOCKFS}")
[[ $(id -u) == 0 && -c /dev/fuse ]] || { echo "1..0 # SKIP needs root and /dev/fuse"; exit 77; }
for t in fusermount3 lz4 mountpoint python3; do
	command -v "$t" >/dev/null || { echo "1..0 # SKIP no $t"; exit 77; }
done
NFILES=6000

T=$(mktemp -d /tmp/blockfs-limits.XXXXXX)
S=$T/src M=$T/mnt
mkdir -p "$S" "$M"
pid=
cleanup() {
	mountpoint -q "$M" && fusermount3 -uz "$M"
	[[ -n "$pid" ]] && kill "$pid" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

n=0 failed=0
check() { local name=$1; shift; n=$((n + 1)); if "$@"; then echo "ok $n - $name"; else echo "not ok $n - $name"; failed=$((failed + 1)); fi; }

printf 'a small file\n' > "$T/one"
lz4 -q "$T/one" "$T/one.lz4"
python3 - "$T/one.lz4" "$S" "$NFILES" <<'PY'
import os, shutil, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for d in range(n // 1000):
    os.mkdir(os.path.join(dst, "d%02d" % d))
    for i in range(1000):
        shutil.copyfile(src, os.path.join(dst, "d%02d" % d, "f%04d.lz4" % i))
PY

( ulimit -n 4000 && exec "$BLOCKFS" -f "$S" "$M" ) 2>"$T/daemon.log" &
pid=$!
for _ in $(seq 300); do mountpoint -q "$M" && break; sleep 0.1; done
mountpoint -q "$M" || { echo "not ok 1 - mount"; cat "$T/daemon.log"; exit 1; }

ls -lR "$M" > "$T/ls.out" 2>"$T/ls.err"
# Names ls could not stat print as "-?????????": count the stat'ed ones.
listed=$(grep -c '^-r.* f[0-9]*$' "$T/ls.out")
sized=$(grep '^-r.* f[0-9]*$' "$T/ls.out" | awk '$5 == 13' | wc -l)
other=$(grep -v -c 'Too many open files' "$T/ls.err")
echo "# ls -lR listed $listed of $NFILES files, $sized with the decompressed size 13; $(wc -l < "$T/ls.err") errors"
check "ls -lR listed files, all with their decompressed size" test "$listed" -gt 0 -a "$sized" -eq "$listed"
check "what it could not list failed with EMFILE, nothing else" test "$other" -eq 0
check "the daemon is alive" kill -0 "$pid"
fusermount3 -u "$M" && wait "$pid"
check "unmount; daemon exits 0" test $? -eq 0
pid=
echo "1..$n"
((failed == 0)) || { tail -5 "$T/daemon.log" | sed 's/^/# daemon: /'; exit 1; }
