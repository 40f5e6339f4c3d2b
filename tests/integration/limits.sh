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
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
[[ $(id -u) == 0 && -c /dev/fuse ]] || { echo "1..0 # SKIP needs root and /dev/fuse"; exit 77; }
for tool in fusermount3 lz4 python3; do
	command -v "$tool" >/dev/null || { echo "1..0 # SKIP no $tool"; exit 77; }
done
NFILES=6000

T=$(mktemp -d /tmp/blockfs-limits.XXXXXX)
S=$T/src M=$T/mnt
mkdir -p "$S" "$M"
trap 'bfs_kill; rm -rf "$T"' EXIT

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

# The daemon inherits this limit, and may not raise a hard one here.
ulimit -n 4000
if ! bfs_mount "$S" "$M" "$T/daemon.log" readpath=pread; then
	not_ok "mount"; show_log; exit 1
fi

ls -lR "$M" > "$T/ls.out" 2>"$T/ls.err"
# Names ls could not stat print as "-?????????": count the stat'ed ones.
listed=$(grep -c '^-r.* f[0-9]*$' "$T/ls.out")
sized=$(grep '^-r.* f[0-9]*$' "$T/ls.out" | awk '$5 == 13' | wc -l)
other=$(grep -v -c 'Too many open files' "$T/ls.err")
diag "ls -lR listed $listed of $NFILES files, $sized with the decompressed size 13; $(wc -l < "$T/ls.err") errors"
check "ls -lR listed files, all with their decompressed size" test "$listed" -gt 0 -a "$sized" -eq "$listed"
check "what it could not list failed with EMFILE, nothing else" test "$other" -eq 0
check "the daemon is alive" kill -0 "$BFS_PID"
bfs_umount
check_eq "unmount; daemon exits 0" 0 "$?"
echo "1..$((T_PASS + T_FAIL))"
((T_FAIL == 0)) || { show_log; exit 1; }
