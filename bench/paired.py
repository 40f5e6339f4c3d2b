#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Paired rounds: readers against read paths, as ratios within each round.

Each round runs every (variant, case) once, back to back, each blockfs
variant on a fresh mount (so its first stat and everything after it are
in the time), and each ratio is taken within its round; the report gives
the median ratio over the rounds and its range. On a shared 2-core
machine only such paired ratios mean anything.

    bench/paired.py [--rounds 5] [--cases cat,md5sum,grep] [--load]
                    [--variant NAME=KIND:ARG ...] [--base NAME]

Variants (default: the set of the read-path issue):
    plain        the original file in the page cache
    bfs-plain    the same bytes stored plain in SOURCE, through blockfs
                 (the FUSE ceiling: everything but decoding)
    lz4-B4, lz4, bgzf, pack
                 blockfs on stock `lz4 -B4`, stock `lz4` (4 MiB blocks),
                 `bgzip -i`, blockfs-pack, default options
    squashfuse   squashfuse_ll on a squashfs image (lz4, 128 KiB blocks)
    erofs        the kernel's erofs on a loop device (mkfs.erofs -zlz4hc)
blockfs variants run with -o index_cache=off unless their OPTIONS name an
index cache: each mount then opens the file as on its first mount.
A variant NAME=bfs:FORMAT:OPTIONS[:BINARY] mounts FORMAT with -o OPTIONS
(with another blockfs binary, e.g. an older build, to compare builds), e.g.
    --variant nopush=bfs:lz4-B4:readahead=0
    --variant before=bfs:lz4::/tmp/old/build/src/blockfs

