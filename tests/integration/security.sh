#!/usr/bin/env bash
# shellcheck disable=SC2016 # bash -c and eval scripts expand their own arguments
# SPDX-License-Identifier: MIT
#
# What blockfs lets through, on real mounts:
# - symbolic links in SOURCE (absolute, ../ relative, to a directory, a link
#   named x.lz4, a linked .gzi sidecar, dangling, looping) are shown as
#   links with their targets unchanged, and blockfs never reads through one:
#   the outside files' access times stay put (a control read shows that the
#   probe works), and what the caller's kernel reaches by following a link
#   is not a file of the mount;
# - FIFOs and devices in SOURCE are never opened by blockfs;
# - permissions, checked as nobody: without allow_other nobody gets in;
#   with it, the backing modes decide (default_permissions is always on),
#   including for hints;
# - every attribute outside user.blockfs.* is EROFS and the backing file's
#   attributes stay as they were; user.blockfs.* values of every length and
#   content are refused cleanly, the daemon lives, valid values still work.
#
# Usage: security.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.

set -u
BLOCKFS=$(realpath "${1:?usage: security.sh BLOCKFS}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"
bfs_begin security lz4 bgzip python3 setpriv getfattr setfattr
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
"${NOBODY[@]}" true || skip "cannot run as nobody"

chmod 755 "$T"			# nobody must reach the mount point
S=$T/src M=$T/mnt OUT=$T/outside O=$T/orig
mkdir -p "$S" "$M" "$OUT/dir" "$O"

# as_nobody CMD...: run CMD as nobody; print its stderr+stdout.
as_nobody() {
	t "${NOBODY[@]}" "$@" 2>&1
}

mount_or_die() {
	if ! bfs_mount "$S" "$M" "$T/daemon.log" "$1"; then
		not_ok "mount ($1)" "daemon exit status: ${BFS_EXIT:-none}"
		exit 1
	fi
}

# --- the trees ----------------------------------------------------------------

python3 - "$O" <<'PY'
import os, random, sys
rng = random.Random(5)
words = [b"secret", b"public", b"link", b"mode", b"owner", b"other", b"\n"]
for name, n in (("text", 300000), ("outside", 50000), ("inner", 40000)):
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(name.encode() + b" " + b" ".join(rng.choice(words) for _ in range(n)))
PY
# Inside SOURCE: files with different owners and modes, a closed directory.
lz4 -q -B4 "$O/text" "$S/plain.lz4"
cp "$S/plain.lz4" "$S/private.lz4"
cp "$S/plain.lz4" "$S/nobodys.lz4"
chmod 644 "$S/plain.lz4"
chmod 600 "$S/private.lz4" "$S/nobodys.lz4"
chown 65534:65534 "$S/nobodys.lz4"
mkdir -m 700 "$S/closed"
cp "$S/plain.lz4" "$S/closed/f.lz4"
chmod 644 "$S/closed/f.lz4"
bgzip -c "$O/text" > "$S/data.gz"
mkfifo "$S/fifo"
mknod "$S/null" c 1 3
# Outside SOURCE: what the links point at.
cp "$O/outside" "$OUT/secret"
lz4 -q -B4 "$O/outside" "$OUT/secret.lz4"
lz4 -q -B4 "$O/inner" "$OUT/dir/inner.lz4"
bgzip -c -i -I "$OUT/data.gz.gzi" "$O/text" > /dev/null	# a valid index of data.gz
ln -s "$OUT/secret" "$S/abs"
ln -s ../outside/secret "$S/rel"
ln -s "$OUT/dir" "$S/dirlink"
ln -s "$OUT/secret.lz4" "$S/x.lz4"
ln -s "$OUT/data.gz.gzi" "$S/data.gz.gzi"
ln -s "$T/nothing" "$S/dangling"
ln -s loop "$S/loop"
INNER_MD5=$(md5sum < "$OUT/dir/inner.lz4")
# Outside files get an old access time: any read of them moves it (relatime).
touch -d 2001-01-01 "$OUT/secret" "$OUT/secret.lz4" "$OUT/dir/inner.lz4" "$OUT/data.gz.gzi"
atimes() {
	stat -c '%n %X' "$OUT/secret" "$OUT/secret.lz4" "$OUT/dir/inner.lz4" "$OUT/data.gz.gzi"
}
ATIMES=$(atimes)

# --- symbolic links -------------------------------------------------------------

mount_or_die verify=on
DEV=$(stat -c %d "$M")
for l in abs rel dirlink x.lz4 dangling loop; do
	check_eq "$l: shown as a symbolic link" "symbolic link" "$(stat -c %F "$M/$l" 2>&1)"
	check_eq "$l: readlink gives the target unchanged" "$(readlink "$S/$l")" "$(readlink "$M/$l")"
done
# data.gz.gzi is named as the sidecar of data.gz, which is shown decoded:
# hidden, whatever it is (-o keep_compressed shows it: below).
check_fails "data.gz.gzi (a linked sidecar of the decoded data.gz): hidden" "No such file" \
	stat "$M/data.gz.gzi"
# shellcheck disable=SC2012 # ls is the user's view under test; the names are plain
listing=$(LC_ALL=C ls -A "$M" | tr '\n' ' ')
check_eq "the listing shows each link under its own name, x.lz4 not decoded as x" \
	"abs closed dangling data dirlink fifo loop nobodys null plain private rel x.lz4 " \
	"$listing"
check_fails "x (the link x.lz4 decoded) does not exist" "No such file" stat "$M/x"
check "data.gz is served right (its linked .gzi ignored)" cmp -s "$O/text" "$M/data"
check_fails "dirlink/inner (the outside tree decoded) does not exist" "No such file" \
	stat "$M/dirlink/inner"
check_fails "the looping link does not resolve" "Too many levels" stat -L "$M/loop"
check_fails "the dangling link does not resolve" "No such file" stat -L "$M/dangling"
getfattr -d -m - "$M" >/dev/null 2>&1
ls -lR "$M" >/dev/null 2>&1
check_eq "blockfs read none of the outside files (access times unchanged)" "$ATIMES" "$(atimes)"
# What the caller's own kernel reaches by following the links (blockfs's
# business ends at readlink): the outside files, not files of the mount.
check_eq "following abs lands outside the mount (another st_dev)" "differs" \
	"$([[ $(stat -L -c %d "$M/abs") != "$DEV" ]] && echo differs)"
check_eq "following rel (../) lands outside the mount (another st_dev)" "differs" \
	"$([[ $(stat -L -c %d "$M/rel") != "$DEV" ]] && echo differs)"
check_eq "dirlink/inner.lz4 lands outside the mount (another st_dev)" "differs" \
	"$([[ $(stat -c %d "$M/dirlink/inner.lz4") != "$DEV" ]] && echo differs)"
# (Not cmp: it sees one file twice and reads neither.)
check_eq "dirlink/inner.lz4 reads as the raw outside bytes, not decoded" "$INNER_MD5" \
	"$(md5sum < "$M/dirlink/inner.lz4")"
check_eq "control: that read through the link moved the outside file's access time" moved \
	"$([[ $(stat -c %X "$OUT/dir/inner.lz4") != "$(date -d 2001-01-01 +%s)" ]] && echo moved)"
bfs_umount
mount_or_die verify=on,keep_compressed
check_eq "keep_compressed: data.gz.gzi shown as a symbolic link" "symbolic link" \
	"$(stat -c %F "$M/data.gz.gzi" 2>&1)"
check_eq "keep_compressed: its readlink gives the target unchanged" \
	"$(readlink "$S/data.gz.gzi")" "$(readlink "$M/data.gz.gzi")"
check "keep_compressed: data is still served right (its linked .gzi ignored)" \
	cmp -s "$O/text" "$M/data"
bfs_umount
mount_or_die verify=on

# --- FIFOs and devices ------------------------------------------------------------

check_eq "a FIFO in SOURCE is shown as a FIFO" "fifo" "$(stat -c %F "$M/fifo")"
check_eq "a device in SOURCE is shown as a device" "character special file" \
	"$(stat -c %F "$M/null")"
check_fails "opening the device fails (nodev mount)" "Permission denied" head -c1 "$M/null"
fifo_out=$(t python3 - "$M/fifo" "$S/fifo" <<'PY' 2>&1
import errno, os, sys
r = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)  # the mount's FIFO, open for reading
try:
    os.open(sys.argv[2], os.O_WRONLY | os.O_NONBLOCK)   # the backing FIFO: a reader?
    print("connected")
except OSError as e:
    print(errno.errorcode[e.errno])
PY
)
check_eq "the mount's FIFO is not the backing one (that has no reader: ENXIO)" ENXIO "$fifo_out"
check "the daemon still answers" stat "$M/plain"
check_eq "/proc/mounts: default_permissions without asking, no allow_other" "yes no" \
	"$(awk -v m="$M" '$2 == m { print (($4 ~ /default_permissions/) ? "yes" : "no"), (($4 ~ /allow_other/) ? "yes" : "no") }' /proc/mounts)"

