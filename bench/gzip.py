#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Plain gzip through blockfs (-o gzip=index) against gzip -dc, in paired rounds.

Each round, for each checkpoint spacing (--spans), runs back to back:

  walk       first stat(2) of the file on a fresh mount (the whole walk),
             against `gzip -dc FILE > /dev/null`
  first-md5  `md5sum MNT/text` on a fresh mount without an index cache (the
             stat walks, then the read), against `gzip -dc FILE | md5sum`
  later-md5  the same on a fresh mount whose index cache is warm (no walk),
             against md5sum of the same data as BGZF through a fresh mount
             with default options
  rand4k     fio, 4 KiB random reads, psync, 1 job, --fio-seconds, on a
             fresh mount whose index cache is warm (the walk done), against a
             fresh BGZF mount: IOPS (fresh, so that no page is in the
             kernel's cache yet)
  cold4k     one 4 KiB pread in each of 200 regions 4 MiB apart (so in a
             span, or BGZF block, nothing has read yet), with kernel
             read-ahead off (POSIX_FADV_RANDOM), on the same fresh mounts
             as rand4k would use: the median read's microseconds, against
             the same offsets of the BGZF file
  ratar-rapidgzip, ratar-indexed_gzip
             rand4k against ratarmount (--ratarmount PROGRAM, e.g. from
             `pip install ratarmount indexed_gzip`) with that backend and a
             seek point every 1 MiB (-gs 1, its densest), its index made
             beforehand, on a fresh mount each: IOPS. Both sides read
             nontar/text.gz, the text behind one line that keeps ratarmount
             from taking it for the tar archive it starts with

and reports, per spacing, the median ratio over the rounds (and its range)
with "x" meaning how fast blockfs is relative to the other side (above 1:
blockfs faster), plus the index memory (user.blockfs.index_bytes) as a
fraction of the decompressed size. On a shared 2-core machine only such
paired ratios mean anything.

    bench/gzip.py [--size-mib 1024] [--rounds 3] [--spans 256K,1M,4M]
                  [--fio-seconds 5] [--cases walk,first-md5,later-md5,rand4k,cold4k]
                  [--ratarmount PROGRAM --cases ...,ratar-rapidgzip,ratar-indexed_gzip]

Data, made once under bench/data/gzip/: the first --size-mib of Debian's
linux-source tarball, `gzip -6` of it (what gzip does by default) and
`bgzip` of it, and for the ratarmount cases `gzip -6` of the text behind
one line (nontar/). As root (FUSE), with fio.
"""
import argparse
import glob
import os
import random
import statistics
import subprocess as sp
import tempfile
import time

import benchdata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "bench", "data", "gzip")


RATAR_LINE = "blockfs bench: this is not a tar archive"


def make(size, nontar):
    text, made = benchdata.linux_text(DATA, size)
    if made:
        for f in glob.glob(os.path.join(DATA, "*", "text.gz")):
            os.unlink(f)
    kinds = [("gzip", "gzip -6 -c %s > %s"), ("bgzf", "bgzip -@2 -c %s > %s")]
    if nontar:
        kinds.append(("nontar", "(echo '" + RATAR_LINE + "'; cat %s) | gzip -6 > %s"))
    for kind, cmd in kinds:
        d = os.path.join(DATA, kind)
        os.makedirs(d, exist_ok=True)
        out = os.path.join(d, "text.gz")
        if not os.path.exists(out):
            sp.run(cmd % (text, out + ".tmp"), shell=True, check=True)
            os.rename(out + ".tmp", out)
    return text


class Mount:
    def __init__(self, binary, kind, opts):
        self.mnt = tempfile.mkdtemp(prefix="blockfs-gz.")
        argv = [binary, "-f", os.path.join(DATA, kind), self.mnt]
        self.proc = sp.Popen(argv + ["-o", benchdata.first_mount(opts)])
        deadline = time.time() + 30
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit("blockfs %s -o %s did not mount" % (kind, opts))
            time.sleep(0.01)
        self.path = os.path.join(self.mnt, "text")

    def xattr(self, name):
        return os.getxattr(self.path, "user.blockfs." + name).decode()

    def close(self):
        sp.run(["fusermount3", "-u", self.mnt], check=True)
        self.proc.wait()
        os.rmdir(self.mnt)


class Ratarmount(Mount):
    """ratarmount of nontar/text.gz with @backend, its index file kept in DATA."""

    def __init__(self, program, backend):
        self.mnt = tempfile.mkdtemp(prefix="ratarmount.")
        index = os.path.join(DATA, "ratarmount-%s-gs1.sqlite" % backend)
        self.proc = sp.Popen([program, "-f", "--use-backend", backend, "-gs", "1",
                              "--index-file", index,
                              os.path.join(DATA, "nontar", "text.gz"), self.mnt],
                             stdout=sp.DEVNULL, stderr=sp.DEVNULL)
        deadline = time.time() + 600	# the first mount makes the index
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit("ratarmount --use-backend %s did not mount" % backend)
            time.sleep(0.05)
        self.path = os.path.join(self.mnt, "text")


def timed(cmd):
    t = time.perf_counter()
    sp.run(cmd, shell=True, check=True, stdout=sp.DEVNULL)
    return time.perf_counter() - t


def md5(path):
    t = time.perf_counter()
    out = sp.run(["md5sum", path], check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - t, out.split()[0]


def fio(path, secs):
    out = sp.run(["fio", "--name=r", "--filename=" + path, "--rw=randread", "--bs=4k",
                  "--ioengine=psync", "--numjobs=1", "--time_based", "--runtime=%d" % secs,
                  "--invalidate=0", "--randseed=%d" % int(time.time()),
                  "--output-format=terse", "--terse-version=3"],
                 check=True, capture_output=True, text=True).stdout
    return float(out.split(";")[7])


def cold(path, seed):
    """Median microseconds of one 4 KiB pread in each of 200 regions 4 MiB apart."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        stride = 4 << 20
        rng = random.Random(seed)
        regions = rng.sample(range(os.fstat(fd).st_size // stride - 1), 200)
        ts = []
        for reg in regions:
            off = reg * stride + rng.randrange(stride // 4096) * 4096
            t = time.perf_counter()
            os.pread(fd, 4096, off)
            ts.append((time.perf_counter() - t) * 1e6)
        return statistics.median(ts)
    finally:
        os.close(fd)


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--spans", default="256K,1M,4M")
    ap.add_argument("--fio-seconds", type=int, default=5)
    ap.add_argument("--cases", default="walk,first-md5,later-md5,rand4k,cold4k")
    ap.add_argument("--blockfs", default=os.path.join(REPO, "build/src/blockfs"))
    ap.add_argument("--ratarmount", help="ratarmount program, for the ratar-* cases")
    a = ap.parse_args()
    cases = a.cases.split(",")
    ratar = [c for c in cases if c.startswith("ratar-")]
    if ratar and not a.ratarmount:
        raise SystemExit("the ratar-* cases need --ratarmount PROGRAM")
    text = make(a.size_mib << 20, bool(ratar))
    size = os.path.getsize(text)
    gz = os.path.join(DATA, "gzip", "text.gz")
    bg = os.path.join(DATA, "bgzf", "text.gz")
    spans = a.spans.split(",")
    want = None
    res = {(s, c): [] for s in spans for c in cases}
    raw = {(s, c): [] for s in spans + ["base"] for c in cases}	# seconds, or IOPS
    mem = {}
    icache = {}
    for s in spans:
        icache[s] = os.path.join(DATA, "icache-" + s)
        os.makedirs(icache[s], mode=0o700, exist_ok=True)
        os.chmod(icache[s], 0o700)
        m = Mount(a.blockfs, "gzip", "gzip=index,gzip_span=%s,index_cache=%s" % (s, icache[s]))
        if os.stat(m.path).st_size != size:
            raise SystemExit("st_size differs")
        mem[s] = (int(m.xattr("index_bytes")), int(m.xattr("checkpoints")))
        m.close()
        if ratar:		# the walk of nontar/ too, into the same cache
            m = Mount(a.blockfs, "nontar", "gzip=index,gzip_span=%s,index_cache=%s"
                      % (s, icache[s]))
            if os.stat(m.path).st_size != size + len(RATAR_LINE) + 1:
                raise SystemExit("nontar st_size differs")
            m.close()
    for c in ratar:		# ratarmount's index too, and the same bytes
        m = Ratarmount(a.ratarmount, c[len("ratar-"):])
        with open(m.path, "rb") as f:
            f.seek(len(RATAR_LINE) + 1 + size // 2)
            got = f.read(4096)
        m.close()
        with open(text, "rb") as f:
            f.seek(size // 2)
            if f.read(4096) != got:
                raise SystemExit("ratarmount shows other bytes")
    for r in range(a.rounds):
        sp.run("cat %s %s > /dev/null" % (gz, bg), shell=True, check=True)	# backing warm
        base = {}
        if "walk" in cases:
            base["walk"] = timed("gzip -dc %s > /dev/null" % gz)
        if "first-md5" in cases:
            base["first-md5"] = timed("gzip -dc %s | md5sum" % gz)
        if "later-md5" in cases:
            m = Mount(a.blockfs, "bgzf", "")
            t, h = md5(m.path)
            want = want or h
            if h != want:
                raise SystemExit("bgzf md5 differs")
            base["later-md5"] = t
            m.close()
        if "rand4k" in cases:
            m = Mount(a.blockfs, "bgzf", "")
            base["rand4k"] = fio(m.path, a.fio_seconds)
            m.close()
        if "cold4k" in cases:
            m = Mount(a.blockfs, "bgzf", "")
            base["cold4k"] = cold(m.path, r)
            m.close()
        for c in ratar:
            m = Ratarmount(a.ratarmount, c[len("ratar-"):])
            base[c] = fio(m.path, a.fio_seconds)
            m.close()
        for c in base:
            raw[("base", c)].append(base[c])
        for s in spans:
            opts = "gzip=index,gzip_span=%s" % s
            if "walk" in cases:
                m = Mount(a.blockfs, "gzip", opts)
                t = time.perf_counter()
                os.stat(m.path)
                t = time.perf_counter() - t
                raw[(s, "walk")].append(t)
                res[(s, "walk")].append(base["walk"] / t)
                m.close()
            if "first-md5" in cases:
                m = Mount(a.blockfs, "gzip", opts)
                t, h = md5(m.path)
                m.close()
                if want and h != want:
                    raise SystemExit("gzip md5 differs")
                raw[(s, "first-md5")].append(t)
                res[(s, "first-md5")].append(base["first-md5"] / t)
            warm = opts + ",index_cache=" + icache[s]
            if "later-md5" in cases:
                m = Mount(a.blockfs, "gzip", warm)
                if m.xattr("index_source") != "cache":
                    raise SystemExit("index cache not warm")
                t, h = md5(m.path)
                m.close()
                if want and h != want:
                    raise SystemExit("gzip md5 differs")
                raw[(s, "later-md5")].append(t)
                res[(s, "later-md5")].append(base["later-md5"] / t)
            if "rand4k" in cases:
                m = Mount(a.blockfs, "gzip", warm)
                iops = fio(m.path, a.fio_seconds)
                m.close()
                raw[(s, "rand4k")].append(iops)
                res[(s, "rand4k")].append(iops / base["rand4k"])
            if "cold4k" in cases:
                m = Mount(a.blockfs, "gzip", warm)
                us = cold(m.path, r)
                m.close()
                raw[(s, "cold4k")].append(us)
                res[(s, "cold4k")].append(base["cold4k"] / us)
            for c in ratar:
                m = Mount(a.blockfs, "nontar", warm)
                iops = fio(m.path, a.fio_seconds)
                m.close()
                raw[(s, c)].append(iops)
                res[(s, c)].append(iops / base[c])
        print("round %d done" % (r + 1), flush=True)
    with open("/proc/loadavg") as f:
        load = ", ".join(f.read().split()[:3])
    print()
    print("%d MiB of linux-source text as `gzip -6` (%d bytes) and BGZF (%d bytes), "
          "%d paired rounds, load average at the end %s"
          % (a.size_mib, os.path.getsize(gz), os.path.getsize(bg), a.rounds, load))
    print()
    names = {"walk": "walk vs gzip -dc", "first-md5": "first md5sum vs gzip -dc, md5sum",
             "later-md5": "later md5sum vs BGZF", "rand4k": "4 KiB random IOPS vs BGZF",
             "cold4k": "cold 4 KiB read vs BGZF",
             "ratar-rapidgzip": "4 KiB random IOPS vs ratarmount (rapidgzip, -gs 1)",
             "ratar-indexed_gzip": "4 KiB random IOPS vs ratarmount (indexed_gzip, -gs 1)"}
    print("| gzip_span | checkpoints | index memory | " +
          " | ".join(names[c] + " (median, range)" for c in cases) + " |")
    print("|---|---:|---:|" + "---:|" * len(cases))
    for s in spans:
        row = ["%s" % s, "%d" % mem[s][1], "%d B (%.2f%%)" % (mem[s][0], 100.0 * mem[s][0] / size)]
        for c in cases:
            v = res[(s, c)]
            row.append("%.2fx (%.2f-%.2f)" % (statistics.median(v), min(v), max(v)))
        print("| " + " | ".join(row) + " |")
    print()
    print("Medians of the raw figures: seconds (rand4k, ratar-*: IOPS; cold4k: microseconds); the base row "
          "is the other side (gzip -dc, gzip -dc piped to md5sum, BGZF through blockfs, ratarmount).")
    print()
    print("| | " + " | ".join(c for c in cases) + " |")
    print("|---|" + "---:|" * len(cases))
    for s in ["base"] + spans:
        print("| %s | " % s + " | ".join(
            ("%.0f" if c in ("rand4k", "cold4k") or c in ratar else "%.2f")
            % statistics.median(raw[(s, c)])
            for c in cases) + " |")


if __name__ == "__main__":
    main()
