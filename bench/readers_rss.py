#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The daemon's peak memory while 16 readers read the new formats at once.

    bench/readers_rss.py [--mib 128] [--readers 16] [--opts cache_size=32M] [--only xz-T2,...]

The files are bench/codecs.py's (made there if missing): one mount of a
directory that links them all, then READERS processes at once, half
reading whole files with cat (a file each, in turn), half making 200
random 4 KiB reads (seeded), spread over the files. The daemon's VmHWM
(peak resident set) is read from /proc at the end, beside its VmRSS at
mount and the bound the man page gives: cache_size + 32 MiB, plus one
decoder's window per stream being decoded.
"""
import argparse
import importlib.util
import os
import random
import subprocess as sp
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKFS = os.path.join(REPO, "build", "src", "blockfs")
# bench/codecs.py's files and writers (loaded by path: "codecs" is a stdlib name)
_spec = importlib.util.spec_from_file_location("bench_codecs",
                                               os.path.join(REPO, "bench", "codecs.py"))
bc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bc)

RANDOM_READER = r"""
import os, random, sys
r = random.Random(int(sys.argv[1]))
fds = [os.open(p, os.O_RDONLY) for p in sys.argv[2:]]
for _ in range(200):
    fd = r.choice(fds)
    size = os.fstat(fd).st_size
    os.pread(fd, 4096, r.randrange(size - 4096))
