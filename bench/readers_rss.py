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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--readers", type=int, default=16)
    ap.add_argument("--opts", default="")
    ap.add_argument("--only", help="comma-separated writers (default: all)")
    a = ap.parse_args()
    _, _, dirs = bc.files(a.mib)
    src = tempfile.mkdtemp(prefix="bench-rss-src.")
    for n, d in dirs.items():
        if a.only and n not in a.only.split(","):
            continue
        backing = bc.WRITERS[n][0]
        os.link(os.path.join(d, backing), os.path.join(src, n + "." + backing.rsplit(".", 1)[1]))
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


if __name__ == "__main__":
    main()
