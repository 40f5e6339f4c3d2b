#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""`cat` through a blockfs mount against the format's own decompressor, in paired rounds.

    bench/codecs.py [--mib 128] [--rounds 5] [--only zstd,pzstd,...] [--base BLOCKFS]
                    [--text log|linux] [--tools cat,md5sum,grep]

One text file (log-like lines) is written by each common writer at its
defaults, once, under bench/data/codecs/: zstd (one frame, with its
content size: zstd FILE), zstd-pipe (one frame without: zstd < FILE),
pzstd (many frames), xz -T1 (one block), xz -T2 (blocks of 3x the dictionary), bzip2
-9 and lbzip2 (blocks of 900 kB). Each round runs, for each file, `X -dc
FILE > /dev/null` and then `stat` and `cat` of the decoded file through a
fresh mount (-o index_cache=off, so the first stat's walk is part of the
time) into /dev/null; the first stat's time is shown on its own too; the ratio is taken within the round (below 1: blockfs is
faster). The daemon's CPU time is reported beside the wall time. With
--base, another blockfs binary (an earlier build) is timed in the same
rounds, right after this one, and shown as "WRITER (base)".

--text linux takes the first MiB of Debian's linux-source tarball (as the
other benchmarks do) instead of the log-like text, in bench/data/codecs/
linux-NM/. --tools adds md5sum and grep -c: `X -dc FILE | TOOL` against
TOOL of the decoded file through a fresh mount (stat first, as for cat),
grep's count written to a file. --pipe-cat times `X -dc FILE | cat >
/dev/null` as cat's baseline, the form the project's aims are stated in;
without it the baseline is `X -dc FILE > /dev/null`, which results before
this option measured.
"""
import argparse
import os
import random
import statistics
import subprocess as sp
import tempfile
import time

import benchdata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKFS = os.path.join(REPO, "build", "src", "blockfs")

# name: (backing file, writer command (stdin text -> stdout), decompressor)
WRITERS = {
    "zstd": ("one.zst", ["zstd", "-q", "-c", "{in}"], ["zstd", "-dc"]),
    "zstd-pipe": ("pipe.zst", ["zstd", "-q", "-c"], ["zstd", "-dc"]),
    "pzstd": ("many.zst", ["pzstd", "-q", "-c", "-p", "2"], ["zstd", "-dc"]),
    "xz-T1": ("one.xz", ["xz", "-T1", "-c"], ["xz", "-dc"]),
    "xz-T2": ("blocks.xz", ["xz", "-T2", "-c"], ["xz", "-dc"]),
    "bzip2": ("b.bz2", ["bzip2", "-c"], ["bzip2", "-dc"]),
    "lbzip2": ("l.bz2", ["lbzip2", "-c"], ["bzip2", "-dc"]),
}


def write(writer, src, out):
    """Run WRITER on SRC into OUT: SRC as its "{in}" argument, else on its stdin."""
    with open(src, "rb") as f, open(out, "wb") as o:
        if "{in}" in writer:
            sp.run([src if a == "{in}" else a for a in writer], stdout=o, check=True)
        else:
            sp.run(writer, stdin=f, stdout=o, check=True)


def shown(backing):
    """The name blockfs shows BACKING under: its suffix dropped, if it has one."""
    return backing.rsplit(".", 1)[0] if "." in backing else backing


def text(path, mib):
    if os.path.exists(path):
        return
    r = random.Random(32)
    words = [b"GET", b"PUT", b"/index.html", b"/api/v1/items", b"200", b"404", b"ok",
             b"slow", b"cache", b"miss", b"hit", b"user", b"session", b"checkpoint"]
    with open(path + ".tmp", "wb") as out:
        left, n = mib << 20, 0
        while left > 0:
            chunk = b"".join(b"%09d %s %s %d\n" % (n + k, r.choice(words),
                                                   b" ".join(r.choices(words, k=4)),
                                                   r.randint(0, 1 << 20))
                             for k in range(20000))[:left]
            out.write(chunk)
            left -= len(chunk)
            n += 20000
    os.rename(path + ".tmp", path)


def cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# what each --tools word runs on a file (grep's count goes to a file)
GREP_WORD = "static"
TOOLS = {"cat": ["cat"], "md5sum": ["md5sum"], "grep": ["grep", "-c", GREP_WORD]}


PIPE_CAT = False


def tool(cmd, path, use="cat"):
    """Time CMD (the decompressor) on PATH: into /dev/null for cat (unless
    PIPE_CAT), else piped into the tool USE."""
    t = time.perf_counter()
    with open(path, "rb") as f:
        if use == "cat" and not PIPE_CAT:
            sp.run(cmd, stdin=f, stdout=sp.DEVNULL, check=True)
        else:
            with tempfile.TemporaryFile() as out:
                d = sp.Popen(cmd, stdin=f, stdout=sp.PIPE)
                sp.run(TOOLS[use], stdin=d.stdout, stdout=sp.DEVNULL if use == "cat" else out)
                d.stdout.close()
                if d.wait() != 0:
                    raise SystemExit("%s failed" % cmd[0])
    return time.perf_counter() - t


OPTS = ""


def through_mount(src, shown, cache, cat=True, blockfs=None, use="cat"):
    """stat, then cat SHOWN through a fresh mount of SRC: (seconds for both,
    daemon CPU seconds, seconds of the stat).
    With CACHE (a directory), the index cache lives there; else it is off.
    cat=False only stats the file (to fill the cache)."""
    mnt = tempfile.mkdtemp(prefix="blockfs-codecs.")
    p = sp.Popen([blockfs or BLOCKFS, "-f", src, mnt, "-o", "index_cache=" + (cache or "off") + OPTS])
    while not os.path.ismount(mnt):
        if p.poll() is not None:
            raise SystemExit("blockfs did not mount")
        time.sleep(0.01)
    t = time.perf_counter()
    os.stat(os.path.join(mnt, shown))
    st = time.perf_counter() - t
    if cat:
        with tempfile.TemporaryFile() as out:
            sp.run(TOOLS[use] + [os.path.join(mnt, shown)],
                   stdout=sp.DEVNULL if use == "cat" else out, check=use != "grep")
    dt = time.perf_counter() - t
    c = cpu(p.pid)
    sp.run(["fusermount3", "-u", mnt], check=True)
    p.wait()
    os.rmdir(mnt)
    return dt, c, st


def files(mib, kind="log"):
    """Write the text and each writer's file of it, once: (their directory,
    the text's path, {writer: the directory of its file})."""
    top = os.path.join(REPO, "bench", "data", "codecs",
                       "%dM" % mib if kind == "log" else "%s-%dM" % (kind, mib))
    os.makedirs(top, exist_ok=True)
    plain = os.path.join(top, "text")
    if kind == "log":
        text(plain, mib)
    else:
        _, made = benchdata.linux_text(top, mib << 20)
        for n, (backing, _, _) in list(WRITERS.items()) + [("plain", ("text", 0, 0))]:
            if made and os.path.exists(os.path.join(top, n, backing)):
                os.unlink(os.path.join(top, n, backing))
    dirs = {}
    for n, (backing, writer, _) in WRITERS.items():
        d = os.path.join(top, n)
        os.makedirs(d, exist_ok=True)
        out = os.path.join(d, backing)
        if not os.path.exists(out):
            write(writer, plain, out + ".tmp")
            os.rename(out + ".tmp", out)
        dirs[n] = d
    return top, plain, dirs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", help="comma-separated writers (default: all)")
    ap.add_argument("--opts", default="", help="more mount options, e.g. verify=off")
    ap.add_argument("--cached", action="store_true",
                    help="time cat on a mount whose index cache an earlier mount filled")
    ap.add_argument("--base", help="another blockfs binary, timed in the same rounds")
    ap.add_argument("--text", choices=("log", "linux"), default="log",
                    help="log-like lines, or linux-source's first MiB")
    ap.add_argument("--tools", default="cat", help="comma-separated: cat, md5sum, grep")
    ap.add_argument("--pipe-cat", action="store_true",
                    help="cat's baseline is X -dc FILE | cat > /dev/null")
    a = ap.parse_args()
    global OPTS, PIPE_CAT
    OPTS = "," + a.opts if a.opts else ""
    PIPE_CAT = a.pipe_cat
    uses = a.tools.split(",")
    if any(u not in TOOLS for u in uses):
        raise SystemExit("--tools: cat, md5sum or grep")
    top, plain, _ = files(a.mib, a.text)
    names = a.only.split(",") if a.only else list(WRITERS)
    # the floor: the text itself, shown unchanged, through the same mount (against cat of it)
    d = os.path.join(top, "plain")
    os.makedirs(d, exist_ok=True)
    if not os.path.exists(os.path.join(d, "text")):
        os.link(plain, os.path.join(d, "text"))
    WRITERS["plain"] = ("text", None, ["cat"])
    names.append("plain")
    cache = tempfile.mkdtemp(prefix="blockfs-codecs-cache.") if a.cached else None
    if cache:
        for n in names:
            through_mount(os.path.join(top, n), shown(WRITERS[n][0]), cache, False)
    def label(n, use):
        return n if use == "cat" else "%s %s" % (n, use)
    rows = [(label(n, u), None) for n in names for u in uses]
    if a.base:
        rows = [row for n in names for u in uses
                for row in ((label(n, u), None), (label(n, u) + " (base)", a.base))]
    res = {row: {"tool": [], "bfs": [], "cpu": [], "ratio": [], "stat": []} for row, _ in rows}
    for _ in range(a.rounds):
        for n, use in ((n, u) for n in names for u in uses):
            backing, _, dec = WRITERS[n]
            d = os.path.join(top, n)
            t0 = tool(dec, os.path.join(d, backing), use)
            for row, binary in rows:
                if row not in (label(n, use), label(n, use) + " (base)"):
                    continue
                t1, c, st = through_mount(d, shown(backing), cache, blockfs=binary, use=use)
                r = res[row]
                r["stat"].append(st)
                r["tool"].append(t0)
                r["bfs"].append(t1)
                r["cpu"].append(c)
                r["ratio"].append(t1 / t0)
    med = statistics.median
    print("%d MiB of %s, %d paired rounds; cat (md5sum, grep -c %s) through %s against "
          "X -dc of the file (%s; md5sum and grep: piped into the tool); plain: the text itself "
          "through the mount against cat of it\n" % (
              a.mib, "log-like text" if a.text == "log" else "linux-source's tarball",
              a.rounds, GREP_WORD,
              "a mount whose index an earlier mount cached" if cache else
              "a first mount (-o index_cache=off)",
              "piped into cat" if PIPE_CAT else "into /dev/null"))
    if OPTS:
        print("Mount options: %s\n" % a.opts)
    print("| writer | X -dc | blockfs stat + cat | blockfs / X -dc | range | speed-up "
          "| first stat | daemon CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for n, _ in rows:
        r = res[n]
        print("| %s | %.2f s | %.2f s | %.2f | %.2f-%.2f | %.2fx | %.3f s | %.2f s |" % (
            n, med(r["tool"]), med(r["bfs"]), med(r["ratio"]), min(r["ratio"]),
            max(r["ratio"]), 1 / med(r["ratio"]), med(r["stat"]), med(r["cpu"])))


if __name__ == "__main__":
    main()
