#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One tool on a fresh blockfs mount per run: daemon against daemon, or
option string against option string, with the daemon's own cost.

Each round mounts every (daemon, options) pair afresh, runs the tool on
NAME once, reads the daemon's minor faults and CPU from /proc, unmounts,
then runs the tool on the plain twin DIR/../plain/NAME in the page cache.
Reports medians and plain / blockfs.

    bench/fresh_mount.py [--blockfs BIN ...] [--opts 'O1' --opts 'O2' ...] \\
        [--tool md5sum] [--reps 7] DIR NAME

As root. For example: bench/fresh_mount.py --opts cache_size=128M
--opts cache_size=16M bench/data/quick/lz4 text.tar
"""
import argparse
import os
import statistics
import subprocess as sp
import tempfile
import time

import benchdata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(argv):
    t = time.perf_counter()
    sp.run(argv, stdout=sp.DEVNULL, check=True)
    return time.perf_counter() - t


def one(binary, opts, a, tool, mnt):
    d = sp.Popen([binary, "-f", a.dir, mnt, "-o", benchdata.first_mount(opts)])
    try:
        while sp.run(["mountpoint", "-q", mnt]).returncode:
            if d.poll() is not None:
                raise SystemExit(f"{binary} -o {opts!r} did not mount")
            time.sleep(0.02)
        path = os.path.join(mnt, a.name)
        os.stat(path)
        wall = timed(tool + [path])
        f = open(f"/proc/{d.pid}/stat").read().rsplit(")", 1)[1].split()
        minflt, cpu = int(f[7]), (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    finally:
        sp.run(["fusermount3", "-u", mnt])
        d.wait()
    return wall, minflt, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blockfs", action="append")
    ap.add_argument("--opts", action="append")
    ap.add_argument("--tool", default="md5sum", help="command, split on spaces")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("dir")
    ap.add_argument("name")
    a = ap.parse_args()
    tool = a.tool.split()
    pairs = [(b, o) for b in (a.blockfs or [os.path.join(REPO, "build/src/blockfs")])
             for o in (a.opts or [""])]
    plain = os.path.join(os.path.dirname(os.path.abspath(a.dir)), "plain", a.name)
    mnt = tempfile.mkdtemp(prefix="blockfs-fresh.")
    res = {p: [] for p in pairs}
    plains = []
    try:
        for _ in range(a.reps):
            for p in pairs:
                res[p].append(one(p[0], p[1], a, tool, mnt))
            plains.append(timed(tool + [plain]))
    finally:
        os.rmdir(mnt)
    pm = statistics.median(plains)
    print(f"{a.dir} {a.name}, {a.tool}, fresh mount per run: plain file {pm * 1000:.0f} ms "
          f"(median of {a.reps})")
    print("| daemon | -o | median ms | plain / blockfs | daemon minor faults | daemon CPU s |")
    print("|---|---|---:|---:|---:|---:|")
    for (b, o), r in res.items():
        w = statistics.median(x[0] for x in r)
        print(f"| {b} | {o or '(none)'} | {w * 1000:.0f} | {pm / w:.3f} | "
              f"{statistics.median(x[1] for x in r):,.0f} | "
              f"{statistics.median(x[2] for x in r):.2f} |")


if __name__ == "__main__":
    main()
