#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The cost of the first stat(2) of a big compressed file on a fresh mount.

st_size is exact from the first stat, so a file whose sizes the format
does not state (a stock `lz4` file has no content size) is measured then:
every block parsed once, in parallel on the workers. This times that first
stat against decoding the whole file with `lz4 -dc > /dev/null`, in paired
rounds (each round: a fresh mount, one stat, unmount; then the decode), and
counts the daemon's backing reads (user.blockfs.stats "syscalls").

    bench/first_stat.py [--size-mib 1024] [--rounds 5] [--opts O]
                        [--kinds lz4-B4,lz4,...] [--index-cache]
                        [--zeros-gib 1024]

--index-cache adds, for every kind, a row with -o index_cache=DIR whose
entry one untimed mount made before the rounds (bench/data/first_stat/
icache): the first stat after a remount, which loads the kept index
instead of walking. Walks with fewer than 8 reads are not kept, so the
pack row stays as it was.

Makes its data once under bench/data/first_stat/ from Debian's
linux-source tarball: stock `lz4 -B4`, stock `lz4` (4 MiB blocks),
python-lz4 flushing every 1..5000 bytes without a content size,
blockfs-pack, bgzip. As root, with Debian's python3 (python3-lz4).

The kind "zeros" (not in the default list) is a synthetic stock
`lz4 -B4 --no-frame-crc` file, zeros/text.lz4, of --zeros-gib GiB of zero
bytes: 1 TiB is 16 Mi blocks, 4.5 GB on disk. Compressing a terabyte
takes lz4 many minutes, so the file is written block by block from what
`lz4` makes of three blocks of zeros (at 1 GiB the result equals lz4's own
output byte for byte). Its decode is not timed.
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
DATA = os.path.join(REPO, "bench", "data", "first_stat")


ZBLOCK = 64 << 10


