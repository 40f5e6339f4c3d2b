#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""blockfs against ratarmount on the same compressed files, in paired rounds.

    bench/ratarmount.py [--mib 128] [--rounds 5] [--only zstd,xz-T2,...]
                        [--ratarmount PATH] [--reads 400]

ratarmount comes from PyPI in a venv (python3 -m venv V; V/bin/pip
install 'ratarmount[full]'); PATH is its ratarmount script (default: the
one in /work/ratar-venv, else on $PATH). The files are bench/codecs.py's
(made there if missing, same text and writers), plus a seekable zstd
file from `blockfs-pack -c zstd` when that blockfs-pack can write one.

Each round, for each file and each of the two filesystems:
  cat   from the mount command to the end of `cat` of the decoded file
        into /dev/null, on a first mount: no index from before (blockfs
        -o index_cache=off; ratarmount with a fresh index folder), so
        each pays for making its index;
  rand  a fresh mount whose index the cat's mount made (blockfs: its
        index cache; ratarmount: its index file), then READS preads of
        4 KiB at seeded random offsets, distinct 4 KiB pages; IOPS.
Ratios are blockfs over ratarmount within a round (cat: time, below 1
means blockfs is faster; rand: IOPS, above 1 means blockfs is faster).
"""
import argparse
import importlib.util
import os
import random
import shutil
import statistics
import subprocess as sp
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKFS = os.path.join(REPO, "build", "src", "blockfs")
PACK = os.path.join(REPO, "build", "tools", "blockfs-pack")
# bench/codecs.py's files and writers (loaded by path: "codecs" is a stdlib name)
_spec = importlib.util.spec_from_file_location("bench_codecs", os.path.join(REPO, "bench", "codecs.py"))
bc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bc)


def wait_mounted(mnt, proc, what):
    deadline = time.time() + 600
    while not os.path.ismount(mnt):
        if proc.poll() is not None or time.time() > deadline:
            raise SystemExit("%s did not mount" % what)
        time.sleep(0.01)


def umount(mnt, proc):
    sp.run(["fusermount3", "-u", mnt], check=True)
    proc.wait()


def mount_blockfs(src_dir, mnt, cache):
    return sp.Popen([BLOCKFS, "-f", src_dir, mnt, "-o", "index_cache=" + (cache or "off")])


def mount_ratarmount(rat, path, mnt, index_dir):
    return sp.Popen([rat, "-f", "--index-folders", index_dir, path, mnt],
                    stdout=sp.DEVNULL, stderr=sp.DEVNULL)


def rand_iops(path, n, seed):
    size = os.stat(path).st_size
    pages = random.Random(seed).sample(range(size // 4096), min(n, size // 4096))
    fd = os.open(path, os.O_RDONLY)
    t = time.perf_counter()
    for p in pages:
        if len(os.pread(fd, 4096, p * 4096)) != 4096:
            raise SystemExit("short read in %s" % path)
    dt = time.perf_counter() - t
    os.close(fd)
    return len(pages) / dt


def one(fs, rat, d, backing, shown, reads, seed):
    """(cat seconds, random 4 KiB IOPS) for FS ("blockfs" or "ratarmount") on file D/BACKING."""
    mnt = tempfile.mkdtemp(prefix="bench-rat.")
    keep = tempfile.mkdtemp(prefix="bench-rat-index.")
    try:
        res = []
        for phase in ("cat", "rand"):
            t = time.perf_counter()
            if fs == "blockfs":
                p = mount_blockfs(d, mnt, keep)
                target = os.path.join(mnt, shown)
            else:
                p = mount_ratarmount(rat, os.path.join(d, backing), mnt, keep)
                target = os.path.join(mnt, shown)
            wait_mounted(mnt, p, fs)
            if phase == "cat":
                sp.run(["cat", target], stdout=sp.DEVNULL, check=True)
                res.append(time.perf_counter() - t)
            else:
                res.append(rand_iops(target, reads, seed))
            umount(mnt, p)
        return res
    finally:
        os.rmdir(mnt)
        shutil.rmtree(keep)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", help="comma-separated files (default: all)")
    ap.add_argument("--reads", type=int, default=400)
    ap.add_argument("--ratarmount", default=None)
    a = ap.parse_args()
    rat = a.ratarmount or ("/work/ratar-venv/bin/ratarmount"
                           if os.path.exists("/work/ratar-venv/bin/ratarmount")
                           else shutil.which("ratarmount"))
    if not rat:
        raise SystemExit("no ratarmount: give --ratarmount PATH")
    top, plain, dirs = bc.files(a.mib)
    files = {n: (d, bc.WRITERS[n][0]) for n, d in dirs.items()}
    d = os.path.join(top, "zstd-seekable")
    out = os.path.join(d, "seek.zst")
    os.makedirs(d, exist_ok=True)
    if not os.path.exists(out):
        r = sp.run([PACK, "-c", "zstd", "-o", out + ".tmp", plain], stderr=sp.DEVNULL)
        if r.returncode == 0:
            os.rename(out + ".tmp", out)
    if os.path.exists(out):
        files["zstd-seekable"] = (d, "seek.zst")
    names = a.only.split(",") if a.only else list(files)
    res = {n: {k: [] for k in ("bc", "rc", "bi", "ri")} for n in names}
    for rnd in range(a.rounds):
        for n in names:
            d, backing = files[n]
            shown = bc.shown(backing)
            bcat, biops = one("blockfs", rat, d, backing, shown, a.reads, rnd)
            rcat, riops = one("ratarmount", rat, d, backing, shown, a.reads, rnd)
            r = res[n]
            r["bc"].append(bcat)
            r["rc"].append(rcat)
            r["bi"].append(biops)
            r["ri"].append(riops)
    med = statistics.median
    print("%d MiB of log-like text, %d paired rounds; cat: mount command to the end of cat, "
          "first mount; rand: %d random 4 KiB preads on a remount with the index kept\n"
          % (a.mib, a.rounds, a.reads))
    print("| file | ratarmount cat | blockfs cat | blockfs / ratarmount (range) "
          "| ratarmount IOPS | blockfs IOPS | blockfs / ratarmount (range) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n in names:
        r = res[n]
        cr = [b / c for b, c in zip(r["bc"], r["rc"])]
        ir = [b / c for b, c in zip(r["bi"], r["ri"])]
        print("| %s | %.2f s | %.2f s | %.2f (%.2f-%.2f) | %.0f | %.0f | %.1f (%.1f-%.1f) |" % (
            n, med(r["rc"]), med(r["bc"]), med(cr), min(cr), max(cr),
            med(r["ri"]), med(r["bi"]), med(ir), min(ir), max(ir)))


if __name__ == "__main__":
    main()
