#!/usr/bin/env bash
# shellcheck disable=SC2016 # bash -c and eval scripts expand their own arguments
# SPDX-License-Identifier: MIT
#
# The daemon's life cycle on real mounts: SIGTERM, SIGINT and SIGHUP
# unmount and exit 0 (with a file open too); fusermount3 -u refuses a mount
# with a file open and the file reads on, then unmounts once it is closed;
# fusermount3 -uz with a reader active lets it finish right and the daemon
# exit; readers killed in the middle of reads leave the daemon serving and
# nothing open. Then every way to start it wrong: a missing, non-directory
# or unreadable SOURCE, a missing, non-directory, non-empty, busy or dead
# MOUNTPOINT, each with exit status 1, a message naming the problem, and
# nothing mounted; -o nonempty mounts over a non-empty directory.
#
# Usage: lifecycle.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: lifecycle.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin lifecycle lz4 python3 env

chmod 755 "$T"			# the unprivileged start below must reach SOURCE
S=$T/src M=$T/mnt O=$T/orig
mkdir -p "$S" "$M" "$O"
READERS=()			# python readers still running, by pid

# our_daemons: pids of daemons started on paths below $T (a start that
# should have failed may have detached one).
our_daemons() {
	local p
	for p in /proc/[0-9]*; do
		[[ "$(tr '\0' ' ' 2>/dev/null <"$p/cmdline")" == "$BLOCKFS "*"$T/"* ]] && echo "${p#/proc/}"
	done
}

# cleanup: what bfs_begin's EXIT trap does not know of: readers, every
# mount below $T, daemons that detached.
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
	local p m
	for p in "${READERS[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	bfs_kill
	while read -r m; do
		fusermount3 -uz "$m" 2>/dev/null || umount -l "$m"
	done < <(awk -v t="$T/" 'index($2, t) == 1 { print $2 }' /proc/mounts)
	for p in $(our_daemons); do
		kill -9 "$p" 2>/dev/null
	done
}
bfs_at_exit cleanup

# Originals: 32 MiB of text in 4 MiB LZ4 blocks (one read decodes a whole
# block: slow enough to catch readers inside a read), and a small BGZF file.
python3 - "$O" <<'PY'
import os, random, sys
rng = random.Random(11)
words = [b"alpha", b"bravo", b"block", b"frame", b"reader", b"signal", b"unmount", b"7"]
line = lambda: b" ".join(rng.choice(words) for _ in range(12)) + b"\n"
chunk = b"".join(line() for _ in range(20000))
with open(os.path.join(sys.argv[1], "big"), "wb") as f:
    for i in range((32 << 20) // len(chunk) + 1):
        f.write(b"%08d " % i + chunk)
    f.truncate(32 << 20)
with open(os.path.join(sys.argv[1], "small"), "wb") as f:
    f.write(chunk[:300000])
PY
lz4 -q -B7 "$O/big" "$S/big.lz4"
if command -v bgzip >/dev/null; then
	bgzip -c "$O/small" > "$S/small.gz"
else
	lz4 -q "$O/small" "$S/small.lz4"
fi
BIG_MD5=$(md5sum < "$O/big" | cut -d' ' -f1)
BIG_SIZE=$(stat -c %s "$O/big")

# Readers in Python: O_DIRECT, so that every read reaches the daemon rather
# than the kernel's page cache.
cat > "$T/reader.py" <<'PY'
import errno, hashlib, mmap, os, random, sys

def odirect(path):
    return os.open(path, os.O_RDONLY | os.O_DIRECT)

def progress(path, n):
    with open(path + ".tmp", "w") as f:
        f.write(str(n))
    os.rename(path + ".tmp", path)

mode = sys.argv[1]
buf = mmap.mmap(-1, 1 << 20)        # page-aligned, as O_DIRECT wants
if mode == "slow":                  # PATH PROGRESS DELAY: whole file in order, slowly
    import time
    fd, off, h = odirect(sys.argv[2]), 0, hashlib.md5()
    try:
        while True:
            n = os.preadv(fd, [buf], off)
            if n <= 0:
                break
            h.update(buf[:n])
            off += n
            progress(sys.argv[3], off)
            time.sleep(float(sys.argv[4]))
    except OSError as e:
        print("error %s at %d" % (errno.errorcode.get(e.errno, e.errno), off))
        sys.exit(1)
    print(off, h.hexdigest())
elif mode == "loop":                # PATH PROGRESS: random 1 MiB reads until killed
    fd, size, n = odirect(sys.argv[2]), os.stat(sys.argv[2]).st_size, 0
    rng = random.Random(os.getpid())
    while True:
        os.preadv(fd, [buf], rng.randrange(0, size >> 20) << 20)
        n += 1
        progress(sys.argv[3], n)
elif mode == "fd":                  # FD EXPECTED_MD5: read an inherited descriptor whole
    fd, off, h = int(sys.argv[2]), 0, hashlib.md5()
    while True:
        b = os.pread(fd, 1 << 20, off)
        if not b:
            break
        h.update(b)
        off += len(b)
    print("same" if h.hexdigest() == sys.argv[3] else "different %d" % off)
elif mode == "far":                 # FD: drop the kernel's pages, read far in; print errno name
    fd = int(sys.argv[2])
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    try:
        os.pread(fd, 4096, 16 << 20)
        print("read")
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno))
PY
PYR=(python3 "$T/reader.py")

