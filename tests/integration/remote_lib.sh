# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2034 # RMT_* are read by the scripts
#
# A real network filesystem for a test to put SOURCE on, sourced after
# lib.sh and bfs_begin (it lives in $T and is undone by bfs_begin's EXIT
# trap): a private sshd on 127.0.0.1, a delaying TCP proxy in front of it
# (delay_proxy.py) and an sshfs mount through the proxy.
#
#	remote_begin DELAY_MS		# skip (77) unless sshd and sshfs can run
#	remote_mount EXPORT MNT		# sshfs root@127.0.0.1:EXPORT on MNT
#	... blockfs on MNT ...
#	(the EXIT trap: blockfs unmounted, then sshfs, then sshd and the proxy)
#
# Processes, all children of the script: sshd -D (RMT_SSHD_PID, port
# RMT_SSHD_PORT), the proxy (RMT_PROXY_PID, port RMT_PROXY_PORT), sshfs -f
# (RMT_SSHFS_PID). remote_proxy_kill and remote_proxy_start cut and
# restore the network; kill -STOP/-CONT "$RMT_PROXY_PID" freeze it.
# sshfs runs with reconnect and ServerAliveInterval=1, ServerAliveCountMax=3:
# a server gone for longer than about 4 s ends the ssh connection, and
# the next request makes a new one (tests/README.md, "Remote SOURCE",
# says what a reader sees meanwhile).

RMT_DIR=			# $T/remote: keys, configs, logs
RMT_DELAY=
RMT_SSHD_PID=
RMT_SSHD_PORT=
RMT_PROXY_PID=
RMT_PROXY_PORT=
RMT_SSHFS_PID=
RMT_SSHFS_MNT=
RMT_SSHFS_LOG=
RMT_MADE_PRIVSEP=0
RMT_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# remote_free_port: a TCP port on 127.0.0.1 nobody listens on just now.
remote_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# remote_wait_for WHAT SECONDS CMD...: poll CMD every 0.1 s until it
# succeeds; 1 after SECONDS.
remote_wait_for() {
	local what=$1 secs=$2 deadline=$((SECONDS + $2))
	shift 2
	until "$@" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			diag "no $what after $secs s"
			return 1
		fi
		sleep 0.1
	done
}

# remote_begin DELAY_MS: keys, sshd on a free port, the proxy in front of
# it with DELAY_MS one-way delay. Skips the test (77) where sshd, sshfs or
# ssh-keygen are missing or sshd will not start; registers the teardown.
remote_begin() {
	RMT_DELAY=${1:?usage: remote_begin DELAY_MS}
	[[ -x /usr/sbin/sshd ]] || skip "no /usr/sbin/sshd (openssh-server)"
	bfs_require_tools sshfs ssh ssh-keygen python3
	RMT_DIR=$T/remote
	mkdir -p "$RMT_DIR"
	chmod 700 "$RMT_DIR"
	bfs_at_exit remote_teardown
	ssh-keygen -q -t ed25519 -N '' -f "$RMT_DIR/host_ed25519" -C blockfs-test-host ||
		skip "ssh-keygen cannot make a host key"
	ssh-keygen -q -t ed25519 -N '' -f "$RMT_DIR/id_ed25519" -C blockfs-test-client ||
		skip "ssh-keygen cannot make a key"
	cp "$RMT_DIR/id_ed25519.pub" "$RMT_DIR/authorized_keys"
	# sshd's privilege separation directory is built in: made if missing,
	# removed at exit if made here and still empty
	if [[ ! -d /run/sshd ]]; then
		mkdir -m 755 /run/sshd && RMT_MADE_PRIVSEP=1
	fi
	RMT_SSHD_PORT=$(remote_free_port)
	cat >"$RMT_DIR/sshd_config" <<-EOF
		ListenAddress 127.0.0.1
		Port $RMT_SSHD_PORT
		HostKey $RMT_DIR/host_ed25519
		PidFile $RMT_DIR/sshd.pid
		AuthorizedKeysFile $RMT_DIR/authorized_keys
		PermitRootLogin prohibit-password
		PubkeyAuthentication yes
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		UsePAM no
		StrictModes no
		X11Forwarding no
		AllowTcpForwarding no
		PrintMotd no
		UseDNS no
		LogLevel VERBOSE
		MaxStartups 50
		Subsystem sftp internal-sftp
	EOF
	cat >"$RMT_DIR/ssh_config" <<-EOF
		Host *
			User root
			IdentityFile $RMT_DIR/id_ed25519
			IdentitiesOnly yes
			BatchMode yes
			StrictHostKeyChecking no
			UserKnownHostsFile /dev/null
			LogLevel ERROR
			ConnectTimeout 5
			ServerAliveInterval 1
			ServerAliveCountMax 3
	EOF
	local out
	out=$(/usr/sbin/sshd -t -f "$RMT_DIR/sshd_config" 2>&1) ||
		skip "sshd refuses its test configuration: ${out//$'\n'/; }"
	/usr/sbin/sshd -D -f "$RMT_DIR/sshd_config" -E "$RMT_DIR/sshd.log" &
	RMT_SSHD_PID=$!
	if ! remote_wait_for "sshd listening" 10 grep -q "Server listening" "$RMT_DIR/sshd.log"; then
		tail -n 20 "$RMT_DIR/sshd.log" 2>/dev/null | sed 's/^/#   /'
		skip "sshd does not start here"
	fi
	remote_proxy_start
}