# --- permissions ----------------------------------------------------------------

check "root reads a 0644 file" cmp -s "$O/text" "$M/plain"
check "root reads a 0600 file" cmp -s "$O/text" "$M/private"
out=$(as_nobody stat "$M")
check_eq "without allow_other, nobody cannot even stat the mount" denied \
	"$([[ $out == *"Permission denied"* ]] && echo denied || echo "$out")"
out=$(as_nobody cat "$M/plain")
check_eq "without allow_other, nobody cannot read a 0644 file" denied \
	"$([[ $out == *"Permission denied"* ]] && echo denied || echo "${out:0:100}")"
bfs_umount
check_eq "unmount, exit 0" 0 "$?"

for opts in allow_other allow_other,default_permissions; do
	mount_or_die "$opts"
	check_eq "$opts: /proc/mounts lists allow_other and default_permissions" "yes yes" \
		"$(awk -v m="$M" '$2 == m { print (($4 ~ /allow_other/) ? "yes" : "no"), (($4 ~ /default_permissions/) ? "yes" : "no") }' /proc/mounts)"
	check_eq "$opts: modes and owners are the backing files'" "644 root 600 root 600 nobody 700 root" \
		"$(stat -c '%a %U' "$M/plain" "$M/private" "$M/nobodys" "$M/closed" | tr '\n' ' ' | sed 's/ $//')"
	is "$opts: nobody reads a 0644 root file, every byte" \
		eval 'as_nobody cat "$M/plain" | cmp -s "$O/text" -'
	is "$opts: nobody reads its own 0600 file, every byte" \
		eval 'as_nobody cat "$M/nobodys" | cmp -s "$O/text" -'
	check_fails "$opts: nobody cannot read a 0600 root file" "Permission denied" \
		"${NOBODY[@]}" cat "$M/private"
	check_fails "$opts: nobody cannot list a 0700 root directory" "Permission denied" \
		"${NOBODY[@]}" ls "$M/closed"
	check_fails "$opts: nobody cannot read a 0644 file inside it" "Permission denied" \
		"${NOBODY[@]}" cat "$M/closed/f"
	is "$opts: root still reads all of them" \
		eval 'cmp -s "$O/text" "$M/private" && cmp -s "$O/text" "$M/closed/f"'
	check_fails "$opts: nobody cannot set a hint on a root file it may only read" \
		"Permission denied" "${NOBODY[@]}" setfattr -n user.blockfs.advice -v random "$M/plain"
	check "$opts: nobody sets a hint on its own file" \
		"${NOBODY[@]}" setfattr -n user.blockfs.advice -v random "$M/nobodys"
	check_eq "$opts: ... and reads it back" random \
		"$(as_nobody getfattr --absolute-names --only-values -n user.blockfs.advice "$M/nobodys")"
	setfattr -x user.blockfs.advice "$M/nobodys"
	check_fails "$opts: nobody cannot write its own file (EROFS)" "Read-only file system" \
		"${NOBODY[@]}" sh -c "echo x >> '$M/nobodys'"
	bfs_umount
	check_eq "$opts: unmount, exit 0" 0 "$?"