Cases: cat (to /dev/null), md5sum, grep (grep -c to a file: GNU grep stops
at the first match when its output is /dev/null), bzip2 (-1 of the first
32 MiB), fio4k (4 KiB psync random reads, 1 job, 3 s, reported as time per
read: blocks read twice are pushed whole, so most of the 3 s are page
cache hits), cold4k (one 4 KiB read in each of 256 distinct blocks, a
fresh mount: what a read costs that nothing has cached). --load runs a busy loop on one core
beside every run. Data: 512 MiB (--size-mib) of Debian's linux-source
tarball, made once under bench/data/paired/.
"""
import argparse
import glob
import os
import random
import shutil
import statistics
import subprocess as sp
import tempfile
import time

import benchdata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "bench", "data", "paired")
BLOCKFS = os.path.join(REPO, "build", "src", "blockfs")
PACK = os.path.join(REPO, "build", "tools", "blockfs-pack")

FORMATS = {
    "lz4-B4": ("text.lz4", lambda t, o: sp.run(["lz4", "-q", "-f", "-B4", t, o], check=True)),
    "lz4": ("text.lz4", lambda t, o: sp.run(["lz4", "-q", "-f", t, o], check=True)),
    "bgzf": ("text.gz", lambda t, o: sp.run("bgzip -@2 -i -c %s > %s" % (t, o), shell=True,
                                             check=True)),
    "pack": ("text.lz4", lambda t, o: sp.run([PACK, "-q", "-f", "-o", o, t], check=True)),
    "plain": ("text", lambda t, o: shutil.copyfile(t, o)),
}


def prepare(size):
    text, made = benchdata.linux_text(DATA, size)
    if made:
        shutil.rmtree(os.path.join(DATA, "src"), ignore_errors=True)
        for f in glob.glob(os.path.join(DATA, "*.img")):
            os.unlink(f)
    for key, (name, make) in FORMATS.items():
        d = os.path.join(DATA, "src", key)
        if not os.path.exists(os.path.join(d, name)):
            os.makedirs(d, exist_ok=True)
            make(text, os.path.join(d, name))
    sq = os.path.join(DATA, "squashfs.img")
    if not os.path.exists(sq) and shutil.which("mksquashfs"):
        d = tempfile.mkdtemp()
        os.link(text, os.path.join(d, "text"))
        sp.run(["mksquashfs", d, sq, "-comp", "lz4", "-b", "131072", "-noappend", "-quiet"],
               check=True, stdout=sp.DEVNULL)
        shutil.rmtree(d)
    ero = os.path.join(DATA, "erofs.img")
    if not os.path.exists(ero) and shutil.which("mkfs.erofs"):
        d = tempfile.mkdtemp()
        os.link(text, os.path.join(d, "text"))
        sp.run(["mkfs.erofs", "-zlz4hc", ero, d], check=True, stdout=sp.DEVNULL, stderr=sp.DEVNULL)
        shutil.rmtree(d)
    return text


class Mount:
    """A variant mounted at a fresh point; .path is the file to read."""

    def __init__(self, kind, arg, opts, binary=None):
        self.kind, self.mnt, self.proc = kind, tempfile.mkdtemp(prefix="blockfs-pair."), None
        if kind == "plain":
            self.path = os.path.join(DATA, "text")
            return
        self.path = os.path.join(self.mnt, "text")
        if kind == "bfs":
            argv = [binary or BLOCKFS, "-f", os.path.join(DATA, "src", arg), self.mnt]
            self.proc = sp.Popen(argv + ["-o", benchdata.first_mount(opts)])
        elif kind == "squashfuse":
            self.proc = sp.Popen(["squashfuse_ll", "-f", os.path.join(DATA, "squashfs.img"),
                                  self.mnt])
        elif kind == "erofs":
            sp.run(["mount", "-t", "erofs", "-o", "loop,ro", os.path.join(DATA, "erofs.img"),
                    self.mnt], check=True)
        deadline = time.time() + 30
        while not os.path.ismount(self.mnt):
            if self.proc and self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit("%s %s did not mount" % (kind, arg))
            time.sleep(0.01)

    def close(self):
        if self.kind == "plain":
            pass
        elif self.kind == "erofs":
            sp.run(["umount", self.mnt], check=True)
        else:
            sp.run(["fusermount3", "-u", self.mnt], check=True)
            self.proc.wait()
        os.rmdir(self.mnt)


def run_case(case, path, tmp):
    """Seconds for one run of @case on @path (fio4k: seconds per 4 KiB read)."""
    if case == "cold4k":
        # one 4 KiB read at a random place in each of up to 256 distinct
        # blocks (blockfs's block size; 64 KiB otherwise), in random order:
        # reads that no cache can have seen
        try:
            bs = int(os.getxattr(path, "user.blockfs.block_size"))
        except OSError:
            bs = 65536
        size = os.path.getsize(path)
        rng = random.Random(7)
        blocks = rng.sample(range(size // bs), min(256, size // bs))
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            t = time.perf_counter()
            for b in blocks:
                os.pread(fd, 4096, b * bs + rng.randrange(0, bs - 4096))
            return (time.perf_counter() - t) / len(blocks)
        finally:
            os.close(fd)
    if case == "fio4k":
        out = sp.run(["fio", "--name=r", "--filename=" + path, "--rw=randread", "--bs=4k",
                      "--ioengine=psync", "--numjobs=1", "--time_based", "--runtime=3",
                      "--invalidate=0", "--output-format=terse", "--terse-version=3"],
                     check=True, capture_output=True, text=True).stdout
        iops = float(out.split(";")[7])
        return 1.0 / iops
    cmd = {
        "cat": "cat %s > /dev/null",
        "md5sum": "md5sum %s > /dev/null",
        "grep": "grep -c zigzag %s > " + os.path.join(tmp, "grep.out") + " || true",
        "bzip2": "head -c 33554432 %s | bzip2 -1 > /dev/null",
    }[case] % path
    t = time.perf_counter()
    sp.run(cmd, shell=True, check=True)
    return time.perf_counter() - t


VARIANTS = {
    "plain": ("plain", None, None, None),
    "bfs-plain": ("bfs", "plain", "", None),
    "lz4-B4": ("bfs", "lz4-B4", "", None),
    "lz4": ("bfs", "lz4", "", None),
    "bgzf": ("bfs", "bgzf", "", None),
    "pack": ("bfs", "pack", "", None),
    "squashfuse": ("squashfuse", None, None, None),
    "erofs": ("erofs", None, None, None),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size-mib", type=int, default=512)
    ap.add_argument("--cases", default="cat,md5sum,grep")
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--only", help="comma-separated variants to run (default: all)")
    ap.add_argument("--base", default="lz4-B4")
    ap.add_argument("--load", action="store_true")
    a = ap.parse_args()
    prepare(a.size_mib << 20)
    variants = dict(VARIANTS)
    for v in a.variant:
        name, spec = v.split("=", 1)
        parts = spec.split(":", 3)
        variants[name] = (parts[0], parts[1], parts[2] if len(parts) > 2 else "",
                          parts[3] if len(parts) > 3 else None)
    if a.only:
        variants = {k: variants[k] for k in a.only.split(",")}
    cases = a.cases.split(",")
    tmp = tempfile.mkdtemp(prefix="blockfs-pair.")
    for f in glob.glob(os.path.join(DATA, "src", "*", "*")) + glob.glob(os.path.join(DATA, "*")):
        if os.path.isfile(f):
            sp.run(["cat", f], stdout=sp.DEVNULL)		# backing files warm
    load = sp.Popen(["sh", "-c", "while :; do :; done"]) if a.load else None
    res = {(v, c): [] for v in variants for c in cases}
    try:
        names = list(variants)
        for r in range(a.rounds):
            for c in cases:
                # each round starts at another variant: none is always first
                for v in names[r % len(names):] + names[:r % len(names)]:
                    m = Mount(*variants[v])
                    try:
                        res[(v, c)].append(run_case(c, m.path, tmp))
                    finally:
                        m.close()
    finally:
        if load:
            load.kill()
        shutil.rmtree(tmp)
    print("%d MiB of linux-source text, %d paired rounds%s; time per run (fio4k: per read), "
          "median and range; ratio to %s within each round (below 1: faster)"
          % (a.size_mib, a.rounds, ", a busy loop on one core beside" if a.load else "", a.base))
    print()
    print("| case | variant | median | range | / %s (median) | range |" % a.base)
    print("|---|---|---:|---:|---:|---:|")
    for c in cases:
        base = res.get((a.base, c))
        for v in variants:
            r = res[(v, c)]
            unit = (lambda x: "%.1f us" % (x * 1e6)) if c in ("fio4k", "cold4k") else \
            (lambda x: "%.3f s" % x)
            line = "| %s | %s | %s | %s-%s |" % (c, v, unit(statistics.median(r)), unit(min(r)),
                                                  unit(max(r)))
            if base:
                rat = [x / y for x, y in zip(r, base)]
                line += " %.2f | %.2f-%.2f |" % (statistics.median(rat), min(rat), max(rat))
            print(line)


if __name__ == "__main__":
    main()