"""


def status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def stats(path):
    """user.blockfs.stats of @path as a dict (the root's has cache_bytes)."""
    try:
        raw = os.getxattr(path, "user.blockfs.stats").decode()
    except OSError:
        return {}
    return {k: int(v) for k, v in (line.split() for line in raw.splitlines() if line)}


def sampler(pid, mnt, stop, peak):
    """Every 20 ms until @stop: the daemon's VmRSS and the cache's bytes;
    @peak gets each one's largest, and what the other was at the RSS peak."""
    while not stop.is_set():
        rss = status(pid, "VmRSS")
        cache = stats(mnt).get("cache_bytes", 0)
        peak["cache"] = max(peak.get("cache", 0), cache)
        if rss > peak.get("rss", 0):
            peak["rss"], peak["cache_at_rss"] = rss, cache
        time.sleep(0.02)


def window(path):
    """One decoder's window for @path, in bytes, as blockfs(8) counts it:
    zstd -lv's window (a frame with its content size decodes whole: the
    largest frame), xz -lvv's memory plus the largest block when blocks
    decode whole (up to 64 MiB), 100 kB + 4 x the block size for bzip2."""
    if path.endswith(".zst"):
        out = sp.run(["zstd", "-lv", path], capture_output=True, text=True).stdout
        win = max(int(line.split("(")[1].split()[0]) for line in out.splitlines()
                  if line.startswith("Window Size:"))
        usize = int(sp.run(["zstd", "-dc", path], stdout=sp.PIPE).stdout.__len__())
        frames = sum(int(line.split(":")[1]) for line in out.splitlines()
                     if line.startswith("# Zstandard Frames:"))
        # pzstd's frames (single segment, content size given) decode whole
        return max(win, usize // frames) if frames > 1 else win
    if path.endswith(".xz"):
        out = sp.run(["xz", "-lvv", "--robot", path], capture_output=True, text=True).stdout
        mem = blk = 0
        for line in out.splitlines():
            f = line.split("\t")
            if f[0] == "summary":
                mem = int(f[1])
            elif f[0] == "block":
                blk = max(blk, int(f[7]))
        return mem + (blk if blk <= 64 << 20 else 0)
    with open(path, "rb") as f:
        level = f.read(4)[3] - ord("0")
    return 100000 + 4 * level * 100000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--readers", type=int, default=16)
    ap.add_argument("--opts", default="")
    ap.add_argument("--only", help="comma-separated writers (default: all)")
    a = ap.parse_args()
    _, _, dirs = bc.files(a.mib)
    src = tempfile.mkdtemp(prefix="bench-rss-src.")
    src_of = {}
    for n, d in dirs.items():
        if a.only and n not in a.only.split(","):
            continue
        backing = bc.WRITERS[n][0]
        shown = n + "." + backing.rsplit(".", 1)[1]
        src_of[n] = os.path.join(d, backing)	# shown as n (the suffix goes)
        os.link(src_of[n], os.path.join(src, shown))
    mnt = tempfile.mkdtemp(prefix="bench-rss.")
    opts = "index_cache=off" + ("," + a.opts if a.opts else "")
    p = sp.Popen([BLOCKFS, "-f", src, mnt, "-o", opts])
    try:
        while not os.path.ismount(mnt):
            if p.poll() is not None:
                raise SystemExit("blockfs did not mount")
            time.sleep(0.01)
        files = sorted(os.path.join(mnt, f) for f in os.listdir(mnt))
        for f in files:
            os.stat(f)		# the walks, before the readers
        rss0 = status(p.pid, "VmRSS")
        peak, stop = {}, threading.Event()
        th = threading.Thread(target=sampler, args=(p.pid, mnt, stop, peak))
        th.start()
        t = time.perf_counter()
        procs = []
        for i in range(a.readers):
            if i % 2 == 0:
                f = files[(i // 2) % len(files)]
                procs.append(sp.Popen(["cat", f], stdout=sp.DEVNULL))
            else:
                procs.append(sp.Popen(["python3", "-c", RANDOM_READER, str(i)] + files))
        bad = sum(q.wait() != 0 for q in procs)
        dt = time.perf_counter() - t
        hwm = status(p.pid, "VmHWM")
        stop.set()
        th.join()
        st = stats(mnt)
    finally:
        sp.run(["fusermount3", "-u", mnt], check=False)
        p.wait()
        os.rmdir(mnt)
        for f in os.listdir(src):
            os.unlink(os.path.join(src, f))
        os.rmdir(src)
    print("%d readers (%d cat, %d random) over %s; mount -o %s" % (
        a.readers, (a.readers + 1) // 2, a.readers // 2,
        ", ".join(os.path.basename(f) for f in files), opts))
    print("wall %.1f s, failed readers %d" % (dt, bad))
    print("daemon VmRSS after the first stats: %.0f MiB; peak (VmHWM): %.0f MiB" % (
        rss0 / 2**20, hwm / 2**20))
    print("sampled every 20 ms: peak VmRSS %.0f MiB with cache_bytes %.0f MiB there; "
          "peak cache_bytes %.0f MiB (cache_limit %.0f MiB)" % (
              peak.get("rss", 0) / 2**20, peak.get("cache_at_rss", 0) / 2**20,
              peak.get("cache", 0) / 2**20, st.get("cache_limit", 0) / 2**20))
    # blockfs(8)'s bound: cache_size + 32 MiB + one window per stream being
    # decoded: each cat reader's file's, and each random reader's largest
    # (it reads one file at a time, any of them)
    win = {os.path.basename(f): window(src_of[os.path.basename(f)])
           for f in files}
    cats = [os.path.basename(files[(i // 2) % len(files)]) for i in range(0, a.readers, 2)]
    bound = st.get("cache_limit", 0) + (32 << 20) + sum(win[c] for c in cats) + \
        (a.readers // 2) * max(win.values())
    print("windows (MiB): %s" % ", ".join("%s %.2f" % (n, w / 2**20) for n, w in sorted(win.items())))
    print("bound: cache_size + 32 MiB + cat readers' windows %.0f MiB + %d random x %.0f MiB"
          " = %.0f MiB; peak %s it" % (sum(win[c] for c in cats) / 2**20, a.readers // 2,
                                      max(win.values()) / 2**20, bound / 2**20,
                                      "within" if hwm <= bound else "OVER"))


if __name__ == "__main__":
    main()