done

# --- attributes -------------------------------------------------------------------

setfattr -n user.orig -v keep "$S/plain.lz4"
setfattr -n trusted.orig -v keep "$S/plain.lz4"
backing_xattrs() {
	getfattr --absolute-names -d -m - -e hex "$S/plain.lz4" "$S"
}
BEFORE=$(backing_xattrs)
mount_or_die verify=on
check_eq "the backing file's own attribute reads through" keep \
	"$(getfattr --absolute-names --only-values -n user.orig "$M/plain")"
tap_import python3 - "$M" <<'PY'
import errno, os, random, struct, sys

M = sys.argv[1]
F, D = os.path.join(M, "plain"), M

def name_of(e):
    return errno.errorcode.get(e, str(e))

def expect(what, want, fn, *args):
    """want: a set of errno names, or 'ok'."""
    try:
        fn(*args)
        got = "ok"
    except OSError as e:
        got = name_of(e.errno)
    if got in want:
        print("ok - %s: %s" % (what, got))
    else:
        print("not ok - %s: %s, want %s" % (what, got, "/".join(sorted(want))))

def setx(path, name, value):
    os.setxattr(path, name, value)

acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, 0xFFFFFFFF)
                                      for tag, perm in ((1, 6), (4, 4), (0x20, 4)))