def make_zeros(out, gib):
    """A stock `lz4 -B4 --no-frame-crc` frame of @gib GiB of zeros."""
    lz4 = ["lz4", "-q", "-B4", "--no-frame-crc", "-c"]
    t = sp.run(lz4, input=bytes(3 * ZBLOCK), stdout=sp.PIPE, check=True).stdout
    head, body, end = t[:7], t[7:-4], t[-4:]
    blk = body[:len(body) // 3]
    if body != blk * 3 or end != bytes(4) or head[4] & 0x08:
        raise SystemExit("lz4 made an unexpected frame of zeros: %s" % t.hex())
    n = (gib << 30) // ZBLOCK
    if os.path.exists(out) and os.path.getsize(out) == len(head) + n * len(blk) + len(end):
        return
    with open(out + ".tmp", "wb") as o:
        o.write(head)
        chunk = blk * 4096
        for _ in range(n // 4096):
            o.write(chunk)
        o.write(blk * (n % 4096))
        o.write(end)
    os.rename(out + ".tmp", out)


def make(size, kinds, zeros_gib):
    if "zeros" in kinds:
        d = os.path.join(DATA, "zeros")
        os.makedirs(d, exist_ok=True)
        make_zeros(os.path.join(d, "text.lz4"), zeros_gib)
    if kinds == ["zeros"]:
        return None
    text, made = benchdata.linux_text(DATA, size)
    if made:
        for f in glob.glob(os.path.join(DATA, "*", "*")):
            os.unlink(f)
    cmds = {
        "lz4-B4": ["lz4", "-q", "-f", "-B4", text],
        "lz4": ["lz4", "-q", "-f", text],
        "pack": [os.path.join(REPO, "build/tools/blockfs-pack"), "-q", "-f", "-o"],
    }
    for k, argv in cmds.items():
        if k not in kinds:
            continue
        d = os.path.join(DATA, k)
        os.makedirs(d, exist_ok=True)
        out = os.path.join(d, "text.lz4")
        if not os.path.exists(out):
            sp.run(argv + ([out, text] if k == "pack" else [out]), check=True)
    d = os.path.join(DATA, "bgzf")
    os.makedirs(d, exist_ok=True)
    if "bgzf" in kinds and not os.path.exists(os.path.join(d, "text.gz")):
        sp.run("bgzip -@2 -c %s > %s/text.gz" % (text, d), shell=True, check=True)
    d = os.path.join(DATA, "python-lz4")
    os.makedirs(d, exist_ok=True)
    out = os.path.join(d, "text.lz4")
    if "python-lz4" in kinds and not os.path.exists(out):
        import lz4.frame as lf
        rng = random.Random(1)
        c = lf.LZ4FrameCompressor(block_size=lf.BLOCKSIZE_MAX64KB, block_linked=False,
                                  auto_flush=True)
        with open(text, "rb") as f, open(out, "wb") as o:
            o.write(c.begin())
            while True:
                piece = f.read(rng.randint(1, 5000))
                if not piece:
                    break
                o.write(c.compress(piece))
            o.write(c.flush())
    return text


def first_stat(binary, opts, src, mnt):
    d = sp.Popen([binary, "-f", src, mnt, "-o", benchdata.first_mount(opts)])
    try:
        while sp.run(["mountpoint", "-q", mnt]).returncode:
            if d.poll() is not None:
                raise SystemExit("blockfs did not mount")
            time.sleep(0.02)
        t = time.perf_counter()
        size = os.stat(os.path.join(mnt, "text")).st_size
        dt = time.perf_counter() - t
        stats = os.getxattr(mnt, "user.blockfs.stats").decode()
        calls = int(next(l.split()[1] for l in stats.splitlines() if l.startswith("backing_syscalls ")))
    finally:
        sp.run(["fusermount3", "-u", mnt])
        d.wait()
    return dt, size, calls


def decode_time(path):
    dec = ["bgzip", "-dc", path] if path.endswith(".gz") else ["lz4", "-dc", path]
    t = time.perf_counter()
    # not check=True: lz4 1.9.4 exits 1 after decoding a frame with block
    # checksums but no content checksum that a skippable frame follows
    # (blockfs-pack's seek table), though it wrote every byte
    sp.run(dec, stdout=sp.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--opts", default="")
    ap.add_argument("--kinds", default="lz4-B4,lz4,python-lz4,pack,bgzf")
    ap.add_argument("--index-cache", action="store_true")
    ap.add_argument("--zeros-gib", type=int, default=1024)
    ap.add_argument("--blockfs", default=os.path.join(REPO, "build/src/blockfs"))
    a = ap.parse_args()
    kinds = a.kinds.split(",")
    text = make(a.size_mib << 20, kinds, a.zeros_gib)
    want = {k: a.zeros_gib << 30 if k == "zeros" else os.path.getsize(text) for k in kinds}
    mnt = tempfile.mkdtemp(prefix="blockfs-stat.")
    rows = [(k, False) for k in kinds] + ([(k, True) for k in kinds] if a.index_cache else [])
    icache = os.path.join(DATA, "icache")
    res = {r: [] for r in rows}

    def opts_of(cached):
        o = [a.opts] if a.opts else []
        return ",".join(o + (["index_cache=" + icache] if cached else []))

    try:
        if a.index_cache:
            shutil.rmtree(icache, ignore_errors=True)
            os.makedirs(icache, mode=0o700)
            for k in kinds:			# one walk each: the entries
                first_stat(a.blockfs, opts_of(True), os.path.join(DATA, k), mnt)
        for _ in range(a.rounds):
            for k, cached in rows:
                src = os.path.join(DATA, k)
                backing = glob.glob(os.path.join(src, "text.*"))[0]
                sp.run(["cat", backing], stdout=sp.DEVNULL)  # backing file warm
                dt, size, calls = first_stat(a.blockfs, opts_of(cached), src, mnt)
                if size != want[k]:
                    raise SystemExit("%s: st_size %d, content %d" % (k, size, want[k]))
                de = None if k == "zeros" else decode_time(backing)
                res[(k, cached)].append((dt, de, calls))
    finally:
        os.rmdir(mnt)
    what = ["%d MiB of linux-source text" % a.size_mib] if text else []
    what += ["%d GiB of zeros" % a.zeros_gib] if "zeros" in kinds else []
    print("%s, first stat on a fresh mount, %d paired rounds%s"
          % (" and ".join(what), a.rounds, ", -o " + a.opts if a.opts else ""))
    print("| file | first stat ms (median, range) | decode ms (lz4/bgzip -dc) | stat / decode "
          "(median, range) | backing reads |")
    print("|---|---:|---:|---:|---:|")
    for k, cached in rows:
        r = res[(k, cached)]
        st = [x[0] * 1000 for x in r]
        name = k + (", index_cache warm" if cached else "")
        reads = statistics.median(x[2] for x in r)
        if r[0][1] is None:
            print("| %s | %.1f (%.1f-%.1f) | - | - | %d |" % (name, statistics.median(st), min(st),
                                                            max(st), reads))
            continue
        de = [x[1] * 1000 for x in r]
        ratio = [x[0] / x[1] for x in r]
        print("| %s | %.1f (%.1f-%.1f) | %.0f | %.3f (%.3f-%.3f) | %d |" % (
            name, statistics.median(st), min(st), max(st), statistics.median(de),
            statistics.median(ratio), min(ratio), max(ratio), reads))


if __name__ == "__main__":
    main()
