#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""`ls -l` of a directory of big plain .gz files on a first mount, in paired rounds.

    bench/gz_listing.py [--files 8] [--mib 128] [--rounds 5]

Each round runs, in turn: `gzip -dc` of every file one after another (what
a user would otherwise wait for); `ls -l` through a fresh blockfs mount
(-o index_cache=off: every mount is a first mount), which must walk every
file to show its exact size; and the same with -o workers=1, which turns
off the side-by-side walks of a listing (walkahead.c), as the build before
them did. Ratios are taken within each round against gzip -dc; the report
gives medians and ranges, and the daemon's CPU time beside the wall time.
The files (log-like text, gzip -6) are made once under
bench/data/gz_listing/.
"""
import argparse
import os
import random
import statistics
import subprocess as sp
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKFS = os.path.join(REPO, "build", "src", "blockfs")


def make(top, files, mib):
    os.makedirs(top, exist_ok=True)
    r = random.Random(8)
    words = [b"GET", b"PUT", b"/index.html", b"/api/v1/items", b"200", b"404", b"ok",
             b"slow", b"cache", b"miss", b"hit", b"user", b"session", b"checkpoint"]
    for i in range(files):
        path = os.path.join(top, "log%d.gz" % i)
        if os.path.exists(path):
            continue
        with open(path + ".tmp", "wb") as out:
            gz = sp.Popen(["gzip", "-6", "-c"], stdin=sp.PIPE, stdout=out)
            left, n = mib << 20, 0
            while left > 0:
                lines = [b"%09d %s %s %d\n" % (n + k, r.choice(words),
                                                b" ".join(r.choices(words, k=4)),
                                                r.randint(0, 1 << 20)) for k in range(20000)]
                chunk = b"".join(lines)[:left]
                gz.stdin.write(chunk)
                left -= len(chunk)
                n += 20000
            gz.stdin.close()
            gz.wait()
        os.rename(path + ".tmp", path)


def cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def gzip_all(top):
    t = time.perf_counter()
    for name in sorted(os.listdir(top)):
        if name.endswith(".gz"):
            with open(os.devnull, "wb") as null:
                sp.run(["gzip", "-dc", os.path.join(top, name)], stdout=null, check=True)
    return time.perf_counter() - t, 0.0


def ls_mounted(top, opts):
    mnt = tempfile.mkdtemp(prefix="blockfs-gzls.")
    p = sp.Popen([BLOCKFS, "-f", top, mnt, "-o", opts])
    while not os.path.ismount(mnt):
        if p.poll() is not None:
            raise SystemExit("blockfs did not mount")
        time.sleep(0.01)
    t = time.perf_counter()
    sp.run(["ls", "-l", mnt], stdout=sp.DEVNULL, check=True)
    dt = time.perf_counter() - t
    c = cpu(p.pid)
    sp.run(["fusermount3", "-u", mnt], check=True)
    p.wait()
    os.rmdir(mnt)
    return dt, c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    top = os.path.join(REPO, "bench", "data", "gz_listing", "%dx%dM" % (a.files, a.mib))
    make(top, a.files, a.mib)
    variants = {
        "gzip -dc, one after another": lambda: gzip_all(top),
        "blockfs ls -l": lambda: ls_mounted(top, "index_cache=off"),
        "blockfs ls -l, workers=1": lambda: ls_mounted(top, "index_cache=off,workers=1"),
    }
    res = {v: [] for v in variants}
    for _ in range(a.rounds):
        for v, fn in variants.items():
            res[v].append(fn())
    base = res["gzip -dc, one after another"]
    print("%d plain .gz files of %d MiB of text (gzip -6), %d paired rounds, "
          "first mounts (-o index_cache=off)\n" % (a.files, a.mib, a.rounds))
    print("| variant | median | range | / gzip -dc | range | daemon CPU |")
    print("|---|---:|---:|---:|---:|---:|")
    for v, rs in res.items():
        t = [x[0] for x in rs]
        ratio = [x[0] / b[0] for x, b in zip(rs, base)]
        print("| %s | %.2f s | %.2f-%.2f | %.2f | %.2f-%.2f | %s |" % (
            v, statistics.median(t), min(t), max(t), statistics.median(ratio), min(ratio),
            max(ratio), "%.2f s" % statistics.median(x[1] for x in rs) if v != "gzip -dc, one after another" else ""))


if __name__ == "__main__":
    main()
