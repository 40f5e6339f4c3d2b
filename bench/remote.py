#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""SOURCE over a network: a stock `lz4 -B4` file on sshfs with a delay.

    bench/remote.py [--size-mib 512] [--rounds 5] [--delay-ms 2]
                    [--variants net,lz4dc,bfs-first,bfs-cached]
                    [--name NAME] [--label TEXT] [--binary BLOCKFS]

The network is real and private: a sshd started here on 127.0.0.1 (keys
made for the run), tests/integration/delay_proxy.py in front of it adding
--delay-ms each way (2: a 4 ms round trip), and sshfs through the proxy,
all torn down at the end. Variants, each on a fresh sshfs mount with the
kernel's caches dropped before it (as root: echo 3 > drop_caches), so
that every byte crosses the network:

    net         cat FILE.lz4 > /dev/null on sshfs: the network's floor
    lz4dc       lz4 -dc FILE.lz4 > /dev/null on sshfs: what blockfs is for
    bfs-first   blockfs on the sshfs mount, -o index_cache=off: ls -l of
                the mount (the first stat, which walks the file), then cat
    bfs-cached  blockfs with -o index_cache=DIR, its entry made by an
                untimed mount just before on the same sshfs mount (then the
                caches dropped): ls -l, then cat

and, asked for with --variants:

    gzdc-bgzf   gzip -dc FILE.gz | md5sum, a BGZF file without .gzi
    bfs-bgzf    md5sum of it through a first blockfs mount (index_cache=off)
    gzdc-gzip   gzip -dc FILE.gz | md5sum, a plain gzip -6 file
    bfs-gzip    md5sum of it through a first blockfs mount
    bfs-random  200 random 4 KiB preads of the lz4 file through blockfs
                with its index cached (as bfs-cached), caches dropped
                first: seconds per read, and the daemon's backing reads
                per read (each a request to sshfs)

(bfs-bgzf and bfs-gzip are taken as ratios to their gzip -dc variant.)

sshfs runs with -o noforget: it numbers inodes in the order they are looked
up and, without it, numbers a file anew once the kernel forgets it, and
blockfs's index cache names entries by device and inode number, so an
entry would not be found after drop_caches. (Across sshfs mounts the
device number changes too: an index cache does not outlive an sshfs
mount; tests/README.md, "Remote SOURCE".)

