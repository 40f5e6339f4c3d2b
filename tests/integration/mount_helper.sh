#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The ways a user starts blockfs other than "blockfs -f": the mount(8)
# helper convention (mount.blockfs SOURCE DIR -o OPTS, with fstab-only
# options and -f meaning "fake"), daemon mode, -h, -V, refusals; and every
# route to a mount, each checked for nosuid and nodev in
# /proc/self/mountinfo: the command line, mount -t blockfs
# (/sbin/mount.blockfs), mount -t fuse.blockfs through
# /sbin/mount.fuse.blockfs and, without it, through mount.fuse3, mount -t
# fuse BLOCKFS#SOURCE, and fstab lines of both types with mount DIR and
# mount -a.
#
# The routes through mount(8) need the built binary where mount(8) and
# mount.fuse3 look for it (/sbin, the PATH mount(8) gives helpers) and a
# test /etc/fstab. They run in a private mount namespace (unshare -m) where
# an overlay on /sbin and /usr/local/sbin holds the links and a bind mount
# puts the test fstab on /etc/fstab: nothing on the machine changes, and
# no "ninja install" is needed. Every mount is undone by an EXIT trap.
#
# Usage: mount_helper.sh BLOCKFS      Exit: 0 pass, 1 fail, 77 skip.
# (mount_helper.sh --routes BLOCKFS DIR is the part run inside the namespace.)

set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

ROUTES=0
if [[ "${1:-}" == --routes ]]; then
	ROUTES=1
	shift
fi
BLOCKFS=$(realpath "${1:?usage: mount_helper.sh BLOCKFS}")

# flags DIR: the per-mount options of the mount on DIR (mountinfo field 6).
flags() {
	M=$1 awk '$5 == ENVIRON["M"] { f = $6 } END { print f }' /proc/self/mountinfo
}

# Daemonized mounts return before serving; give the mount a moment to show.
wait_mounted() {
	local _
	for _ in $(seq 50); do
		mountpoint -q "$1" && return 0
		sleep 0.1
	done
	return 1
}

