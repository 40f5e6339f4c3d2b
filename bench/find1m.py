#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""find over a tree on a first mount against find on its backing directory.

    bench/find1m.py BLOCKFS ROUNDS [FILES]

The tree is bench/trees.py's (make --files FILES, default 1000000):
paired rounds, warm (the backing directory's dentries cached by one find
before) then cold (sync; drop_caches 3 before every run); each blockfs
run on a fresh mount with -o index_cache=off. Per round: backing time,
blockfs time, the daemon's VmHWM (KiB) after find; then per mode the
medians, ranges, the ratio within rounds and the VmHWM.
"""
import os, subprocess as sp, time, tempfile, statistics, sys
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1]; ROUNDS = int(sys.argv[2])
T = os.path.join(REPO, "bench", "data", "trees", sys.argv[3] if len(sys.argv) > 3 else "1000000", "lz4")
def hwm(pid):
    for l in open("/proc/%d/status" % pid):
        if l.startswith("VmHWM"): return int(l.split()[1])
def run(kind, cold):
    if cold: sp.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True, check=True)
    if kind == "backing":
        t = time.perf_counter(); sp.run("find . > /dev/null", shell=True, cwd=T, check=True)
        return time.perf_counter() - t, 0
    m = tempfile.mkdtemp(prefix="bfs1m.")
    p = sp.Popen([BIN, "-f", T, m, "-o", "index_cache=off"])
    while not os.path.ismount(m): time.sleep(0.01)
    t = time.perf_counter(); sp.run("find . > /dev/null", shell=True, cwd=m, check=True)
    d = time.perf_counter() - t
    h = hwm(p.pid)
    sp.run(["fusermount3", "-u", m], check=True); p.wait(); os.rmdir(m)
    return d, h
sp.run("find %s > /dev/null" % T, shell=True)
for mode in ("warm", "cold"):
    res = {"backing": [], "blockfs": []}; h = []; rat = []
    for r in range(ROUNDS):
        order = ["backing", "blockfs"] if r % 2 == 0 else ["blockfs", "backing"]
        got = {}
        for k in order:
            got[k] = run(k, mode == "cold")
        res["backing"].append(got["backing"][0]); res["blockfs"].append(got["blockfs"][0])
        h.append(got["blockfs"][1]); rat.append(got["blockfs"][0] / got["backing"][0])
        print(mode, r, "%.2f %.2f %d" % (got["backing"][0], got["blockfs"][0], got["blockfs"][1]), flush=True)
    print("| %s | %.2f s (%.2f-%.2f) | %.2f s (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.1f MiB (max %.1f) |" % (
        mode, statistics.median(res["backing"]), min(res["backing"]), max(res["backing"]),
        statistics.median(res["blockfs"]), min(res["blockfs"]), max(res["blockfs"]),
        statistics.median(rat), min(rat), max(rat), statistics.median(h) / 1024, max(h) / 1024), flush=True)