# Outside user.blockfs.*: read-only, whatever the name space.
for path, where in ((F, "file"), (D, "root directory")):
    for name in ("user.other", "user.orig", "trusted.x", "trusted.orig", "security.x",
                 "system.posix_acl_access"):
        value = acl if name.startswith("system.") else b"v"
        expect("set %s on a %s" % (name, where), {"EROFS"}, setx, path, name, value)
        expect("remove %s on a %s" % (name, where), {"EROFS"}, os.removexattr, path, name)
expect("set a malformed POSIX ACL", {"EINVAL"}, setx, F, "system.posix_acl_access", b"v")

# user.blockfs.advice: every length and content.
rng = random.Random(3)
bad = {
    "empty value": b"",
    "one byte": b"x",
    "a lone NUL": b"\0",
    "two NULs after a word": b"sequential\0\0",
    "a NUL inside a word": b"seq\0uential",
    "64 random bytes": bytes(rng.randrange(256) for _ in range(64)),
    "64 bytes of 0xff": b"\xff" * 64,
    "trailing junk": b"sequentialjunk",
    "a word and junk": b"sequential junk",
    "a trailing newline": b"sequential\n",
    "a leading space": b" sequential",
    "upper case": b"SEQUENTIAL",
    "a range on random": b"random 0 1",
    "willneed, one number": b"willneed 0",
    "willneed, three numbers": b"willneed 0 1 2",
    "willneed, two spaces": b"willneed  0 1",
    "willneed, trailing space": b"willneed 0 1 ",
    "willneed, negative offset": b"willneed -1 10",
    "willneed, negative length": b"willneed 0 -5",
    "willneed, zero length": b"willneed 0 0",
    "willneed, hex": b"willneed 0x10 5",
    "willneed, fraction": b"willneed 1.5M 1",
    "willneed, unknown suffix": b"willneed 0 16E",
    "willneed, offset past 2^64": b"willneed 18446744073709551616 1",
    "willneed, length past 2^64": b"willneed 0 99999999999999999999999",
    "willneed, suffix overflow": b"willneed 17179869184G 1",
    "willneed, range wraps": b"willneed 18446744073709551615 1",
    "willneed, range wraps (length)": b"willneed 1 18446744073709551615",
    "dontneed, negative": b"dontneed -4096 4096",
}
for what, value in bad.items():
    expect("advice, %s" % what, {"EINVAL"}, setx, F, "user.blockfs.advice", value)
