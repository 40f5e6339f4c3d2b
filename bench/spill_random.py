#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Random reads inside one big zstd frame / xz block, with and without the spill.

    bench/spill_random.py [--mib 128] [--reads 30] [--rounds 3] [--only zstd,xz-T1]

Uses bench/codecs.py's files (bench/data/codecs/MIBM/, written by it).
Each round mounts the file's directory twice, with -o spill_size=0 and with
the default spill, and on each: the first read (4 KiB at offset 0, which
proves the frame), then READS reads of 64 KiB with O_DIRECT (each reaches
the daemon) at seeded random 4 KiB-aligned offsets, timed together. The
daemon's CPU time and the root's spill counters are printed beside.
"""
import argparse
import mmap
import os
import random
import statistics
import subprocess as sp
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKFS = os.path.join(REPO, "build", "src", "blockfs")
FILES = {"zstd": "one.zst", "xz-T1": "one.xz"}


def cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stats(mnt):
    v = os.getxattr(mnt, "user.blockfs.stats").decode()
    return {k: int(n) for k, n in (line.split() for line in v.splitlines())}


def run(src, name, opts, reads, seed):
    """(seconds of the first read, seconds of READS random reads, daemon CPU, spill reads)."""
    mnt = tempfile.mkdtemp(prefix="blockfs-spill.")
    p = sp.Popen([BLOCKFS, "-f", src, mnt, "-o", "index_cache=off" + opts])
    while not os.path.ismount(mnt):
        if p.poll() is not None:
            raise SystemExit("blockfs did not mount")
        time.sleep(0.01)
    path = os.path.join(mnt, name)
    size = os.stat(path).st_size
    buf = mmap.mmap(-1, 65536)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    t = time.perf_counter()
    os.preadv(fd, [memoryview(buf)[:4096]], 0)
    first = time.perf_counter() - t
    r = random.Random(seed)
    t = time.perf_counter()
    for _ in range(reads):
        off = r.randrange((size - 65536) >> 12) << 12
        if os.preadv(fd, [buf], off) != 65536:
            raise SystemExit("short read")
    rand = time.perf_counter() - t
    os.close(fd)
    c = cpu(p.pid)
    spilled = stats(mnt).get("spill_reads", 0)
    sp.run(["fusermount3", "-u", mnt], check=True)
    p.wait()
    os.rmdir(mnt)
    return first, rand, c, spilled


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--reads", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="zstd,xz-T1")
    a = ap.parse_args()
    top = os.path.join(REPO, "bench", "data", "codecs", "%dM" % a.mib)
    print("%d MiB, %d random 64 KiB O_DIRECT reads after the first read, %d rounds "
          "(medians; ranges in brackets)\n" % (a.mib, a.reads, a.rounds))
    print("| writer | spill | first read | random reads | per read | daemon CPU | spill reads |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for w in a.only.split(","):
        res = {"off": [], "on": []}
        for i in range(a.rounds):
            for mode, opts in (("off", ",spill_size=0"), ("on", "")):
                res[mode].append(run(os.path.join(top, w), FILES[w].rsplit(".", 1)[0], opts,
                                     a.reads, i))
        for mode in ("off", "on"):
            rs = res[mode]
            first = [x[0] for x in rs]
            rand = [x[1] for x in rs]
            print("| %s | %s | %.3f s | %.3f s [%.3f-%.3f] | %.2f ms | %.2f s | %d |" % (
                w, "spill_size=0" if mode == "off" else "default (1G)",
                statistics.median(first), statistics.median(rand), min(rand), max(rand),
                1000 * statistics.median(rand) / a.reads,
                statistics.median(x[2] for x in rs), statistics.median(x[3] for x in rs)))


if __name__ == "__main__":
    main()
