#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The kernel's read-ahead into a blockfs mount, on one long-lived mount.

tools/bench mounts afresh for every run; this keeps one mount and, before
each pass, drops the file from blockfs's cache and the kernel's with
`setfattr -n user.blockfs.advice -v dontneed`, then sets the mount's bdi
read_ahead_kb by hand. Each round runs every value once, then the same
tool on the plain file (page cache), so the ratio compares neighbours.

    bench/readahead.py [--blockfs build/src/blockfs] [--reps 7] \\
        [--tool md5sum] DIR NAME [KB ...]

DIR is a directory of compressed files (for example bench/data/quick/lz4,
which tools/bench makes), NAME the file as the mount shows it, and its
plain twin is DIR/../plain/NAME. As root.
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blockfs", default=os.path.join(REPO, "build/src/blockfs"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--tool", default="md5sum", help="command, split on spaces")
    ap.add_argument("dir")
    ap.add_argument("name")
    ap.add_argument("kb", nargs="*", type=int, default=[128, 512, 1024, 4096])
    a = ap.parse_args()
    tool = a.tool.split()
    plain = os.path.join(os.path.dirname(os.path.abspath(a.dir)), "plain", a.name)
    mnt = tempfile.mkdtemp(prefix="blockfs-ra.")
    sp.run([a.blockfs, a.dir, mnt, "-o", benchdata.first_mount("")], check=True)
    dev = sp.run(["mountpoint", "-d", mnt], capture_output=True, text=True).stdout.strip()
    bdi = f"/sys/class/bdi/{dev}/read_ahead_kb"
    before = open(bdi).read().strip()
    times = {kb: [] for kb in a.kb}
    plains = []
    try:
        for _ in range(a.reps):
            for kb in a.kb:
                with open(bdi, "w") as f:
                    f.write(str(kb))
                sp.run(["setfattr", "-n", "user.blockfs.advice", "-v", "dontneed",
                        os.path.join(mnt, a.name)], check=True)
                times[kb].append(timed(tool + [os.path.join(mnt, a.name)]))
            plains.append(timed(tool + [plain]))
    finally:
        with open(bdi, "w") as f:
            f.write(before)
        sp.run(["fusermount3", "-u", mnt])
        os.rmdir(mnt)
    p = statistics.median(plains)
    print(f"{a.dir} {a.name}, {a.tool}: plain file {p * 1000:.0f} ms (median of {a.reps})")
    print("| read_ahead_kb | median ms | min | max | plain / blockfs |")
    print("|---:|---:|---:|---:|---:|")
    for kb in a.kb:
        m = statistics.median(times[kb])
        print(f"| {kb} | {m * 1000:.0f} | {min(times[kb]) * 1000:.0f} | "
              f"{max(times[kb]) * 1000:.0f} | {p / m:.3f} |")


if __name__ == "__main__":
    main()