# ============================================================================
# Inside the namespace: the routes through mount(8).
# ============================================================================
if ((ROUTES)); then
	T=${2:?}
	SBIN=$(realpath /sbin)
	# overlay DIR NAME: DIR gets a writable layer in $T/NAME.up, seen only here.
	overlay() {
		mkdir -p "$T/$2.up" "$T/$2.work"
		mount -t overlay overlay \
			-o "lowerdir=$1,upperdir=$T/$2.up,workdir=$T/$2.work" "$1"
	}
	overlay "$SBIN" sbin || { not_ok "overlay on $SBIN"; exit 1; }
	ln -s "$BLOCKFS" "$SBIN/mount.blockfs"
	# mount.fuse3 runs "blockfs" from the PATH mount(8) sets; /usr/local/sbin
	# comes first there, and an installed blockfs must not stand in.
	if [[ -d /usr/local/sbin ]] && overlay /usr/local/sbin lsbin; then
		ln -s "$BLOCKFS" /usr/local/sbin/blockfs
	else
		ln -s "$BLOCKFS" "$SBIN/blockfs"
	fi
	[[ -d /run/mount ]] && mount -t tmpfs tmpfs /run/mount	# libmount's utab
	touch "$T/fstab"
	mount --bind "$T/fstab" /etc/fstab
	trap 'for m in "$T"/m*; do mountpoint -q "$m" && umount -l "$m"; done' EXIT

	# route NAME WANT CMD...: CMD mounts $T/mnt; it must serve, show nosuid
	# and nodev (WANT=safe) or neither (WANT=asked), and unmount. The TAP
	# lines go to the outer run's tap_import, which counts them.
	route() {
		local name=$1 want=$2 f
		shift 2
		if ! t "$@" >"$T/route.log" 2>&1 || ! wait_mounted "$T/mnt"; then
			not_ok "$name: mounts" "$(cat "$T/route.log")"
			return
		fi
		f=$(flags "$T/mnt")
		if [[ $want == safe && ",$f," == *,nosuid,* && ",$f," == *,nodev,* ]] ||
			[[ $want == asked && ",$f," != *,nosuid,* && ",$f," != *,nodev,* ]]; then
			ok "$name: $f"
		else
			not_ok "$name: $f"
		fi
		is "$name: serves" cmp -s "$T/orig" "$T/mnt/numbers"
		if umount "$T/mnt" && ! mountpoint -q "$T/mnt"; then
			ok "$name: umount"
		else
			not_ok "$name: umount"
			umount -l "$T/mnt"
		fi
	}

	route "mount -t blockfs (mount.blockfs)" safe mount -t blockfs "$T/src" "$T/mnt"
	# mount(8) drops suid and dev (its defaults) before any helper sees them.
	route "mount -t blockfs -o suid,dev: mount(8) passes neither" safe \
		mount -t blockfs -o suid,dev "$T/src" "$T/mnt"
	route "mount -t fuse.blockfs without mount.fuse.blockfs (mount.fuse3)" safe \
		mount -t fuse.blockfs "$T/src" "$T/mnt" -o readpath=pread
	route "mount -t fuse BLOCKFS#SOURCE (mount.fuse3)" safe \
		mount -t fuse "$BLOCKFS#$T/src" "$T/mnt"
	route "mount.fuse3 -o nodev: only the suid it added is dropped" safe \
		mount.fuse3 "$BLOCKFS#$T/src" "$T/mnt" -o nodev
	route "mount.fuse3 -o suid,dev run by hand: the ask is kept" asked \
		mount.fuse3 "$BLOCKFS#$T/src" "$T/mnt" -o suid,dev
	printf '%s %s fuse.blockfs allow_other,noauto 0 0\n' "$T/src" "$T/mnt" >"$T/fstab"
	route "fstab fuse.blockfs, mount DIR (mount.fuse3)" safe mount "$T/mnt"

	ln -s "$BLOCKFS" "$SBIN/mount.fuse.blockfs"
	route "mount -t fuse.blockfs (mount.fuse.blockfs)" safe \
		mount -t fuse.blockfs "$T/src" "$T/mnt" -o readpath=pread
	route "fstab fuse.blockfs, mount DIR (mount.fuse.blockfs)" safe mount "$T/mnt"
	printf '%s %s blockfs allow_other,noauto 0 0\n' "$T/src" "$T/mnt" >"$T/fstab"
	route "fstab blockfs, mount DIR" safe mount "$T/mnt"

	# mount -a: a line of each type, through mount.fuse3 and through the
	# helpers. A setuid-root program below SOURCE runs as its caller.
	cp /usr/bin/id "$T/src/id"
	chmod 4755 "$T/src/id"
	mkdir -p "$T/m1" "$T/m2" "$T/m3"
	{
		printf '%s %s fuse.blockfs allow_other 0 0\n' "$T/src" "$T/m1"
		printf '%s %s blockfs allow_other 0 0\n' "$T/src" "$T/m2"
	} >"$T/fstab"
	rm "$SBIN/mount.fuse.blockfs"
	t mount -a
	ln -s "$BLOCKFS" "$SBIN/mount.fuse.blockfs"
	printf '%s %s fuse.blockfs allow_other 0 0\n' "$T/src" "$T/m3" >>"$T/fstab"
	t mount -a
	for m in m1 m2 m3; do
		wait_mounted "$T/$m"
		f=$(flags "$T/$m")
		if [[ ",$f," == *,nosuid,* && ",$f," == *,nodev,* ]]; then
			ok "mount -a, $m: $f"
		else
			not_ok "mount -a, $m: '$f'"
		fi
		u=$(t setpriv --reuid=65534 --regid=65534 --clear-groups "$T/$m/id" -u 2>&1)
		check_eq "mount -a, $m: a setuid-root program runs as nobody (euid $u)" 65534 "$u"
		umount "$T/$m"
	done
	exit 0
fi

# ============================================================================
# The outer run.
# ============================================================================
bfs_begin mount-helper lz4 mountpoint unshare setpriv
chmod 755 "$T"			# nobody runs a program through the mounts
mkdir -p "$T/bin" "$T/src" "$T/mnt"
ln -s "$BLOCKFS" "$T/bin/mount.blockfs"
seq 1 100000 >"$T/orig"
lz4 -q "$T/orig" "$T/src/numbers.lz4"

# The mounts here are daemonized: bfs_kill (in the EXIT trap) knows none.
bfs_at_exit bfs_lazy_umount "$T/mnt"