Paired rounds: each round runs every variant once, starting at another
variant each round; ratios are taken to lz4dc within the round; the
report gives medians and ranges over the rounds, with the blockfs
daemon's CPU time (user + system, from its start to the end of its
cat) and the reader's (the timed commands and their shell), and the
daemon's backing reads (user.blockfs.stats backing_syscalls). The whole
of the table is printed and written to bench/results/remote/DATE-COMMIT/NAME.md
(and .json). Data: --size-mib of Debian's linux-source tarball
(benchdata.linux_text) under bench/data/remote/, or generated log-like
text where that package is not installed (the report says which).
As root; needs openssh-server, sshfs, lz4.
"""
import argparse
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess as sp
import sys
import tempfile
import time

import benchdata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "bench", "data", "remote")
RESULTS = os.path.join(REPO, "bench", "results", "remote", "%s-%s" % (
    time.strftime("%Y-%m-%d"),
    sp.run(["git", "-C", REPO, "rev-parse", "--short=7", "HEAD"],
                   capture_output=True, text=True).stdout.strip() or "nogit"))
PROXY = os.path.join(REPO, "tests", "integration", "delay_proxy.py")
SSHD = "/usr/sbin/sshd"

VARIANTS = ["net", "lz4dc", "bfs-first", "bfs-cached", "gzdc-bgzf", "bfs-bgzf", "gzdc-gzip",
            "bfs-gzip", "bfs-random"]
DEFAULT_VARIANTS = VARIANTS[:4]
# the variant each one's ratio is taken to, within the round (default lz4dc)
BASE = {"bfs-bgzf": "gzdc-bgzf", "bfs-gzip": "gzdc-gzip"}
# the export directory (under bench/data/remote/) and file each variant reads
EXPORT = {"gzdc-bgzf": ("export-bgzf", "text.gz"), "bfs-bgzf": ("export-bgzf", "text"),
          "gzdc-gzip": ("export-gzip", "text.gz"), "bfs-gzip": ("export-gzip", "text")}
RANDOM_READS = 200


def gen_text(path, size):
    """@size bytes of log-like text, the same for the same size."""
    r = random.Random(size)
    words = ["GET", "PUT", "POST", "/index.html", "/api/v1/items", "/api/v2/users", "200",
             "204", "301", "404", "500", "ok", "slow", "cache", "miss", "hit", "user",
             "session", "checkpoint", "request", "timeout", "retry", "upstream", "db"]
    words += ["".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(3, 10)))
              for _ in range(4000)]
    done, i = 0, 0
    with open(path + ".tmp", "wb") as f:
        while done < size:
            lines = []
            for _ in range(8192):
                lines.append("%010d %s\n" % (i, " ".join(r.choices(words, k=r.randint(3, 14)))))
                i += 1
            chunk = "".join(lines).encode()[:size - done]
            f.write(chunk)
            done += len(chunk)
    os.rename(path + ".tmp", path)


def prepare(size):
    """(export dir holding text.lz4, uncompressed size, where the text came from)"""
    os.makedirs(DATA, exist_ok=True)
    text = os.path.join(DATA, "text")
    try:
        text, made = benchdata.linux_text(DATA, size)
        origin = "Debian's linux-source tarball"
    except SystemExit:
        made = not (os.path.exists(text) and os.path.getsize(text) == size)
        if made:
            gen_text(text, size)
        origin = "generated log-like text (no linux-source package here)"
    export = os.path.join(DATA, "export")
    lz = os.path.join(export, "text.lz4")
    if made or not os.path.exists(lz):
        os.makedirs(export, exist_ok=True)
        sp.run(["lz4", "-q", "-f", "-B4", text, lz], check=True)
    for d, cmd in (("export-bgzf", "bgzip -c"), ("export-gzip", "gzip -6 -c")):
        gz = os.path.join(DATA, d, "text.gz")
        if made or not os.path.exists(gz):
            os.makedirs(os.path.dirname(gz), exist_ok=True)
            sp.run("%s %s > %s.tmp && mv %s.tmp %s" % (cmd, text, gz, gz, gz), shell=True,
                   check=True)
    return export, size, origin


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(what, pred, secs, proc=None):
    deadline = time.time() + secs
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise SystemExit("%s: the process exited (%s)" % (what, proc.returncode))
        if time.time() > deadline:
            raise SystemExit("no %s after %d s" % (what, secs))
        time.sleep(0.05)


def cpu_of(pid):
    """User + system CPU seconds of @pid, all its threads."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def drop_caches():
    if os.geteuid() == 0:
        sp.run(["sync"], check=False)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")


