#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A random reader beside a sequential stream, on one mount: whose blocks
does blockfs's cache keep?

fio reads 4 KiB at random from file A for --seconds while `cat` streams
file B again and again. The stream's blocks are duplicates of what the
kernel's page cache now holds; if they push A's blocks out of blockfs's
cache, A's reads decode more. Reports A's cache hit ratio and blocks
decoded (from user.blockfs.stats) and fio's IOPS, with and without the
stream, for each daemon given, in alternating rounds.

    bench/stream_vs_random.py [--blockfs BIN ...] [--cache 32M] [--seconds 5] \\
        [--rounds 3] DIR A B

DIR is a directory of compressed files, A and B names as the mount shows
them (for example bench/data/quick/lz4-B4 text.tar bin.tar). As root,
with fio.
"""
import argparse
import os
import signal
import statistics
import subprocess as sp
import tempfile
import time

import benchdata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stats(path):
    out = sp.run(["getfattr", "--absolute-names", "--only-values", "-n", "user.blockfs.stats",
                  path], capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in (ln.split() for ln in out.splitlines() if ln.strip())
            if v.isdigit()}


def one(binary, a, cache, seconds, stream):
    mnt = tempfile.mkdtemp(prefix="blockfs-svr.")
    sp.run([binary, a.dir, mnt, "-o", benchdata.first_mount(f"cache_size={cache}")], check=True)
    try:
        fa, fb = os.path.join(mnt, a.a), os.path.join(mnt, a.b)
        os.stat(fa)
        os.stat(fb)
        before = stats(fa)
        cat = None
        if stream:
            cat = sp.Popen(["sh", "-c", f'while :; do cat "{fb}" > /dev/null; '
                            f'setfattr -n user.blockfs.advice -v dontneed "{fb}"; done'],
                           start_new_session=True)
            time.sleep(0.5)
        fio = sp.run(["fio", "--name=r", f"--filename={fa}", "--rw=randread", "--bs=4k",
                      "--ioengine=psync", f"--runtime={seconds}", "--time_based",
                      "--readonly", "--minimal"], capture_output=True, text=True, check=True)
        after = stats(fa)
        if cat:
            os.killpg(cat.pid, signal.SIGTERM)	# the loop and its cat
            cat.wait()
        iops = float(fio.stdout.split(";")[7])
        hits = after.get("cache_hits", 0) - before.get("cache_hits", 0)
        misses = after.get("cache_misses", 0) - before.get("cache_misses", 0)
        return iops, hits / max(1, hits + misses), misses
    finally:
        sp.run(["fusermount3", "-uz", mnt])
        os.rmdir(mnt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blockfs", action="append")
    ap.add_argument("--cache", default="32M")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("dir")
    ap.add_argument("a")
    ap.add_argument("b")
    a = ap.parse_args()
    bins = a.blockfs or [os.path.join(REPO, "build/src/blockfs")]
    res = {(b, s): [] for b in bins for s in (False, True)}
    for _ in range(a.rounds):
        for b in bins:
            for s in (False, True):
                res[(b, s)].append(one(b, a, a.cache, a.seconds, s))
    print(f"{a.dir}: fio 4 KiB randread on {a.a} for {a.seconds} s, cache_size={a.cache}, "
          f"median of {a.rounds}")
    print("| daemon | stream of " + a.b + " | fio IOPS | A's cache hit ratio | A's misses |")
    print("|---|---|---:|---:|---:|")
    for (b, s), r in res.items():
        print(f"| {b} | {'yes' if s else 'no'} | {statistics.median(x[0] for x in r):,.0f} | "
              f"{statistics.median(x[1] for x in r):.3f} | "
              f"{statistics.median(x[2] for x in r):,.0f} |")


if __name__ == "__main__":
    main()