mounted_right() {
	wait_mounted "$T/mnt" && cmp -s "$T/orig" "$T/mnt/numbers"
}

unmount() {
	fusermount3 -u "$T/mnt" && ! mountpoint -q "$T/mnt"
}

helper_mounts() {
	"$T/bin/mount.blockfs" "$T/src" "$T/mnt" -n -o readpath=pread,defaults,noauto,nofail,_netdev,x-systemd.automount &&
		mounted_right && unmount
}
is "mount.blockfs drops fstab-only options and mounts" helper_mounts

helper_fake() {
	"$T/bin/mount.blockfs" "$T/src" "$T/mnt" -f -o readpath=pread && ! mountpoint -q "$T/mnt"
}
is "mount.blockfs -f (fake) mounts nothing" helper_fake

helper_bad_value() {
	local out rc
	out=$("$T/bin/mount.blockfs" "$T/src" "$T/mnt" -o readpath=sideways 2>&1)
	rc=$?
	[[ $rc == 1 && "$out" == *readpath* && "$out" == *"pread, mmap or auto"* ]] &&
		! mountpoint -q "$T/mnt"
}
is "mount.blockfs refuses a bad value, exit 1, nothing mounted" helper_bad_value

daemon_mode() {
	"$BLOCKFS" "$T/src" "$T/mnt" && mounted_right && unmount
}
is "blockfs without -f detaches and serves" daemon_mode

# route_cli WANT OPTS...: the command line, daemonized.
route_cli() {
	local want=$1 f
	shift
	"$BLOCKFS" "$T/src" "$T/mnt" "$@" && mounted_right || return 1
	f=$(flags "$T/mnt")
	diag "flags: $f"
	unmount || return 1
	if [[ $want == safe ]]; then
		[[ ",$f," == *,nosuid,* && ",$f," == *,nodev,* ]]
	else
		[[ ",$f," != *,nosuid,* && ",$f," != *,nodev,* ]]
	fi
}
is "blockfs SOURCE DIR: nosuid,nodev" route_cli safe
is "blockfs -o allow_other,ro: nosuid,nodev" route_cli safe -o allow_other,ro
is "blockfs -o suid,dev (root asks): neither" route_cli asked -o suid,dev
is "blockfs -o suid,nosuid,dev,nodev: the last word wins" route_cli safe -o suid,nosuid,dev,nodev

# Every FUSE option that -h or the man page documents works in the
# background, or is refused in the foreground: libfuse fails some only at
# INIT, after the daemon detached (max_read did: exit 0, nothing mounted).
PASS_THROUGH=(allow_other allow_root auto_unmount clone_fd max_idle_threads=2 max_threads=4
	max_read=65536 max_read=4096 default_permissions ro fsname=x kernel_readahead=0)
documented_all_tested() {
	local o missing=
	for o in $("$BLOCKFS" -h 2>&1 | sed -n '/^FUSE options/,$ s/^ *-o \([a-z_]*\).*/\1/p') \
		$(sed -n '/^\.SS "FUSE options"/,/^\.SH/ s/^\.BR \([a-z_]*\)=* ,*$/\1/p' \
			"$HERE/../../man/blockfs.8.in"); do
		[[ " ${PASS_THROUGH[*]} " == *" $o"[=\ ]* ]] || missing+=" $o"
	done
	[[ -z "$missing" ]] || { diag "untested:$missing"; return 1; }
}
is "every FUSE option of -h and the man page is among those tested" documented_all_tested
daemon_with() {
	"$BLOCKFS" "$T/src" "$T/mnt" "$@" && mounted_right && unmount
}
for o in "${PASS_THROUGH[@]}"; do
	is "daemon mode -o $o: mounts and serves" daemon_with -o "$o"