class Server:
    """sshd on 127.0.0.1 and the delaying proxy in front of it."""

    def __init__(self, delay_ms):
        self.dir = tempfile.mkdtemp(prefix="blockfs-remote-bench.")
        self.sshd = self.proxy = None
        self.made_privsep = False
        d = self.dir
        for name in ("host_ed25519", "id_ed25519"):
            sp.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(d, name)],
                   check=True)
        shutil.copy(os.path.join(d, "id_ed25519.pub"), os.path.join(d, "authorized_keys"))
        if not os.path.isdir("/run/sshd"):
            os.mkdir("/run/sshd", 0o755)
            self.made_privsep = True
        self.sshd_port = free_port()
        conf = os.path.join(d, "sshd_config")
        with open(conf, "w") as f:
            f.write("\n".join([
                "ListenAddress 127.0.0.1", "Port %d" % self.sshd_port,
                "HostKey %s/host_ed25519" % d, "PidFile %s/sshd.pid" % d,
                "AuthorizedKeysFile %s/authorized_keys" % d,
                "PermitRootLogin prohibit-password", "PasswordAuthentication no",
                "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                "X11Forwarding no", "UseDNS no", "Subsystem sftp internal-sftp", ""]))
        with open(os.path.join(d, "ssh_config"), "w") as f:
            f.write("Host *\n\tUser root\n\tIdentityFile %s/id_ed25519\n\tIdentitiesOnly yes\n"
                    "\tBatchMode yes\n\tStrictHostKeyChecking no\n"
                    "\tUserKnownHostsFile /dev/null\n\tLogLevel ERROR\n" % d)
        log = os.path.join(d, "sshd.log")
        self.sshd = sp.Popen([SSHD, "-D", "-f", conf, "-E", log])
        wait_for("sshd", lambda: os.path.exists(log) and "Server listening" in open(log).read(),
                 10, self.sshd)
        pf = os.path.join(d, "proxy.port")
        self.proxy = sp.Popen([sys.executable, PROXY, "--target", str(self.sshd_port),
                               "--delay-ms", str(delay_ms), "--port-file", pf,
                               "--parent", str(os.getpid()), "--lifetime", "86400"],
                              stderr=sp.DEVNULL)
        wait_for("proxy", lambda: os.path.exists(pf), 10, self.proxy)
        self.port = int(open(pf).read())

    def close(self):
        for p in (self.proxy, self.sshd):
            if p and p.poll() is None:
                if p is self.sshd:
                    kids = sp.run(["ps", "-o", "pid=", "--ppid", str(p.pid)],
                                  capture_output=True, text=True).stdout.split()
                    for k in kids:
                        try:
                            os.kill(int(k), signal.SIGTERM)
                        except OSError:
                            pass
                p.terminate()
                try:
                    p.wait(5)
                except sp.TimeoutExpired:
                    p.kill()
                    p.wait()
        if self.made_privsep:
            try:
                os.rmdir("/run/sshd")
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def is_mount(path):
    return os.path.ismount(path)


class Fuse:
    """A FUSE daemon run in the foreground on a fresh mount point."""

    def __init__(self, argv, mnt, what, log):
        self.mnt, self.what = mnt, what
        with open(log, "a") as f:
            self.proc = sp.Popen(argv, stdout=sp.DEVNULL, stderr=f)
        wait_for(what + " mount", lambda: is_mount(mnt), 30, self.proc)

    def close(self):
        if self.proc.poll() is None:
            if is_mount(self.mnt):
                sp.run(["fusermount3", "-u", self.mnt], check=False)
            try:
                self.proc.wait(30)
            except sp.TimeoutExpired:
                sp.run(["fusermount3", "-uz", self.mnt], check=False)
                self.proc.kill()
                self.proc.wait()


def sshfs(server, export, mnt):
    return Fuse(["sshfs", "-f", "-F", os.path.join(server.dir, "ssh_config"),
                 "-o", "IdentityFile=%s/id_ed25519,StrictHostKeyChecking=no,"
                       "UserKnownHostsFile=/dev/null,port=%d,noforget" % (server.dir, server.port),
                 "root@127.0.0.1:" + export, mnt], mnt, "sshfs",
                os.path.join(os.path.dirname(mnt), "sshfs.log"))


def blockfs(binary, src, mnt, opts):
    return Fuse([binary, "-f", src, mnt, "-o", opts], mnt, "blockfs",
                os.path.join(os.path.dirname(mnt), "blockfs.log"))


def clean_work(work):
    """Remove @work without ever descending into a mount left behind."""
    for name in os.listdir(work):
        p = os.path.join(work, name)
        if is_mount(p):
            sp.run(["fusermount3", "-uz", p], check=False)
        if is_mount(p):
            continue
        if os.path.isdir(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            os.unlink(p)
    try:
        os.rmdir(work)
    except OSError:
        print("left behind: %s" % work, file=sys.stderr)


def timed(cmd):
    """(wall seconds, CPU seconds of the command and its children) of sh -c @cmd."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    sp.run(cmd, shell=True, check=True)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def backing_reads(mnt):
    stats = os.getxattr(mnt, "user.blockfs.stats").decode()
    return int(next(l.split()[1] for l in stats.splitlines()
                    if l.startswith("backing_syscalls ")))


def run_variant(v, a, server, export, work):
    """One timed run of variant @v: a dict of measures."""
    s_mnt = tempfile.mkdtemp(prefix="sshfs.", dir=work)
    b_mnt = tempfile.mkdtemp(prefix="bfs.", dir=work)
    icache = os.path.join(work, "icache")
    out = {}
    fs = bfs = None
    if v in EXPORT:
        export = os.path.join(os.path.dirname(export), EXPORT[v][0])
    try:
        fs = sshfs(server, export, s_mnt)
        if v in ("gzdc-bgzf", "gzdc-gzip"):
            drop_caches()
            out["time"], out["reader_cpu"] = timed(
                "gzip -dc %s | md5sum > /dev/null" % os.path.join(s_mnt, EXPORT[v][1]))
            return out
        if v in ("bfs-bgzf", "bfs-gzip"):
            drop_caches()
            bfs = blockfs(a.binary, s_mnt, b_mnt, "index_cache=off")
            out["time"], out["reader_cpu"] = timed(
                "md5sum %s > /dev/null" % os.path.join(b_mnt, EXPORT[v][1]))
            out["daemon_cpu"] = cpu_of(bfs.proc.pid)
            out["backing_reads"] = backing_reads(b_mnt)
            return out
        if v in ("net", "lz4dc"):
            drop_caches()
            cmd = ("cat %s > /dev/null" if v == "net" else "lz4 -dc %s > /dev/null") \
                % os.path.join(s_mnt, "text.lz4")
            out["time"], out["reader_cpu"] = timed(cmd)
            return out
        if v in ("bfs-cached", "bfs-random"):
            shutil.rmtree(icache, ignore_errors=True)
            os.mkdir(icache, 0o700)
            fill = blockfs(a.binary, s_mnt, b_mnt, "index_cache=" + icache)
            try:
                os.stat(os.path.join(b_mnt, "text"))
            finally:
                fill.close()
            opts = "index_cache=" + icache
        else:
            opts = "index_cache=off"
        drop_caches()
        bfs = blockfs(a.binary, s_mnt, b_mnt, opts)
        if v == "bfs-random":
            out.update(random_reads(b_mnt))
            out["daemon_cpu"] = cpu_of(bfs.proc.pid)
            return out
        out["ls"], ls_cpu = timed("ls -l %s > /dev/null" % b_mnt)
        out["cat"], cat_cpu = timed("cat %s > /dev/null" % os.path.join(b_mnt, "text"))
        out["time"] = out["ls"] + out["cat"]
        out["reader_cpu"] = ls_cpu + cat_cpu
        out["daemon_cpu"] = cpu_of(bfs.proc.pid)
        out["backing_reads"] = backing_reads(b_mnt)
        out["size"] = os.stat(os.path.join(b_mnt, "text")).st_size
        return out
    finally:
        if bfs:
            bfs.close()
        if fs:
            fs.close()
        os.rmdir(b_mnt)
        os.rmdir(s_mnt)


def random_reads(mnt):
    """RANDOM_READS preads of 4 KiB at random places, one at a time."""
    path = os.path.join(mnt, "text")
    size = os.stat(path).st_size
    r = random.Random(size)
    offs = [r.randrange(0, size - 4096) & ~4095 for _ in range(RANDOM_READS)]
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)	# no kernel read-ahead
        n0 = backing_reads(mnt)
        t = time.perf_counter()
        for off in offs:
            if len(os.pread(fd, 4096, off)) != 4096:
                raise SystemExit("short read at %d" % off)
        dt = time.perf_counter() - t
        n1 = backing_reads(mnt)
    finally:
        os.close(fd)
    return {"time": dt, "per_read_ms": dt / RANDOM_READS * 1000.0,
            "reads_per_read": (n1 - n0) / RANDOM_READS, "reader_cpu": 0.0}


def fmt_range(xs, f="%.2f"):
    return (f + " (" + f + "-" + f + ")") % (statistics.median(xs), min(xs), max(xs))


def report(a, res, origin, csize, load):
    rounds = len(res["lz4dc"]) if "lz4dc" in res else a.rounds
    lines = []
    if a.label:
        lines.append("**%s**" % a.label)
        lines.append("")
    lines.append("%d MiB of %s as a stock `lz4 -B4` file (%.1f MiB) on sshfs through a proxy "
                 "adding %g ms each way; %d paired rounds, each variant on a fresh sshfs mount "
                 "with the kernel's caches dropped%s. Seconds: median (range); ratio to "
                 "`lz4 -dc` (or the variant named) within each round; the same text as "
                 "BGZF (`bgzip`) and `gzip -6` files for the gzip rows."
                 % (a.size_mib, origin, csize / 1048576.0,
                                                    a.delay_ms, rounds,
                                                    "" if os.geteuid() == 0 else
                                                    " (NOT dropped: not root)"))
    lines.append("")
    lines.append("| variant | what is timed | seconds | / lz4 -dc | daemon CPU s | reader CPU s "
                 "| backing reads |")
    lines.append("|---|---|---:|---:|---:|---:|---:|")
    what = {"net": "cat of the .lz4 (network floor)", "lz4dc": "lz4 -dc > /dev/null",
            "bfs-first": "index_cache=off", "bfs-cached": "index cached",
            "gzdc-bgzf": "BGZF, no .gzi: gzip -dc \\| md5sum",
            "bfs-bgzf": "BGZF, no .gzi: md5sum, first mount (/ gzdc-bgzf)",
            "gzdc-gzip": "gzip -6: gzip -dc \\| md5sum",
            "bfs-gzip": "gzip -6: md5sum, first mount (/ gzdc-gzip)",
            "bfs-random": "%d random 4 KiB preads, index cached" % RANDOM_READS}
    for v in a.variants:
        runs = res[v]
        base = res.get(BASE.get(v, "lz4dc"))
        parts = [("time", what[v])]
        if v in ("bfs-first", "bfs-cached"):
            parts = [("ls", "ls -l (first stat)"), ("cat", "cat"), ("time", "ls -l + cat")]
        if v == "bfs-random":
            parts = [("time", what[v]), ("per_read_ms", "ms per read"),
                     ("reads_per_read", "backing reads per read")]
            base = None
        for key, label in parts:
            xs = [r[key] for r in runs]
            rat = "-"
            if base:
                rat = fmt_range([x / b["time"] for x, b in zip(xs, base)])
            cpu_d = fmt_range([r["daemon_cpu"] for r in runs]) if key == "time" and \
                "daemon_cpu" in runs[0] else ""
            cpu_r = fmt_range([r["reader_cpu"] for r in runs]) if key == "time" else ""
            br = "%d" % statistics.median([r["backing_reads"] for r in runs]) \
                if key == "time" and "backing_reads" in runs[0] else ""
            if v in ("bfs-first", "bfs-cached"):
                label = what[v] + ": " + label
            lines.append("| %s | %s | %s | %s | %s | %s | %s |"
                         % (v, label, fmt_range(xs), rat, cpu_d, cpu_r, br))
    lines.append("")
    lines.append("Command: bench/remote.py --size-mib %d --rounds %d --delay-ms %g%s "
                 "(load average at start: %s)"
                 % (a.size_mib, a.rounds, a.delay_ms,
                    "" if a.variants == DEFAULT_VARIANTS else " --variants " + ",".join(a.variants),
                    load))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mib", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--delay-ms", type=float, default=2.0, help="one-way delay, each direction")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                    help="any of " + ",".join(VARIANTS))
    ap.add_argument("--name", help="result file name (default: SIZE-DELAY)")
    ap.add_argument("--label", help="a line on top of the report (e.g. 'smoke run')")
    ap.add_argument("--binary", default=os.path.join(REPO, "build", "src", "blockfs"))
    a = ap.parse_args()
    a.variants = a.variants.split(",")
    for v in a.variants:
        if v not in VARIANTS:
            raise SystemExit("unknown variant %s (%s)" % (v, ", ".join(VARIANTS)))
    for tool in ("sshfs", "ssh-keygen", "lz4", "fusermount3", "bgzip", "gzip", "md5sum"):
        if not shutil.which(tool):
            raise SystemExit("needs %s (tools/deps.sh --test)" % tool)
    if not os.access(SSHD, os.X_OK):
        raise SystemExit("needs %s (openssh-server)" % SSHD)
    if os.geteuid() != 0:
        print("not root: the kernel's caches are not dropped between variants", file=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load = ", ".join("%.2f" % x for x in os.getloadavg())
    export, _, origin = prepare(a.size_mib << 20)
    csize = os.path.getsize(os.path.join(export, "text.lz4"))
    server = Server(a.delay_ms)
    work = tempfile.mkdtemp(prefix="blockfs-remote-bench.")
    res = {v: [] for v in a.variants}
    try:
        for r in range(a.rounds):
            order = a.variants[r % len(a.variants):] + a.variants[:r % len(a.variants)]
            for v in order:
                m = run_variant(v, a, server, export, work)
                if "size" in m and m["size"] != a.size_mib << 20:
                    raise SystemExit("%s: blockfs shows %d bytes, not %d"
                                     % (v, m["size"], a.size_mib << 20))
                res[v].append(m)
                print("round %d %s: %s" % (r + 1, v, " ".join(
                    "%s=%.3f" % (k, x) if isinstance(x, float) else "%s=%s" % (k, x)
                    for k, x in m.items())), file=sys.stderr, flush=True)
    finally:
        server.close()
        clean_work(work)
    text = report(a, res, origin, csize, load)
    print(text)
    os.makedirs(RESULTS, exist_ok=True)
    name = a.name or "%dMiB-%gms" % (a.size_mib, a.delay_ms)
    with open(os.path.join(RESULTS, name + ".md"), "w") as f:
        f.write(text)
    with open(os.path.join(RESULTS, name + ".json"), "w") as f:
        json.dump({"size_mib": a.size_mib, "delay_ms": a.delay_ms, "rounds": a.rounds,
                   "origin": origin, "compressed_bytes": csize, "load": load,
                   "label": a.label, "runs": res}, f, indent=1)
    print("written: %s.md, .json" % os.path.join(RESULTS, name), file=sys.stderr)


if __name__ == "__main__":
    main()