# wait_gone PID: wait up to 30 s for child PID to exit; its status in GONE
# (124: still running). Not in $(...): a subshell cannot wait for it.
GONE=
wait_gone() {
	GONE=124
	bfs_exited "$1" 30 || return 0
	GONE=0
	wait "$1" 2>/dev/null || GONE=$?
}

# wait_file FILE MIN: wait up to 30 s until FILE holds a number >= MIN.
wait_file() {
	local deadline=$((SECONDS + 30)) v
	while ((SECONDS < deadline)); do
		v=$(cat "$1" 2>/dev/null)
		[[ -n "$v" ]] && ((v >= $2)) && return 0
		sleep 0.02
	done
	return 1
}

mounts_at() {
	awk -v m="$1" '$2 == m { n++ } END { print n + 0 }' /proc/mounts
}

mount_or_die() {
	if ! bfs_mount "$S" "$M" "$T/daemon.log" "${1:-verify=on}"; then
		not_ok "mount (${1:-verify=on})" "daemon exit status: ${BFS_EXIT:-none}"
		exit 1
	fi
}

# --- signals ---------------------------------------------------------------

for sig in TERM INT HUP; do
	# A script's background commands start with SIGINT ignored and libfuse
	# keeps an ignored signal ignored: give the daemon the default action.
	BFS_WRAP="env --default-signal=$sig" mount_or_die
	ign=$(awk '/^SigIgn/ { print $2 }' "/proc/$BFS_PID/status")
	check "SIG$sig: the daemon does not ignore it (SigIgn $ign)" \
		test $((0x$ign >> ($(kill -l "$sig") - 1) & 1)) -eq 0
	check "SIG$sig: the mount serves before the signal" cmp -s "$O/big" "$M/big"
	pid=$BFS_PID
	kill -s "$sig" "$pid"
	wait_gone "$pid"
	BFS_PID=
	check_eq "SIG$sig: the daemon exits 0" 0 "$GONE"
	check "SIG$sig: nothing mounted afterwards" test "$(mounts_at "$M")" -eq 0
done

# The documented exception: started from a script, SIGINT stays ignored.
mount_or_die
kill -s INT "$BFS_PID"
sleep 0.5
is "SIGINT ignored since birth (shell background job): still mounted and alive" \
	eval 'daemon_alive && is_mounted "$M" && cmp -s "$O/small" "$M/small"'
kill -s TERM "$BFS_PID"
wait_gone "$BFS_PID"
check_eq "... and SIGTERM still ends it with status 0" 0 "$GONE"
BFS_PID=

# SIGTERM with a file held open: the mount is detached at once, the daemon
# exits 0, and the open file's next read that needs the daemon fails.
mount_or_die
exec 3<"$M/big"
head -c 1000 <&3 >/dev/null
pid=$BFS_PID
kill -s TERM "$pid"
wait_gone "$pid"
# Under ASan this also shows that the open handle's file version is freed
# at session end (83a4dd5): LeakSanitizer would make the status 1.
check_eq "SIGTERM with a file open: the daemon exits 0" 0 "$GONE"
BFS_PID=
check "SIGTERM with a file open: the mount is gone" test "$(mounts_at "$M")" -eq 0
check_eq "SIGTERM with a file open: its next uncached read fails with ENOTCONN" ENOTCONN \
	"$("${PYR[@]}" far 3 2>&1)"
exec 3<&-

# --- fusermount3 -u with a file open -----------------------------------------

mount_or_die
exec 3<"$M/big"
head -c 1000 <&3 >/dev/null
check_fails "fusermount3 -u with a file open: refused (EBUSY)" "busy" fusermount3 -u "$M"
is "fusermount3 -u refused: still mounted, daemon alive" \
	eval 'daemon_alive && test "$(mounts_at "$M")" -eq 1'
