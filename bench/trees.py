#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Paired rounds over trees of many small files: blockfs against squashfuse_ll.

    bench/trees.py make [--files 100000] [--dirs 100] [--kernel]
    bench/trees.py run [--files 100000 | --kernel] [--rounds 3] [--cases ls,find,cat,grep]
                       [--load] [--variant NAME=bfs:OPTIONS[:BINARY] ...]
                       [--strace [VARIANTS]] [--base squashfuse]

make: text files of 0.1-3 KiB (slices of Debian's linux-source text, or
of generated words without it) in DIRS directories, under
bench/data/trees/N/: plain/ (for the squashfs image and the plain
variant), lz4/ (each file made with `lz4 -B4 -m --rm`)
and squashfs.img (`mksquashfs plain/ -comp lz4`). With --kernel, the same
three made from Debian's /usr/src/linux-source-*.tar.xz under
bench/data/trees/kernel/ (for a warm `grep -r` of a kernel tree).

run: each round runs every (variant, case) once, each on a fresh mount
with the backing files warm, and each ratio is taken within its round;
the report gives the median time, its range, and the median ratio to the
base within rounds. Cases:
    ls    ls -lR > /dev/null
    find  find > /dev/null (names only: readdir, no stat of files)
    cat   find -type f -print0 | xargs -0 cat > /dev/null
    grep  grep -r zigzag > FILE, run twice on one mount: the second
          (warm) run is timed, as the issue's kernel-tree figure. To a
          file, since GNU grep writing to /dev/null stops at its first
          match (results before 2026-11-24 have that flaw)
blockfs variants run with -o index_cache=off unless their OPTIONS name an
index cache (so every mount is a first mount; a later mount is a variant
with index_cache=DIR, made by an earlier run).
After every round the daemon's RSS (VmRSS, VmHWM) after the case is
reported, and the median of the CPU time (user + system) the daemon used
from its start to the case's end (mount and one case: beside a load the
cores are saturated, and this is what the daemon took from the others);
with --strace one extra unpaired run per case under
`strace -c -f -p` gives the daemon's syscalls per file.
--load runs a busy loop on one core beside every run.
--cold drops the kernel's caches (sync; drop_caches 3) before every run
instead of warming the backing files once: both sides then read from
disk. Use it where "warm" does not last: on the machines of 2026-11-24
DAMON pages out what nobody touched for about 60 s (kdamond, paddr
scheme, action pageout, min age 12 x 5 s), so the backing files of a
1,000,000-file tree, which take longer than that to read, are partly
cold whatever one does, and warm figures at that size are not warm.
"""
import argparse
import os
import random
import re
import shutil
import statistics
import subprocess as sp
import tempfile
import time

import benchdata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "bench", "data", "trees")
BLOCKFS = os.path.join(REPO, "build", "src", "blockfs")


def corpus():
    """About 8 MiB of text to cut files from."""
    src = sorted(f for f in os.listdir("/usr/src") if f.startswith("linux-source-") and
                 f.endswith(".tar.xz")) if os.path.isdir("/usr/src") else []
    if src:
        out = sp.run("xz -dc /usr/src/%s | head -c 8388608" % src[-1], shell=True, check=True,
                     capture_output=True).stdout
        return out.decode("latin-1")
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(5000)]
    return " ".join(rng.choice(words) for _ in range(1400000))


def make(files, dirs):
    top = os.path.join(DATA, str(files))
    if os.path.exists(os.path.join(top, "done")):
        return top
    shutil.rmtree(top, ignore_errors=True)
    text = corpus()
    rng = random.Random(files)
    for sub in ("plain", "lz4"):
        os.makedirs(os.path.join(top, sub))
    per = (files + dirs - 1) // dirs
    for d in range(dirs):
        for sub in ("plain", "lz4"):
            os.makedirs(os.path.join(top, sub, "d%04d" % d))
        for i in range(d * per, min(files, (d + 1) * per)):
            n = rng.randint(100, 3072)
            at = rng.randrange(0, len(text) - n)
            body = text[at:at + n].encode("latin-1")
            for sub in ("plain", "lz4"):
                with open(os.path.join(top, sub, "d%04d" % d, "f%07d.txt" % i), "wb") as f:
                    f.write(body)
    # lz4 -m takes its file names as arguments: one lz4 per directory
    for d in range(dirs):
        dd = os.path.join(top, "lz4", "d%04d" % d)
        names = sorted(os.listdir(dd))
        sp.run(["lz4", "-q", "-B4", "-m", "--rm"] + names, cwd=dd, check=True)
    sp.run(["mksquashfs", os.path.join(top, "plain"), os.path.join(top, "squashfs.img"),
            "-comp", "lz4", "-noappend", "-quiet", "-no-progress"], check=True, stdout=sp.DEVNULL)
    open(os.path.join(top, "done"), "w").close()
    return top


def make_kernel():
    """The kernel tree of the issue: Debian's linux-source, every file lz4 -B4 -m."""
    top = os.path.join(DATA, "kernel")
    if os.path.exists(os.path.join(top, "done")):
        return top
    src = sorted(f for f in os.listdir("/usr/src") if f.startswith("linux-source-") and
                 f.endswith(".tar.xz")) if os.path.isdir("/usr/src") else []
    if not src:
        raise SystemExit("no /usr/src/linux-source-*.tar.xz (Debian: apt-get install linux-source)")
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(os.path.join(top, "plain"))
    sp.run(["tar", "-xJf", os.path.join("/usr/src", src[-1]), "-C", os.path.join(top, "plain"),
            "--strip-components=1"], check=True)
    sp.run(["cp", "-a", os.path.join(top, "plain"), os.path.join(top, "lz4")], check=True)
    for d, _, names in os.walk(os.path.join(top, "lz4")):
        names = sorted(n for n in names if os.path.isfile(os.path.join(d, n)) and
                       not os.path.islink(os.path.join(d, n)))
        for i in range(0, len(names), 500):
            sp.run(["lz4", "-q", "-B4", "-m", "--rm"] + names[i:i + 500], cwd=d, check=True)
    sp.run(["mksquashfs", os.path.join(top, "plain"), os.path.join(top, "squashfs.img"),
            "-comp", "lz4", "-noappend", "-quiet", "-no-progress"], check=True, stdout=sp.DEVNULL)
    open(os.path.join(top, "done"), "w").close()
    return top


