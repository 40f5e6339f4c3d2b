#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Readers that race blockfs's pushes into the page cache, for push.sh.

Each subcommand reads files on a mount and compares every byte with the
originals, printing TAP lines ("ok - ..." / "not ok - ...", diagnostics
after "# "). Knows nothing of blockfs's internals but the stats attribute.

    push.py streams MNT ORIG NAME...     one sequential reader per file, at once
    push.py race MNT ORIG NAME           a sequential reader, random readers and
                                         willneed on the same pages at once
    push.py slow MNT ORIG NAME           a slow sequential reader: pages pushed ahead
    push.py dontneed MNT ORIG NAME       dontneed, again and again, while it is read
    push.py zipf MNT ORIG NAME           skewed 4 KiB random reads (blocks pushed whole)
    push.py replace MNT BACKING V2.LZ4 V2 rename|inplace
                                         the backing file replaced mid-stream
    push.py stat MNT KEY [PATH]          print a counter of user.blockfs.stats
"""

import hashlib
import os
import random
import sys
import threading
import time

CHUNK = 128 << 10


def tap(ok, what, *diag):
    print(("ok - " if ok else "not ok - ") + what)
    for d in diag:
        print("# " + str(d))


def stat(path, key):
    s = os.getxattr(path, "user.blockfs.stats").decode()
    return int(next(l.split()[1] for l in s.splitlines() if l.split()[0] == key))


def digest(path, chunk=CHUNK):
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(chunk)
            if not b:
                return h.hexdigest()
            h.update(b)


def streams(mnt, orig, *names):
    want = {n: digest(os.path.join(orig, n)) for n in names}
    got = {}

    def one(n):
        try:
            got[n] = digest(os.path.join(mnt, n))
        except OSError as e:
            got[n] = str(e)

    threads = [threading.Thread(target=one, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [n for n in names if got[n] != want[n]]
    tap(not bad, "%d sequential readers at once: every byte of every file" % len(names),
        "differ: %s" % bad)


def grows(path, key, before, seconds=10.0):
    """Did counter @key of @path pass @before, within @seconds? Decoding
    ahead runs on nice 19 workers, slow to get a core on a busy machine."""
    deadline = time.monotonic() + seconds
    while stat(path, key) <= before and time.monotonic() < deadline:
        time.sleep(0.05)
    return stat(path, key) > before


def slow(mnt, orig, name):
    """A reader slower than the decoding: pages are pushed ahead of it."""
    path = os.path.join(mnt, name)
    before = stat(path, "pushed_bytes")
    reads0 = stat(path, "reads")
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(CHUNK)
            if not b:
                break
            h.update(b)
            time.sleep(0.002)
    tap(h.hexdigest() == digest(os.path.join(orig, name)), "a slow sequential reader: every byte")
    size = os.path.getsize(path)
    tap(grows(path, "pushed_bytes", before), "... and pages were pushed ahead of it",
        "pushed_bytes %d -> %d; %d READs for %d bytes" % (before, stat(path, "pushed_bytes"),
                                                          stat(path, "reads") - reads0, size))


def race(mnt, orig, name):
    with open(os.path.join(orig, name), "rb") as f:
        data = f.read()
    path = os.path.join(mnt, name)
    bad = []

    def sequential():
        if digest(path) != hashlib.sha256(data).hexdigest():
            bad.append("sequential")

    def randoms(seed):
        rng = random.Random(seed)
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(400):
                off = rng.randrange(0, len(data))
                n = rng.choice((4096, 65536, 262144))
                if os.pread(fd, n, off) != data[off:off + n]:
                    bad.append((off, n))
        finally:
            os.close(fd)

    def willneed():
        for _ in range(5):
            os.setxattr(path, "user.blockfs.advice", b"willneed")

    ts = [threading.Thread(target=sequential), threading.Thread(target=willneed)]
    ts += [threading.Thread(target=randoms, args=(s,)) for s in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    tap(not bad, "a sequential reader, 3 random readers and willneed on one file: every byte",
        "wrong: %s" % bad[:5])
    tap(digest(path) == hashlib.sha256(data).hexdigest(), "read again afterwards: every byte")


def dontneed(mnt, orig, name):
    with open(os.path.join(orig, name), "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    path = os.path.join(mnt, name)
    stop = threading.Event()
    errs = []

    def evict():
        while not stop.is_set():
            try:
                os.setxattr(path, "user.blockfs.advice", b"dontneed")
            except OSError as e:
                errs.append(e)

    t = threading.Thread(target=evict)
    t.start()
    try:
        got = [digest(path) for _ in range(3)]
    finally:
        stop.set()
        t.join()
    tap(all(g == want for g in got) and not errs,
        "dontneed again and again while the file is read 3 times: every byte", errs[:3])


def zipf(mnt, orig, name):
    with open(os.path.join(orig, name), "rb") as f:
        data = f.read()
    path = os.path.join(mnt, name)
    bs = int(os.getxattr(path, "user.blockfs.block_size"))
    nblocks = (len(data) + bs - 1) // bs
    rng = random.Random(12)
    weights = [1.0 / (k + 1) ** 1.2 for k in range(nblocks)]
    order = list(range(nblocks))
    rng.shuffle(order)
    before = stat(path, "pushed_bytes")
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    bad = []
    try:
        for k in rng.choices(order, weights, k=3000):
            off = min(k * bs + rng.randrange(0, bs), len(data) - 1)
            if os.pread(fd, 4096, off) != data[off:off + 4096]:
                bad.append(off)
    finally:
        os.close(fd)
    tap(not bad, "3000 skewed 4 KiB random reads: every byte", "wrong at %s" % bad[:5])
    tap(grows(path, "pushed_bytes", before),
        "... and blocks read again were pushed whole to the page cache",
        "pushed_bytes %d -> %d" % (before, stat(path, "pushed_bytes")))


def replace(mnt, backing, v2lz4, v2orig, how):
    """Pushes of the old version in flight when the file is replaced: none
    may land in the new version's page cache."""
    name = os.path.basename(backing)[:-len(".lz4")]
    path = os.path.join(mnt, name)
    with open(v2orig, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    with open(v2lz4, "rb") as f:
        new = f.read()
    with open(path, "rb", buffering=0) as r:
        for _ in range(16):		# sequential: pushes run ahead of it now
            r.read(CHUNK)
        if how == "rename":
            tmp = backing + ".tmp"
            with open(tmp, "wb") as f:
                f.write(new)
            os.rename(tmp, backing)
        else:				# in place: the same backing inode
            with open(backing, "r+b") as f:
                f.truncate(0)
                f.write(new)
    got = digest(path)
    tap(got == want, "replaced (%s) while pushes were in flight: a new open reads the new "
        "bytes" % how)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "stat":
        print(stat(args[2] if len(args) > 2 else args[0], args[1]))
        return
    {"streams": streams, "race": race, "dontneed": dontneed, "zipf": zipf,
     "replace": replace, "slow": slow}[cmd](*args)


if __name__ == "__main__":
    main()