# remote_proxy_start: the delaying proxy, on RMT_PROXY_PORT if set (to
# bring it back on the port sshfs knows), else on a free port.
remote_proxy_start() {
	rm -f "$RMT_DIR/proxy.port"
	python3 "$RMT_HERE/delay_proxy.py" --target "$RMT_SSHD_PORT" --port "${RMT_PROXY_PORT:-0}" \
		--delay-ms "$RMT_DELAY" --port-file "$RMT_DIR/proxy.port" --parent $$ \
		2>>"$RMT_DIR/proxy.log" &
	RMT_PROXY_PID=$!
	remote_wait_for "proxy listening" 10 test -s "$RMT_DIR/proxy.port" || {
		sed 's/^/#   /' "$RMT_DIR/proxy.log"
		return 1
	}
	RMT_PROXY_PORT=$(<"$RMT_DIR/proxy.port")
}

# remote_proxy_kill: the network goes away: every connection through the
# proxy closes at once (sshd's session and ssh both see it).
remote_proxy_kill() {
	[[ -n $RMT_PROXY_PID ]] || return 0
	kill -KILL "$RMT_PROXY_PID" 2>/dev/null
	wait "$RMT_PROXY_PID" 2>/dev/null
	RMT_PROXY_PID=
}

# remote_ssh CMD...: run CMD on the test server, through the proxy.
remote_ssh() {
	ssh -F "$RMT_DIR/ssh_config" -p "$RMT_PROXY_PORT" 127.0.0.1 "$@"
}

# remote_mount EXPORT MNT [SSHFS_OPTION...]: sshfs -f of EXPORT (a local
# directory: the "server side") on MNT through the proxy; waits up to 20 s
# for the mount. Skips the test (77) if sshfs cannot mount here.
remote_mount() {
	local export=$1 mnt=$2 extra=${3:+,$3}
	RMT_SSHFS_MNT=$mnt
	RMT_SSHFS_LOG=$RMT_DIR/sshfs.log
	sshfs -f -F "$RMT_DIR/ssh_config" \
		-o "IdentityFile=$RMT_DIR/id_ed25519,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null" \
		-o "port=$RMT_PROXY_PORT,reconnect,ServerAliveInterval=1,ServerAliveCountMax=3$extra" \
		"root@127.0.0.1:$export" "$mnt" >>"$RMT_SSHFS_LOG" 2>&1 &
	RMT_SSHFS_PID=$!
	if ! remote_wait_for "sshfs mount" 20 is_mounted "$mnt"; then
		tail -n 20 "$RMT_SSHFS_LOG" | sed 's/^/#   /'
		tail -n 20 "$RMT_DIR/sshd.log" | sed 's/^/#   /'
		if kill -0 "$RMT_SSHFS_PID" 2>/dev/null; then
			return 1
		fi
		RMT_SSHFS_PID=
		skip "sshfs cannot mount here"
	fi
}

# remote_umount: sshfs unmounted (lazily if busy) and its process reaped.
remote_umount() {
	[[ -n $RMT_SSHFS_MNT ]] || return 0
	if is_mounted "$RMT_SSHFS_MNT"; then
		fusermount3 -u "$RMT_SSHFS_MNT" 2>/dev/null || fusermount3 -uz "$RMT_SSHFS_MNT" 2>/dev/null ||
			umount -l "$RMT_SSHFS_MNT" 2>/dev/null
	fi
	if [[ -n $RMT_SSHFS_PID ]]; then
		bfs_exited "$RMT_SSHFS_PID" 5 || kill -KILL "$RMT_SSHFS_PID" 2>/dev/null
		wait "$RMT_SSHFS_PID" 2>/dev/null
	fi
	RMT_SSHFS_PID=
}

# remote_teardown: the EXIT trap's part (bfs_at_exit): the blockfs mount
# on top first (bfs_kill), then sshfs, then the proxy, sshd and any
# session process sshd still has. Never fails, never hangs.
# shellcheck disable=SC2317 # invoked by the EXIT trap
remote_teardown() {
	local p
	bfs_kill
	remote_umount
	if [[ -n $RMT_PROXY_PID ]]; then
		kill -CONT "$RMT_PROXY_PID" 2>/dev/null
		remote_proxy_kill
	fi
	if [[ -n $RMT_SSHD_PID ]]; then
		for p in $(ps -o pid= --ppid "$RMT_SSHD_PID" 2>/dev/null); do
			kill -TERM "$p" 2>/dev/null
		done
		kill -TERM "$RMT_SSHD_PID" 2>/dev/null
		bfs_exited "$RMT_SSHD_PID" 5 || kill -KILL "$RMT_SSHD_PID" 2>/dev/null
		wait "$RMT_SSHD_PID" 2>/dev/null
		RMT_SSHD_PID=
	fi
	if ((RMT_MADE_PRIVSEP)); then
		rmdir /run/sshd 2>/dev/null
		RMT_MADE_PRIVSEP=0
	fi
	return 0
}
