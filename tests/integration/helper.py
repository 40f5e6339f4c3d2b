#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Byte-level helpers for tests/integration/mount.sh.

Generates text originals and skippable frames, locates and damages LZ4
blocks and BGZF members in files made by the real lz4/bgzip CLIs, and
reads mounted files at exact offsets (os.pread) to compare them with the
originals.  Knows nothing about blockfs internals: only the two public
formats and what blockfs(8) promises about reads.

Subcommands that check something print TAP lines ("ok - ..." or
"not ok - ...", diagnostics after "# "); mount.sh counts them.
"""

import errno
import hashlib
import os
import random
import struct
import sys

LZ4_MAGIC = 0x184D2204
SKIPPABLE_MIN, SKIPPABLE_MAX = 0x184D2A50, 0x184D2A5F
BGZF_HEADER = 18  # fixed BGZF member header: gzip header + XLEN + 'BC' subfield
GZIP_TRAILER = 8  # CRC32 + ISIZE


def die(msg):
    sys.stderr.write("helper.py: %s\n" % msg)
    sys.exit(2)


# ---------------------------------------------------------------- generation

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima "
         "mike november oscar papa quebec romeo sierra tango uniform victor whiskey "
         "xray yankee zulu block frame member index cache offset stream reader "
         "the of and a to in is it that for on with as was at by").split()


def cmd_gentext(out, size, seed, word, count):
    """Text of exactly SIZE bytes; WORD appears on exactly COUNT lines."""
    size, seed, count = int(size), int(seed), int(count)
    rng = random.Random(seed)
    lines = []
    total = 0
    n = 0
    while total < size:
        nw = rng.randint(1, 14)
        line = "%06d " % n + " ".join(rng.choice(WORDS) for _ in range(nw)) + "\n"
        lines.append(line)
        total += len(line)
        n += 1
    data = "".join(lines).encode()[:size]
    # Place the rare word on COUNT distinct complete lines, spread out.
    lines = data.split(b"\n")
    w = word.encode()
    # Only complete lines (the last piece may be partial) long enough to hold it.
    fit = [i for i in range(len(lines) - 1) if len(lines[i]) >= len(w) + 8]
    if count > len(fit):
        die("text too small for %d rare lines" % count)
    for i in sorted(rng.sample(fit, count)):
        ln = lines[i]
        lines[i] = ln[:7] + w + ln[7 + len(w):]
    data = b"\n".join(lines)
    assert len(data) == size and data.count(w) == count
    with open(out, "wb") as f:
        f.write(data)


def cmd_skippable(out, payload_len, variant="0"):
    """Append one LZ4 skippable frame (magic 0x184D2A5v) to OUT."""
    n = int(payload_len)
    magic = SKIPPABLE_MIN + (int(variant) & 0xF)
    payload = bytes((i * 7 + 3) & 0xFF for i in range(n))
    with open(out, "ab") as f:
        f.write(struct.pack("<II", magic, n) + payload)


# ---------------------------------------------------------------- format walk

def lz4_blocks(buf):
    """(data_offset, data_len) of every data block, across all frames."""
    out = []
    pos = 0
    while pos < len(buf):
        if pos + 8 > len(buf):
            die("trailing bytes at %d" % pos)
        magic = struct.unpack_from("<I", buf, pos)[0]
        if SKIPPABLE_MIN <= magic <= SKIPPABLE_MAX:
            pos += 8 + struct.unpack_from("<I", buf, pos + 4)[0]
            continue
        if magic != LZ4_MAGIC:
            die("bad magic at %d" % pos)
        flg = buf[pos + 4]
        pos += 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1
        bsum = 4 if flg & 0x10 else 0
        while True:
            word = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
            if word == 0:
                break
            size = word & 0x7FFFFFFF
            out.append((pos, size))
            pos += size + bsum
        if flg & 0x04:
            pos += 4
    return out


def bgzf_members(buf):
    """(member_offset, member_len) of every BGZF member."""
    out = []
    pos = 0
    while pos < len(buf):
        if buf[pos:pos + 4] != b"\x1f\x8b\x08\x04" or buf[pos + 12:pos + 14] != b"BC":
            die("not a BGZF member at %d" % pos)
        bsize = struct.unpack_from("<H", buf, pos + 16)[0] + 1
        out.append((pos, bsize))
        pos += bsize
    return out


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def cmd_lz4_blocks(path):
    print(len(lz4_blocks(read_all(path))))


def cmd_flip_lz4(path, idx):
    """Flip one byte in the middle of data block IDX (0-based)."""
    buf = bytearray(read_all(path))
    off, size = lz4_blocks(buf)[int(idx)]
    at = off + size // 2
    buf[at] ^= 0x55
    with open(path, "wb") as f:
        f.write(buf)
    print(at)


def cmd_cut_lz4(path, idx):
    """Truncate PATH in the middle of data block IDX's data."""
    off, size = lz4_blocks(read_all(path))[int(idx)]
    os.truncate(path, off + size // 2)
    print(off + size // 2)


def cmd_flip_bgzf(path, idx):
    """Flip one byte in the middle of member IDX's deflate data."""
    buf = bytearray(read_all(path))
    off, size = bgzf_members(buf)[int(idx)]
    at = off + BGZF_HEADER + (size - BGZF_HEADER - GZIP_TRAILER) // 2
    buf[at] ^= 0x55
    with open(path, "wb") as f:
        f.write(buf)
    print(at)


def cmd_cut_bgzf(path, idx):
    """Truncate PATH in the middle of member IDX."""
    off, size = bgzf_members(read_all(path))[int(idx)]
    os.truncate(path, off + size // 2)
    print(off + size // 2)


def cmd_bgzf_members(path):
    print(len(bgzf_members(read_all(path))))


# ---------------------------------------------------------------- reading

def ename(e):
    return errno.errorcode.get(e, str(e))


def pread_all(fd, off, length):
    """Read up to LENGTH bytes at OFF, looping on short reads; stop at EOF."""
    parts = []
    while length > 0:
        b = os.pread(fd, length, off)
        if not b:
            break
        parts.append(b)
        off += len(b)
        length -= len(b)
    return b"".join(parts)


BOUNDARIES = (65280, 65536, 262144, 1 << 20, 4 << 20)


def regular_files(root):
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(d, name)
            if os.path.isfile(p) and not os.path.islink(p):
                yield os.path.relpath(p, root)


def cmd_randread(orig_root, mnt_root, nreads, seed, label):
    """NREADS preads per file at offsets biased to block boundaries."""
    nreads, seed = int(nreads), int(seed)
    for rel in regular_files(orig_root):
        want = read_all(os.path.join(orig_root, rel))
        size = len(want)
        rng = random.Random("%d:%s" % (seed, rel))
        bad = None
        try:
            fd = os.open(os.path.join(mnt_root, rel), os.O_RDONLY)
        except OSError as e:
            print("not ok - %s randread %s\n# open: %s" % (label, rel, ename(e.errno)))
            continue
        try:
            for i in range(nreads):
                r = rng.random()
                length = rng.choice((1, 2, 7, 512, 4096, 4097, 65536, 65537, 131072,
                                     rng.randint(1, 300000)))
                if r < 0.6 and size:
                    b = rng.choice(BOUNDARIES)
                    k = rng.randint(1, max(1, size // b))
                    off = max(0, k * b - rng.randint(0, min(length, k * b)))
                elif r < 0.95:
                    off = rng.randint(0, max(0, size - 1))
                else:
                    off = size + rng.randint(-3, 3)  # around and past EOF
                    off = max(0, off)
                try:
                    got = pread_all(fd, off, length)
                except OSError as e:
                    bad = "pread(off=%d, len=%d): %s" % (off, length, ename(e.errno))
                    break
                exp = want[off:off + length]
                if got != exp:
                    at = next((j for j in range(min(len(got), len(exp)))
                               if got[j] != exp[j]), min(len(got), len(exp)))
                    bad = ("pread(off=%d, len=%d): got %d bytes, want %d, first "
                           "difference at +%d" % (off, length, len(got), len(exp), at))
                    break
        finally:
            os.close(fd)
        if bad:
            print("not ok - %s randread %s\n# %s" % (label, rel, bad))
        else:
            print("ok - %s randread %s (%d preads)" % (label, rel, nreads))


def cmd_range(mnt_file, orig_file, off, length, expect):
    """Exit 0 if pread(OFF, LEN) of MNT_FILE gives EXPECT: 'data' (equal
    to ORIG_FILE's bytes) or an errno name such as 'EIO'.  Prints what
    happened on stdout."""
    off, length = int(off), int(length)
    fd = os.open(mnt_file, os.O_RDONLY)
    try:
        got = pread_all(fd, off, length)
        res = "data"
    except OSError as e:
        res = ename(e.errno)
    finally:
        os.close(fd)
    if res == "data":
        with open(orig_file, "rb") as f:
            f.seek(off)
            exp = f.read(length)
        if got != exp:
            res = "wrong-data(%d bytes, want %d)" % (len(got), len(exp))
    print(res)
    sys.exit(0 if res == expect else 1)


def cmd_prefix(mnt_file, orig_file, intact, chunk):
    """Read MNT_FILE sequentially in CHUNK-byte reads: the bytes before the
    first error must equal ORIG_FILE's prefix and the error must be EIO.
    The prefix must be INTACT bytes long, or INTACT rounded down to a 4 KiB
    page (reads through the page cache lose the page holding the damage)."""
    intact, chunk = int(intact), int(chunk)
    orig = read_all(orig_file)
    got = bytearray()
    err = "EOF"
    with open(mnt_file, "rb", buffering=0) as f:
        while True:
            try:
                b = f.read(chunk)
            except OSError as e:
                err = ename(e.errno)
                break
            if not b:
                break
            got += b
    same = bytes(got) == orig[:len(got)]
    ok = err == "EIO" and same and len(got) in (intact, intact // 4096 * 4096)
    print("%d bytes then %s (prefix %s; want %d or %d bytes then EIO)"
          % (len(got), err, "matches" if same else "DIFFERS",
             intact // 4096 * 4096, intact))
    sys.exit(0 if ok else 1)


def cmd_md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    print(h.hexdigest())


def main():
    cmds = {
        "gentext": cmd_gentext, "skippable": cmd_skippable,
        "lz4-blocks": cmd_lz4_blocks, "flip-lz4": cmd_flip_lz4, "cut-lz4": cmd_cut_lz4,
        "bgzf-members": cmd_bgzf_members, "flip-bgzf": cmd_flip_bgzf,
        "cut-bgzf": cmd_cut_bgzf,
        "randread": cmd_randread, "range": cmd_range, "prefix": cmd_prefix,
        "md5": cmd_md5,
    }
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        die("usage: helper.py {%s} ARGS..." % ",".join(sorted(cmds)))
    cmds[sys.argv[1]](*sys.argv[2:])


if __name__ == "__main__":
    main()