def rss(pid):
    """VmRSS and VmHWM of @pid, KiB."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out.get("VmRSS", 0), out.get("VmHWM", 0)


def cpu(pid):
    """User and system CPU seconds @pid has used, all its threads."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Mount:
    def __init__(self, top, kind, opts, binary=None):
        self.kind, self.proc = kind, None
        if kind == "plain":
            self.path = os.path.join(top, "plain")
            return
        self.path = tempfile.mkdtemp(prefix="blockfs-trees.")
        if kind == "bfs":
            argv = [binary or BLOCKFS, "-f", os.path.join(top, "lz4"), self.path]
            self.proc = sp.Popen(argv + ["-o", benchdata.first_mount(opts)])
        else:
            self.proc = sp.Popen(["squashfuse_ll", "-f", os.path.join(top, "squashfs.img"),
                                  self.path])
        deadline = time.time() + 30
        while not os.path.ismount(self.path):
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit("%s did not mount" % kind)
            time.sleep(0.01)

    def rss(self):
        return rss(self.proc.pid) if self.proc else (0, 0)

    def cpu(self):
        return cpu(self.proc.pid) if self.proc else 0.0

    def close(self):
        if self.kind == "plain":
            return
        sp.run(["fusermount3", "-u", self.path], check=True)
        self.proc.wait()
        os.rmdir(self.path)


CASES = {
    "ls": "ls -lR . > /dev/null",
    "find": "find . > /dev/null",
    "cat": "find . -type f -print0 | xargs -0 cat > /dev/null",
    # to a file: GNU grep writing to /dev/null stops at the first match
    "grep": "grep -r zigzag . > %s; true" % os.path.join(tempfile.gettempdir(), "trees-grep.out"),
}


def run_case(case, m):
    if case == "grep":
        sp.run(CASES[case], shell=True, cwd=m.path)	# the warm run is timed
    t = time.perf_counter()
    sp.run(CASES[case], shell=True, cwd=m.path, check=True)
    return time.perf_counter() - t


SYSCALLS = ("openat", "openat2", "open", "newfstatat", "fstat", "statx", "pread64", "preadv2",
            "read", "readlinkat", "getdents64", "close", "dup")


