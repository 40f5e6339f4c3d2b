#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""blockfs-pack's speed in paired rounds: builds or option sets against each other.

Each round packs the same text once with every variant, back to back
(starting at another variant each round), input warm in the page cache,
output to a file on the same file system; each variant's time is divided
by the base variant's of the same round, and the report gives the median
ratio over the rounds and its range.

    bench/pack_speed.py [--rounds 5] [--size-mib 512] [--base pack]
                        [--variant NAME=BINARY[:ARGS]] ...

The variant "pack" is build/tools/blockfs-pack with its defaults; add
others, e.g. an older build or other options:
    --variant before=/tmp/old/build/tools/blockfs-pack
    --variant j1=build/tools/blockfs-pack:-j1
Data: the first --size-mib MiB of Debian's linux-source tarball, made once
under bench/data/pack_speed/.
"""
import argparse
import os
import statistics
import subprocess as sp
import time

import benchdata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "bench", "data", "pack_speed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size-mib", type=int, default=512)
    ap.add_argument("--base", default="pack")
    ap.add_argument("--variant", action="append", default=[])
    a = ap.parse_args()
    text, _ = benchdata.linux_text(DATA, a.size_mib << 20)
    variants = {"pack": [os.path.join(REPO, "build", "tools", "blockfs-pack")]}
    for v in a.variant:
        name, spec = v.split("=", 1)
        binary, _, args = spec.partition(":")
        variants[name] = [binary] + args.split()
    sp.run(["cat", text], stdout=sp.DEVNULL, check=True)	# warm
    out = os.path.join(DATA, "out.lz4")
    names = list(variants)
    res = {v: [] for v in names}
    for r in range(a.rounds):
        for v in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.monotonic()
            sp.run(variants[v] + ["-q", "-f", "-o", out, text], check=True)
            res[v].append(time.monotonic() - t0)
            if sp.run(["lz4", "-t", out], stdout=sp.DEVNULL, stderr=sp.DEVNULL).returncode:
                print("# %s: its output fails lz4 -t" % v)
    os.unlink(out)
    print("%d MiB of linux-source text, %d paired rounds; time per pack, median and range; "
          "ratio to %s within each round" % (a.size_mib, a.rounds, a.base))
    print()
    print("| variant | median | range | / %s (median) | range |" % a.base)
    print("|---|---:|---:|---:|---:|")
    for v in names:
        rat = [x / y for x, y in zip(res[v], res[a.base])]
        print("| %s | %.3f s | %.3f-%.3f s | %.2f | %.2f-%.2f |"
              % (v, statistics.median(res[v]), min(res[v]), max(res[v]),
                 statistics.median(rat), min(rat), max(rat)))


if __name__ == "__main__":
    main()
