#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The cost of one FUSE round trip through blockfs, loop against loop.

A program that asks one thing at a time (a getxattr of user.blockfs.format,
answered from memory) waits for the daemon's reply each time, so the time
per call is the round trip: the kernel waking a daemon thread, the answer,
the kernel waking the program. Each round mounts every variant afresh and
times N calls on each, back to back; the ratio to --base is taken within
the round. As root:

    bench/roundtrip.py [--rounds 5] [--calls 20000] [--load] \\
        [--variant NAME=OPTIONS[:BINARY] ...] [--base NAME]

Default variants: def (blockfs's loop), bp0 (busy_poll=0), lf
(loop=libfuse), s (-s: one thread of blockfs's loop) and lfs (libfuse's
single-threaded loop). --load runs a busy loop on one core beside.
"""
import argparse
import os
import statistics
import subprocess as sp
import tempfile
import time

import benchdata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(REPO, "build", "src", "blockfs")
DEFAULT = ["def=", "bp0=busy_poll=0", "lf=loop=libfuse", "s=-s", "lfs=-s,loop=libfuse"]


def per_call(binary, opts, src, mnt, calls):
    """Microseconds per getxattr on a fresh mount (the best of 3 passes)."""
    argv = [binary, "-f"]
    o = [x for x in opts.split(",") if x]
    if "-s" in o:
        argv.append("-s")
        o.remove("-s")
    argv += [src, mnt, "-o", benchdata.first_mount(",".join(o))]
    d = sp.Popen(argv)
    try:
        while sp.run(["mountpoint", "-q", mnt]).returncode:
            if d.poll() is not None:
                raise SystemExit(f"{binary} {argv[2:]} did not mount")
            time.sleep(0.02)
        path = os.path.join(mnt, "f")
        best = None
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(calls):
                os.getxattr(path, "user.blockfs.format")
            us = (time.perf_counter() - t) / calls * 1e6
            best = us if best is None else min(best, us)
        return best
    finally:
        sp.run(["umount", mnt], check=False)
        d.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--variant", action="append", help="NAME=OPTIONS[:BINARY]")
    ap.add_argument("--base", default="lf")
    a = ap.parse_args()

    variants = {}
    for v in a.variant or DEFAULT:
        name, _, rest = v.partition("=")
        opts, _, binary = rest.partition(":")
        variants[name] = (opts, binary or BINARY)
    if a.base not in variants:
        raise SystemExit(f"--base {a.base}: no such variant")

    res = {v: [] for v in variants}
    ratio = {v: [] for v in variants}
    load = sp.Popen(["sh", "-c", "while :; do :; done"]) if a.load else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            src, mnt = os.path.join(tmp, "src"), os.path.join(tmp, "mnt")
            os.mkdir(src)
            os.mkdir(mnt)
            sp.run(["sh", "-c", f"echo roundtrip | lz4 -q -B4 - {src}/f.lz4"], check=True)
            for r in range(a.rounds):
                got = {}
                for v, (opts, binary) in variants.items():
                    got[v] = per_call(binary, opts, src, mnt, a.calls)
                    res[v].append(got[v])
                for v in variants:
                    ratio[v].append(got[v] / got[a.base])
    finally:
        if load:
            load.kill()
    print("one getxattr round trip, %d paired rounds%s; ratio to %s within each round\n"
          % (a.rounds, ", a busy loop on one core beside" if a.load else "", a.base))
    print("| variant | options | µs per call (median) | range | / %s | range |" % a.base)
    print("|---|---|---:|---:|---:|---:|")
    for v, (opts, _) in variants.items():
        print("| %s | `%s` | %.1f | %.1f-%.1f | %.2f | %.2f-%.2f |"
              % (v, opts or "(defaults)", statistics.median(res[v]), min(res[v]), max(res[v]),
                 statistics.median(ratio[v]), min(ratio[v]), max(ratio[v])))


if __name__ == "__main__":
    main()
