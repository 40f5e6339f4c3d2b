#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A listing does no I/O on files: names come from suffixes alone. 10,000
# files in 10 directories of 1000 (copies of one small lz4 file, with
# some .gz, .zst, plain and sidecar files among them) on real mounts,
# under strace attached to the daemon (openat, openat2, read, pread64,
# preadv2, readv, with -y for the paths of descriptors):
# - -o readdirplus=off: find, ls -f and ls -R list every name, shown
#   decoded, and the daemon opens and reads no regular file of SOURCE
#   (lookup_opens stays 0);
# - the default readdirplus=auto: find likewise, the first reply of each
#   listing giving names alone;
# - then a cat of one file: strace does see its open and read (the count
#   above can fail), and the bytes are the decoded ones.
# - ls -lR on a fresh mount (auto): every file with its decoded size, and
#   after the first directory the first replies carry attributes
#   (names_only_replies at most 2, the root and d00): the READDIRPLUS
#   the kernel sends for a later chunk once ls has stat'ed entries counts
#   the reply before as used (attrs_used), so the mount does not turn to
#   names alone, which would make the kernel look up every file; a find
#   after it turns back to names alone within a few directories.
# Skips without strace.
#
# Usage: listing.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: listing.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin listing lz4 gzip python3 mountpoint strace

S=$T/src M=$T/mnt
mkdir -p "$S" "$M"
NDIRS=10 PER=1000
printf 'one small file, the same in every copy\n' >"$T/one"
lz4 -q -B4 "$T/one" "$T/one.lz4"
gzip -c "$T/one" >"$T/one.gz"
# 10,000 files: f*.txt.lz4 mostly; in each directory a .gz, its .gzi
# sidecar (hidden), a .zst holding LZ4 (misnamed: still named from the
# suffix), and a plain file.
python3 - "$S" "$T/one.lz4" "$T/one.gz" "$NDIRS" "$PER" <<'PY'
import os, sys
src, lz4, gz, ndirs, per = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
lz4, gz = open(lz4, "rb").read(), open(gz, "rb").read()
for d in range(ndirs):
    dd = os.path.join(src, "d%02d" % d)
    os.mkdir(dd)
    for i in range(per - 4):
        with open(os.path.join(dd, "f%05d.txt.lz4" % i), "wb") as f:
            f.write(lz4)
    for name, data in (("g.txt.gz", gz), ("g.txt.gz.gzi", b"\0" * 8), ("z.zst", lz4),
                       ("plain.txt", b"plain\n")):
        with open(os.path.join(dd, name), "wb") as f:
            f.write(data)
PY
check_eq "the tree holds $((NDIRS * PER)) files" $((NDIRS * PER)) "$(find "$S" -type f | wc -l)"
sleep 0.1	# not racy: snapshots are kept (dir.c, RACY_NS)

mount_or_die() {
	if ! bfs_mount "$S" "$M" "$T/daemon.log" "index_cache=off${1:+,$1}"; then
		not_ok "mount ($1)" "daemon exit status: ${BFS_EXIT:-none}"
		show_log
		exit 1
	fi
}

umount_ok() {
	local rc=0
	bfs_umount || rc=$?
	check_eq "unmount ($1), exit 0" 0 "$rc"
}

stat_of() { t getfattr --only-values -n user.blockfs.stats "$M" | awk -v k="$1" '$1 == k { print $2 }'; }
opens() { stat_of lookup_opens; }

# strace_start: attach strace to every thread of the daemon, output in $T/strace.
STRACE_PID=
strace_start() {
	local deadline=$((SECONDS + 10))
	rm -f "$T/strace"
	strace -f -y -qq -e trace=openat,openat2,read,pread64,preadv2,readv \
		-o "$T/strace" -p "$BFS_PID" 2>"$T/strace.err" &
	STRACE_PID=$!
	bfs_at_exit kill "$STRACE_PID"
	# attached once the daemon's threads have a tracer
	until grep -q '^TracerPid:[[:space:]]*[1-9]' "/proc/$BFS_PID/status" 2>/dev/null; do
		if ! kill -0 "$STRACE_PID" 2>/dev/null || ((SECONDS >= deadline)); then
			diag "strace did not attach: $(cat "$T/strace.err")"
			return 1
		fi
		sleep 0.05
	done
	sleep 0.3	# every thread, not only the first
}

strace_stop() {
	kill -INT "$STRACE_PID" 2>/dev/null
	wait "$STRACE_PID" 2>/dev/null
	STRACE_PID=
}