def strace_case(case, m):
    """The daemon's syscall counts during one run of @case."""
    out = os.path.join(tempfile.gettempdir(), "trees-strace.%d" % os.getpid())
    st = sp.Popen(["strace", "-c", "-f", "-q", "-o", out, "-p", str(m.proc.pid)])
    time.sleep(1)
    run_case(case, m)
    time.sleep(0.5)
    st.terminate()
    st.wait()
    counts = {}
    with open(out) as f:
        for line in f:
            p = line.split()
            if len(p) >= 5 and p[-1] in SYSCALLS and re.match(r"^[\d.]+$", p[0]):
                counts[p[-1]] = int(p[3])
    os.unlink(out)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["make", "run"])
    ap.add_argument("--files", type=int, default=100000)
    ap.add_argument("--kernel", action="store_true",
                    help="Debian's linux-source tree instead of generated files")
    ap.add_argument("--dirs", type=int)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default="ls,find,cat,grep")
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--only", help="comma-separated variants (default: all)")
    ap.add_argument("--base", default="squashfuse")
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--cold", action="store_true", help="drop the kernel's caches before every run")
    ap.add_argument("--strace", nargs="?", const="", default=None,
                    help="also count the daemon's syscalls (of these variants, comma-separated)")
    a = ap.parse_args()
    dirs = a.dirs or (100 if a.files <= 100000 else 1000)
    top = make_kernel() if a.kernel else make(a.files, dirs)
    if a.what == "make":
        return
    variants = {"blockfs": ("bfs", "", None), "squashfuse": ("squashfuse", None, None)}
    for v in a.variant:
        name, spec = v.split("=", 1)
        parts = spec.split(":", 2)
        variants[name] = (parts[0], parts[1] if len(parts) > 1 else "",
                          parts[2] if len(parts) > 2 else None)
    if a.only:
        variants = {k: variants[k] for k in a.only.split(",")}
    cases = a.cases.split(",")
    if not a.cold:	# backing files warm
        sp.run("find %s -type f -print0 | xargs -0 cat > /dev/null; cat %s > /dev/null"
               % (os.path.join(top, "lz4"), os.path.join(top, "squashfs.img")),
               shell=True, check=True)
    load = sp.Popen(["sh", "-c", "while :; do :; done"]) if a.load else None
    res = {(v, c): [] for v in variants for c in cases}
    mem = {(v, c): [] for v in variants for c in cases}
    cpus = {(v, c): [] for v in variants for c in cases}
    sysc = {}
    try:
        names = list(variants)
        for r in range(a.rounds):
            for c in cases:
                for v in names[r % len(names):] + names[:r % len(names)]:
                    if a.cold:
                        sp.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True, check=True)
                    m = Mount(top, *variants[v])
                    try:
                        res[(v, c)].append(run_case(c, m))
                        mem[(v, c)].append(m.rss())
                        cpus[(v, c)].append(m.cpu())
                    finally:
                        m.close()
        if a.strace is not None:
            for c in cases:
                for v in names:
                    if variants[v][0] == "plain" or (a.strace and v not in a.strace.split(",")):
                        continue
                    m = Mount(top, *variants[v])
                    try:
                        sysc[(v, c)] = strace_case(c, m)
                    finally:
                        m.close()
    finally:
        if load:
            load.kill()
    print("%s (lz4 -B4 -m; squashfs -comp lz4), %d paired rounds%s; "
          "fresh mount per run, %s; ratio to %s within each round"
          % ("the linux-source tree" if a.kernel else "%d files in %d directories" % (a.files, dirs),
             a.rounds, ", a busy loop on one core beside" if a.load else "",
             "the kernel's caches dropped before each" if a.cold else "backing files warm",
             a.base))
    print()
    print("| case | variant | median | range | / %s | range | RSS after (MiB) | daemon CPU (s) |"
          % a.base)
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for c in cases:
        base = res.get((a.base, c))
        for v in variants:
            r = res[(v, c)]
            line = "| %s | %s | %.2f s | %.2f-%.2f |" % (c, v, statistics.median(r), min(r),
                                                       max(r))
            if base:
                rat = [x / y for x, y in zip(r, base)]
                line += " %.2f | %.2f-%.2f |" % (statistics.median(rat), min(rat), max(rat))
            else:
                line += " | |"
            line += " %.1f |" % (max(x[0] for x in mem[(v, c)]) / 1024.0)
            line += " %.2f |" % statistics.median(cpus[(v, c)])
            print(line)
    if sysc:
        print()
        print("Daemon syscalls per file during one run (strace -c -f -p):")
        print()
        print("| case | variant | " + " | ".join(SYSCALLS) + " |")
        print("|---|---|" + "---:|" * len(SYSCALLS))
        for (v, c), counts in sorted(sysc.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            print("| %s | %s | " % (c, v) + " | ".join("%.2f" % (counts.get(s, 0) / a.files)
                                                       for s in SYSCALLS) + " |")


if __name__ == "__main__":
    main()