check_eq "fusermount3 -u refused: the open file reads on, every byte right" same \
	"$("${PYR[@]}" fd 3 "$BIG_MD5" 2>&1)"
check "fusermount3 -u refused: new opens work too" cmp -s "$O/small" "$M/small"
exec 3<&-
bfs_umount
check_eq "the file closed, fusermount3 -u unmounts and the daemon exits 0" 0 "$?"
check "nothing mounted afterwards" test "$(mounts_at "$M")" -eq 0

# A working directory on the mount holds it as busy as an open file.
mount_or_die
(cd "$M" && exec sleep 30) &
cwd_pid=$!
READERS+=("$cwd_pid")
sleep 0.2
check_fails "fusermount3 -u with a process's cwd on the mount: refused (EBUSY)" "busy" \
	fusermount3 -u "$M"
kill "$cwd_pid"
wait "$cwd_pid" 2>/dev/null
READERS=()
bfs_umount
check_eq "the process gone, fusermount3 -u unmounts, exit 0" 0 "$?"

# --- fusermount3 -uz with a reader active ---------------------------------------

mount_or_die
rm -f "$T/slow.pos"
"${PYR[@]}" slow "$M/big" "$T/slow.pos" 0.02 > "$T/slow.out" 2>&1 &
reader=$!
READERS+=("$reader")
wait_file "$T/slow.pos" $((4 << 20))
is "lazy unmount: the reader is under way (${BIG_SIZE} bytes to read)" \
	eval 'kill -0 $reader && (($(cat "$T/slow.pos") < BIG_SIZE))'
check "fusermount3 -uz with a reader active: exit 0" fusermount3 -uz "$M"
check "lazy unmount: the mount point is gone at once" test "$(mounts_at "$M")" -eq 0
is "lazy unmount: the daemon still serves the open reader" daemon_alive
wait_gone "$reader"
READERS=()
check_eq "lazy unmount: the reader finishes without an error" 0 "$GONE"
check_eq "lazy unmount: the reader read every byte, right" "$BIG_SIZE $BIG_MD5" "$(cat "$T/slow.out")"
wait_gone "$BFS_PID"
check_eq "lazy unmount: the daemon exits 0 once the reader has closed" 0 "$GONE"
BFS_PID=

# --- readers killed in the middle of reads ------------------------------------