done
is "daemon mode -s: mounts and serves" daemon_with -s
debug_mode() {	# -d implies -f: stays in the foreground
	"$BLOCKFS" -d "$T/src" "$T/mnt" >"$T/debug.log" 2>&1 &
	mounted_right && unmount && wait $!
}
is "-d: mounts and serves in the foreground, exit 0" debug_mode
refused() {	# refused MESSAGE OPT: exit 1 with MESSAGE, nothing mounted
	local out rc=0
	out=$("$BLOCKFS" "$T/src" "$T/mnt" -o "$2" 2>&1) || rc=$?
	sleep 0.3
	# shellcheck disable=SC2015 # the || branch is for any of the tests failing
	[[ $rc == 1 && "$out" == *"$1"* ]] && ! mountpoint -q "$T/mnt" ||
		{ diag "exit $rc: $out"; mountpoint -q "$T/mnt" && fusermount3 -u "$T/mnt"; return 1; }
}
for spec in "max_read=64K:option max_read" "max_read=-1:option max_read" \
	"max_read=4294967296:option max_read" "max_threads=many:max_threads" \
	"max_idle_threads=x:max_idle_threads" "kernel_cache:unknown option"; do
	is "-o ${spec%%:*}: refused in the foreground, exit 1" refused "${spec#*:}" "${spec%%:*}"
done

if t unshare -m --propagation private true 2>/dev/null; then
	tap_import unshare -m --propagation private "$HERE/mount_helper.sh" --routes "$BLOCKFS" "$T"
else
	diag "no private mount namespace here: the mount(8) routes are not checked"
fi

missing_source() {
	local out
	out=$("$BLOCKFS" -f "$T/nonexistent" "$T/mnt" 2>&1)
	[[ $? == 1 && "$out" == *"cannot open SOURCE"* ]] && ! mountpoint -q "$T/mnt"
}
is "a missing SOURCE: exit 1 with a message" missing_source

no_mountpoint() {
	"$BLOCKFS" -f "$T/src" >/dev/null 2>&1
	[[ $? == 1 ]]
}
is "no MOUNTPOINT: exit 1" no_mountpoint

help_lists_options() {
	local out o
	out=$("$BLOCKFS" -h 2>&1) || return 1
	for o in readpath populate advice cache_size readahead workers verify suid dev allow_other; do
		[[ "$out" == *"$o"* ]] || { echo "# -h lacks $o"; return 1; }
	done
}
is "blockfs -h lists every option" help_lists_options

help_aligned() {	# every text in one column, every line within 79 columns
	"$BLOCKFS" -h | awk '
		/^blockfs options/ { on = 1; next }
		/^$/ { on = 0 }
		length($0) > 79 { print "too long: " $0; bad = 1 }
		on && /^    -o [^ ]+ +[^ ]/ && match($0, /^    -o [^ ]+ +/) && RLENGTH != 27 {
			print "text at column " RLENGTH + 1 ": " $0; bad = 1 }
		on && /^     +[^ -]/ && match($0, /^ +/) && RLENGTH != 27 {
			print "continued at column " RLENGTH + 1 ": " $0; bad = 1 }
		END { exit bad }'
}
is "blockfs -h: every option's text in one column, within 79 columns" help_aligned

helper_help_version() {
	local out
	out=$("$T/bin/mount.blockfs" -h) && [[ "$out" == *"blockfs options"* ]] || return 1
	out=$("$T/bin/mount.blockfs" --help) && [[ "$out" == *"blockfs options"* ]] || return 1
	out=$("$T/bin/mount.blockfs" -V) && [[ "$out" == *libfuse* ]] || return 1
	"$T/bin/mount.blockfs" --version >/dev/null
}
is "mount.blockfs -h, --help, -V, --version: exit 0" helper_help_version

populate_warned() {
	local out
	out=$("$BLOCKFS" "$T/src" "$T/mnt" -o readpath=pread,populate=on 2>&1) &&
		mounted_right && unmount || return 1
	[[ "$out" == *"populate=on has no effect with readpath=pread"* ]] ||
		{ diag "no warning: $out"; return 1; }
	out=$("$BLOCKFS" "$T/src" "$T/mnt" -o readpath=mmap,populate=on 2>&1) &&
		mounted_right && unmount && [[ -z "$out" ]]
}
is "populate=on with readpath=pread: mounts, warns it has no effect (not with mmap)" \
	populate_warned

version_lists_libraries() {
	local out
	out=$("$BLOCKFS" -V 2>&1) || return 1
	[[ "$out" == *blockfs* && "$out" == *libfuse* && "$out" == *liblz4* && "$out" == *zlib* &&
	   "$out" == *"libzstd "[0-9]* ]]
}
is "blockfs -V prints blockfs, libfuse, liblz4, zlib and libzstd versions" version_lists_libraries

bfs_end