for n in (65, 255, 4096, 65536):
    expect("advice, %d bytes" % n, {"E2BIG"}, setx, F, "user.blockfs.advice", b"s" * n)
    expect("advice, %d random bytes" % n, {"E2BIG"}, setx, F, "user.blockfs.advice",
           bytes(rng.randrange(256) for _ in range(n)))
expect("advice, 65537 bytes (past the kernel's limit)", {"E2BIG"}, setx, F,
       "user.blockfs.advice", b"s" * 65537)
expect("advice, 64 bytes of padding after a word", {"EINVAL"}, setx, F,
       "user.blockfs.advice", b"random" + b" " * 58)
expect("advice dontneed on a directory", {"EINVAL"}, setx, D, "user.blockfs.advice",
       b"dontneed")
for what, value in (("empty", b""), ("upper case", b"MMAP"), ("NUL then junk", b"mmap\0x"),
                    ("255 bytes", b"m" * 255), ("an advice word", b"sequential")):
    want = {"E2BIG"} if len(value) > 64 else {"EINVAL"}
    expect("readpath, %s" % what, want, setx, F, "user.blockfs.readpath", value)
# Names.
for name, want in (("user.blockfs.format", {"EPERM"}), ("user.blockfs.stats", {"EPERM"}),
                   ("user.blockfs.nosuch", {"ENOTSUP", "EOPNOTSUPP"}),
                   ("user.blockfs.", {"ENOTSUP", "EOPNOTSUPP"}),
                   ("user.blockfs." + "a" * 242, {"ENOTSUP", "EOPNOTSUPP"}),
                   ("user.blockfs." + "a" * 243, {"ERANGE"})):
    expect("set %s" % (name if len(name) < 40 else "a %d-byte name" % len(name)), want,
           setx, F, name, b"normal")
expect("get an unknown user.blockfs name", {"ENODATA"}, os.getxattr, F, "user.blockfs.nosuch")

# Nothing was stored, and the valid values work.
def get(name, path=F):
    return os.getxattr(path, name).decode()
print(("ok" if get("user.blockfs.advice") == "normal" else "not ok") +
      " - after every refusal the advice is still normal (%s)" % get("user.blockfs.advice"))
for value, back in ((b"sequential", "sequential"), (b"random\0", "random"),
                    (b"willneed 0 1M", None), (b"willneed 1G 1M", None),
                    (b"dontneed 0 4096", None), (b"noreuse", "noreuse")):
    expect("advice %r accepted" % value, {"ok"}, setx, F, "user.blockfs.advice", value)
    if back:
        g = get("user.blockfs.advice")
        print(("ok" if g == back else "not ok") + " - ... and reads back as %s (%s)" % (back, g))
expect("readpath mmap accepted", {"ok"}, setx, F, "user.blockfs.readpath", b"mmap")
expect("remove the advice", {"ok"}, os.removexattr, F, "user.blockfs.advice")
expect("remove the readpath", {"ok"}, os.removexattr, F, "user.blockfs.readpath")
print(("ok" if get("user.blockfs.advice") == "normal" else "not ok") +
      " - removed: normal again")
PY
is "after all that the daemon is alive" daemon_alive
check "... and the file reads right" cmp -s "$O/text" "$M/plain"
check_eq "the backing attributes are exactly as before" "$BEFORE" "$(backing_xattrs)"
bfs_umount
check_eq "unmount, exit 0" 0 "$?"
bfs_end
