#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""LZ4 files from a writer that flushes mid-frame (python-lz4), for sizes.sh.

    sizes.py make SRC WORK    write SRC/NAME.lz4 and WORK/NAME (the original)
    sizes.py stat MNT WORK    TAP: st_size of every file, before any read
    sizes.py read MNT WORK    TAP: f.read(), seeded random preads, reads past the end

python-lz4 with auto_flush writes one block per compress() call, so pieces
of 1..5000 bytes leave short blocks in the middle of a frame: what every
flushing writer (lz4_flex, lz4-java, Go's lz4) does. With and without the
content size in the header, with and without block and content checksums,
64 KiB and 256 KiB blocks.
"""

import os
import random
import sys

KINDS = [  # name, block size, content size stored, block checksum, content checksum
    ("b64-nosize", "64K", False, False, False),
    ("b64-size", "64K", True, False, False),
    ("b64-size-bsum-csum", "64K", True, True, True),
    ("b64-nosize-bsum", "64K", False, True, False),
    ("b256-nosize-csum", "256K", False, False, True),
    ("b256-size-bsum", "256K", True, True, False),
]


def original(seed, size):
    rng = random.Random(seed)
    parts, n = [], 0
    while n < size:
        line = ("%08d %s\n" % (n, "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(0, 90)))))
        parts.append(line.encode())
        n += len(parts[-1])
    return b"".join(parts)[:size]


def make(src, work):
    import lz4.frame as lf

    sizes = {"64K": lf.BLOCKSIZE_MAX64KB, "256K": lf.BLOCKSIZE_MAX256KB}
    for i, (name, bs, stored, bsum, csum) in enumerate(KINDS):
        data = original(i, 1_300_017 + 4099 * i)
        rng = random.Random(100 + i)
        c = lf.LZ4FrameCompressor(block_size=sizes[bs], block_linked=False,
                                  content_checksum=csum, block_checksum=bsum, auto_flush=True)
        out = [c.begin(len(data) if stored else 0)]
        pos = 0
        while pos < len(data):
            n = rng.randint(1, 5000)
            out.append(c.compress(data[pos:pos + n]))
            pos += n
        out.append(c.flush())
        blob = b"".join(out)
        assert lf.decompress(blob) == data
        with open(os.path.join(src, name + ".lz4"), "wb") as f:
            f.write(blob)
        with open(os.path.join(work, name), "wb") as f:
            f.write(data)


def tap(ok, what, *diag):
    print(("ok - " if ok else "not ok - ") + what)
    for d in diag:
        print("# " + str(d))


def stat_all(mnt, work):
    for name, *_ in KINDS:
        want = os.path.getsize(os.path.join(work, name))
        got = os.stat(os.path.join(mnt, name)).st_size
        tap(got == want, "%s: st_size on a fresh mount, before any read" % name,
            "st_size %d, content %d" % (got, want))


def read_all(mnt, work):
    for name, *_ in KINDS:
        path = os.path.join(mnt, name)
        with open(os.path.join(work, name), "rb") as f:
            want = f.read()
        with open(path, "rb") as f:
            got = f.read()
        tap(got == want, "%s: Python f.read() gives every byte and no more" % name,
            "read %d bytes, content %d" % (len(got), len(want)))
        rng = random.Random(name)
        bad = []
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(300):
                off = rng.randrange(0, len(want) + 1000)
                n = rng.choice((1, 100, 4096, 65536, 300000))
                if os.pread(fd, n, off) != want[off:off + n]:
                    bad.append((off, n))
            past = os.pread(fd, 4096, len(want))
        finally:
            os.close(fd)
        tap(not bad, "%s: 300 seeded random preads match" % name, "wrong at %s" % bad[:5])
        tap(past == b"", "%s: a read at the end is empty" % name, "got %d bytes" % len(past))


def main():
    cmd, a, b = sys.argv[1:4]
    {"make": make, "stat": stat_all, "read": read_all}[cmd](a, b)


if __name__ == "__main__":
    main()
