#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Where a sequential reader waits: md5sum's pattern (32 KiB read(2)s,
each hashed) on one file, with each read timed.

    bench/read_waits.py FILE [--over US] [--show N]

Prints the total time, the time spent inside read(2), and the reads that
took longer than --over microseconds (200): how many, their sum, and the
first --show (60) as INDEX:MS. Through blockfs the slow ones are READs the
reader waited for (the index tells where in the file: INDEX x 32 KiB);
on the plain file from the page cache there are next to none. A Python
loop costs about a microsecond a read, far below what it looks for;
strace -T adds about 50 us to every read and hides them.
"""
import argparse
import hashlib
import os
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--over", type=float, default=200.0, help="microseconds")
    ap.add_argument("--show", type=int, default=60)
    a = ap.parse_args()
    fd = os.open(a.file, os.O_RDONLY)
    h, ts = hashlib.md5(), []
    t0 = time.perf_counter()
    while True:
        t = time.perf_counter()
        b = os.read(fd, 32768)
        ts.append(time.perf_counter() - t)
        if not b:
            break
        h.update(b)
    total = time.perf_counter() - t0
    os.close(fd)
    slow = [(i, t) for i, t in enumerate(ts) if t > a.over / 1e6]
    print("%s  %s" % (h.hexdigest(), a.file))
    print("total %.3f s, in read %.1f ms, %d reads; %d over %g us: %.1f ms" % (
        total, sum(ts) * 1e3, len(ts), len(slow), a.over, sum(t for _, t in slow) * 1e3))
    if slow:
        print(" ".join("%d:%.2f" % (i, t * 1e3) for i, t in slow[:a.show]))


if __name__ == "__main__":
    main()