# file_io: the daemon's opens and reads of regular files of SOURCE that
# strace saw, one line each (the descriptor's path, as strace -y gives it).
file_io() {
	python3 - "$T/strace" "$S" <<'PY'
import os, re, sys
log, src = sys.argv[1], os.path.realpath(sys.argv[2])
for line in open(log, errors="replace"):
    # openat(...) = 7</path>   read(7</path>, ...)   pread64(7</path>, ...)
    m = (re.search(r"= \d+<([^>]*)>\s*$", line) if "openat" in line
         else re.search(r"(?:read|pread64|preadv2|readv)\(\d+<([^>]*)>", line))
    if m and m.group(1).startswith(src + "/") and os.path.isfile(m.group(1)):
        print(line.rstrip())
PY
}

want_names() {
	python3 - "$NDIRS" "$PER" <<'PY'
import sys
ndirs, per = int(sys.argv[1]), int(sys.argv[2])
for d in range(ndirs):
    for i in range(per - 4):
        print("./d%02d/f%05d.txt" % (d, i))
    for n in ("g.txt", "z", "plain.txt"):
        print("./d%02d/%s" % (d, n))
PY
}
want_names | sort >"$T/want"

for rp in off auto; do
	opts=readpath=pread
	[[ $rp == off ]] && opts+=,readdirplus=off
	mount_or_die "$opts"
	if ! strace_start; then
		not_ok "readdirplus=$rp: strace attached to the daemon"
		umount_ok "readdirplus=$rp"
		continue
	fi
	(cd "$M" && t find . -type f) | sort >"$T/got"
	check "readdirplus=$rp: find lists every file under its decoded name, sidecars hidden" \
		cmp "$T/want" "$T/got"
	if [[ $rp == off ]]; then
		check_eq "readdirplus=off: ls -f lists d03's names" "$((PER - 1 + 2))" \
			"$(t ls -f "$M/d03" | wc -l)"
		check_eq "readdirplus=off: ls -R lists them all" "$((NDIRS * (PER - 1)))" \
			"$(t ls -R "$M" | grep -c -E '^(f[0-9]+\.txt|g\.txt|z|plain\.txt)$')"
	fi
	strace_stop
	check "readdirplus=$rp: strace saw the daemon at work (getdents' openat of directories)" \
		grep -q 'openat(' "$T/strace"
	io=$(file_io)
	check_eq "readdirplus=$rp: the listings opened and read no regular file" "" "$io"
	check_eq "readdirplus=$rp: lookup_opens 0" 0 "$(opens)"
	if [[ $rp == auto ]]; then
		# The check above can fail: a read of one file is seen.
		strace_start || not_ok "strace attached again"
		check_eq "cat of d05/f00007.txt: decoded" "$(cat "$T/one")" "$(t cat "$M/d05/f00007.txt")"
		strace_stop
		check "... and strace saw its open and read" \
			bash -c "[[ \$(grep -c 'f00007.txt.lz4' <<<\"\$1\") -ge 2 ]]" _ "$(file_io)"
	fi
	check "readdirplus=$rp: the daemon is alive" kill -0 "$BFS_PID"
	umount_ok "readdirplus=$rp"
done

# ls -lR with readdirplus=auto: attributes in first replies after d00
mount_or_die readpath=pread
check_eq "ls -lR: every f*.txt with its decoded size, $(wc -c <"$T/one") bytes" \
	"$((NDIRS * (PER - 4)))" \
	"$(cd "$M" && t ls -lR . | awk -v n="$(wc -c <"$T/one")" '$NF ~ /^f[0-9]+\.txt$/ && $5 == n' | wc -l)"
nor=$(stat_of names_only_replies)
check "ls -lR: names alone in 2 first replies at most (the root, d00), not one per directory" \
	test "${nor:-99}" -le 2
au=$(stat_of attrs_used)
check "ls -lR: the files given with attributes counted as used ($au of $((NDIRS * (PER - 1))))" \
	test "${au:-0}" -ge $(((NDIRS - 2) * (PER - 1)))
(cd "$M" && t find . >/dev/null)
check "find after ls -lR: back to names alone ($nor -> $(stat_of names_only_replies) replies)" \
	test "$(stat_of names_only_replies)" -gt "$nor"
check "ls -lR: the daemon is alive" kill -0 "$BFS_PID"
umount_ok "ls -lR"

bfs_end