# cache_size=0: every read decodes a 4 MiB block, so reads take a while.
mount_or_die cache_size=0,workers=0
cmp -s "$O/big" "$M/big"	# index built; its descriptor is leased and returned
fds_before=$(find "/proc/$BFS_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)
for i in 1 2 3 4; do
	rm -f "$T/loop$i"
	"${PYR[@]}" loop "$M/big" "$T/loop$i" 2>/dev/null &
	READERS+=("$!")
done
all_going=1
for i in 1 2 3 4; do
	wait_file "$T/loop$i" 3 || all_going=0
done
check "4 looping O_DIRECT readers each read at least 3 MiB" test "$all_going" -eq 1
# Kill them while at least one waits inside a read on the daemon, if that
# moment comes within 3 s (the kernel shows it as the reader's wchan).
inside=0
for _ in $(seq 300); do
	for p in "${READERS[@]}"; do
		grep -qE 'fuse|request_wait' "/proc/$p/wchan" 2>/dev/null && inside=$((inside + 1))
	done
	((inside > 0)) && break
	sleep 0.01
done
kill -9 "${READERS[@]}"
for p in "${READERS[@]}"; do
	wait "$p" 2>/dev/null
done
READERS=()
diag "readers killed with SIGKILL; $inside of 4 were waiting inside a FUSE read at that moment"
if ((inside > 0)); then
	ok "a reader was killed while waiting on the daemon"
else
	ok "a reader was killed while waiting on the daemon # SKIP never caught inside a read"
fi
is "after the kills the daemon is alive" daemon_alive
check "after the kills the file reads right" cmp -s "$O/big" "$M/big"
check "after the kills the mount-wide counters still answer" \
	getfattr --only-values -n user.blockfs.stats "$M"
fds_after=-1
deadline=$((SECONDS + 10))
while ((SECONDS < deadline)); do
	fds_after=$(find "/proc/$BFS_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)
	((fds_after <= fds_before)) && break
	sleep 0.1
done
check "the killed readers' opens were released: daemon descriptors $fds_after <= $fds_before" \
	test "$fds_after" -le "$fds_before"
bfs_umount
check_eq "no open left behind: fusermount3 -u unmounts, exit 0" 0 "$?"

# --- starting wrong -----------------------------------------------------------

# refused NAME MESSAGE CMD...: exit status exactly 1, MESSAGE in the output,
# and no new mount anywhere below $T.
refused() {
	local name=$1 msg=$2 out rc=0 before after
	shift 2
	before=$(grep -c " $T/" /proc/mounts)
	out=$(timeout -k 2 10 "$@" 2>&1) || rc=$?
	after=$(grep -c " $T/" /proc/mounts)
	if ((rc == 1)) && [[ "$out" == *"$msg"* ]] && ((after == before)); then
		ok "$name"
	else
		not_ok "$name" "command: $*" "expected: exit 1, \"$msg\", mounts below $T: $before" \
			"got: exit $rc, mounts: $after, output: ${out:0:500}"
	fi
}

touch "$T/afile"
refused "SOURCE missing: exit 1, says so" "cannot open SOURCE '$T/nonexistent': No such file" \
	"$BLOCKFS" -f "$T/nonexistent" "$M"
refused "SOURCE a file: exit 1, says so" "cannot open SOURCE '$T/afile': Not a directory" \
	"$BLOCKFS" -f "$T/afile" "$M"
mkdir -m 700 "$T/private"
if command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true; then
	refused "SOURCE unreadable (daemon run as nobody, SOURCE 0700 root's): exit 1, says so" \
		"cannot open SOURCE '$T/private': Permission denied" \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$BLOCKFS" -f "$T/private" "$M"
else
	ok "SOURCE unreadable # SKIP no setpriv to drop root (root reads every directory)"
fi
refused "MOUNTPOINT missing: exit 1, says so" \
	"cannot mount on MOUNTPOINT '$T/nomnt': No such file or directory" \
	"$BLOCKFS" -f "$S" "$T/nomnt"
refused "MOUNTPOINT a file: exit 1, says so" "MOUNTPOINT '$T/afile': Not a directory" \
	"$BLOCKFS" -f "$S" "$T/afile"
mkdir "$T/full"
echo hidden > "$T/full/note"
refused "MOUNTPOINT not empty: exit 1, says so" "MOUNTPOINT '$T/full': not empty" \
	"$BLOCKFS" -f "$S" "$T/full"
refused "MOUNTPOINT not empty, daemon mode: exit 1, says so" "not empty" \
	"$BLOCKFS" "$S" "$T/full"
check_eq "... and no daemon is left running" "" "$(our_daemons)"
check_eq "the refused MOUNTPOINT is untouched" hidden "$(cat "$T/full/note")"

# A MOUNTPOINT inside SOURCE: the daemon would hold its own mount busy for
# ever. Found by identity, whatever path leads there.
mkdir -p "$S/inside/deeper"
refused "MOUNTPOINT inside SOURCE: exit 1, says so" \
	"MOUNTPOINT '$S/inside': it is inside SOURCE" "$BLOCKFS" -f "$S" "$S/inside"
refused "MOUNTPOINT deeper inside SOURCE, daemon mode: exit 1" "inside SOURCE" \
	"$BLOCKFS" "$S" "$S/inside/deeper"
refused "MOUNTPOINT = SOURCE (with nonempty): exit 1, says so" \
	"MOUNTPOINT '$S': it is SOURCE" "$BLOCKFS" -f "$S" "$S" -o nonempty
ln -s "$S" "$T/srclink"
refused "MOUNTPOINT inside SOURCE through a link: exit 1" "inside SOURCE" \
	"$BLOCKFS" -f "$T/srclink" "$T/srclink/inside"
mkdir "$T/alias"
if mount --bind "$S" "$T/alias"; then
	refused "MOUNTPOINT inside SOURCE through a bind mount: exit 1" "inside SOURCE" \
		"$BLOCKFS" -f "$S" "$T/alias/inside"
	umount "$T/alias"
else
	ok "MOUNTPOINT through a bind mount # SKIP cannot bind-mount here"
fi
check_eq "... and no daemon is left running" "" "$(our_daemons)"
rmdir "$S/inside/deeper" "$S/inside"

# Option errors come first, before anything about the paths.
refused "a bad FUSE option with a missing MOUNTPOINT: the option is reported" \
	"unknown option" "$BLOCKFS" -f "$S" "$T/nomnt" -o bogus_option
refused "a bad FUSE value with a non-empty MOUNTPOINT: the value is reported" \
	"max_threads=many" "$BLOCKFS" -f "$S" "$T/full" -o max_threads=many
refused "a bad blockfs value with a missing SOURCE: the value is reported" \
	"bad value 'x' for option readpath" "$BLOCKFS" -f "$T/nonexistent" "$T/nomnt" -o readpath=x
refused "a third argument: exit 1, says so" "unexpected argument" \
	"$BLOCKFS" -f "$S" "$M" extra

mount_or_die
refused "MOUNTPOINT busy (a blockfs mounted there): exit 1, says so" \
	"MOUNTPOINT '$M': busy" "$BLOCKFS" -f "$S" "$M"
is "... the mount there still serves, mounted once" \
	eval 'test "$(mounts_at "$M")" -eq 1 && cmp -s "$O/small" "$M/small"'
bfs_umount
check_eq "... and unmounts, exit 0" 0 "$?"

mkdir "$T/tmpfs"
if mount -t tmpfs -o size=1m blockfs-test "$T/tmpfs"; then
	refused "MOUNTPOINT busy (an empty tmpfs mounted there): exit 1, says so" \
		"MOUNTPOINT '$T/tmpfs': busy" "$BLOCKFS" -f "$S" "$T/tmpfs"
	umount "$T/tmpfs"
else
	ok "MOUNTPOINT busy (tmpfs) # SKIP cannot mount a tmpfs here"
fi

# A dead mount: the daemon was killed without unmounting.
mount_or_die
exec 4>&2 2>/dev/null		# not bash's "Killed" line
kill -9 "$BFS_PID"
wait "$BFS_PID"
exec 2>&4 4>&-
BFS_PID=
refused "MOUNTPOINT of a killed daemon: exit 1, says so" \
	"Transport endpoint is not connected" "$BLOCKFS" -f "$S" "$M"
check "fusermount3 -u clears the dead mount" fusermount3 -u "$M"
mount_or_die
check "a new mount on the cleared MOUNTPOINT serves" cmp -s "$O/big" "$M/big"
bfs_umount
check_eq "... and unmounts, exit 0" 0 "$?"

# -o nonempty: mounts over the directory; its file comes back afterwards.
if bfs_mount "$S" "$T/full" "$T/daemon.log" nonempty; then
	ok "-o nonempty mounts over a non-empty directory"
	is "-o nonempty: the mount shows SOURCE, not what it hides" \
		eval 'cmp -s "$O/small" "$T/full/small" && ! test -e "$T/full/note"'
	bfs_umount
	check_eq "-o nonempty: unmount, exit 0" 0 "$?"
	check_eq "-o nonempty: the hidden file is back" hidden "$(cat "$T/full/note")"
else
	not_ok "-o nonempty mounts over a non-empty directory" "exit ${BFS_EXIT:-none}"
	show_log
fi

# --- a stat shows what open readers read --------------------------------------
# While a reader holds a file open (and has read: an open alone builds
# nothing, inode.c), a stat shows the size of the version it
# reads, even after its backing file was rewritten in place (a file
# replaced by rename is another inode); once the last reader has
# closed it, the next stat shows the new file. attr_timeout=0: every stat
# reaches the daemon.
mkdir -p "$T/vs" "$T/vm"
head -c 100000 "$O/big" | lz4 -q -c >"$T/vs/v.lz4"
if bfs_mount "$T/vs" "$T/vm" "$T/daemon-v.log" attr_timeout=0,entry_timeout=0; then
	exec 8<"$T/vm/v"
	dd bs=1 count=1 status=none <&8 >/dev/null	# a read: the reader's version is built
	head -c 150000 "$O/big" | lz4 -q -c >"$T/vs/v.new" && cat "$T/vs/v.new" >"$T/vs/v.lz4"
	check_eq "rewritten in place while open: a stat shows the open reader's size" 100000 \
		"$(t stat -c %s "$T/vm/v")"
	# its bytes are gone from the disk: the rest of what it read before, or EIO
	r=$(md5sum <&8 2>&1)
	check "... and the reader reads its old bytes or EIO, never the new ones ($r)" \
		test "$r" = "$(head -c 100000 "$O/big" | tail -c +2 | md5sum)" \
		-o "$r" = "md5sum: -: Input/output error"
	exec 8<&-
	check_eq "the reader closed: the next stat shows the new size" 150000 \
		"$(t stat -c %s "$T/vm/v")"
	check "... and a new open reads the new bytes" cmp "$T/vm/v" <(head -c 150000 "$O/big")
	bfs_umount
	check_eq "unmount, exit 0" 0 "$?"
else
	not_ok "mount with attr_timeout=0" "exit ${BFS_EXIT:-none}"
	show_log
fi

bfs_end
