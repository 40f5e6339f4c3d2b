#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile backing files for tests/integration/hostile.sh (Python 3 stdlib only).

gen:   from a deterministic plain original, make real compressed files with
       the real tools (lz4 -BX, lz4 --content-size, two frames around a
       skippable frame, bgzip with and without -i, blockfs-pack for both
       codecs), then write a few hundred damaged variants of them with a
       fixed seed into one SOURCE directory: bit flips at random offsets and
       in every header field, truncations at every block boundary +-1 and
       inside headers, zeroed ranges, absurd size fields, junk appended,
       lying seek tables (checksum recomputed, so they pass as genuine) and
       lying .gzi indexes beside an intact .gz.  Each variant is also fed to
       the format's own decoder (lz4 -d, gzip -d): when that accepts it, its
       output is a second reference beside the original; otherwise the
       original alone is, and a prefix of it or EIO is what a reader may
       see.  One damage no per-block check can see is marked undetectable:
       a flipped "stored" bit in an LZ4 size word (the block checksum
       covers the data only, the content checksum the whole frame); for it
       the blocks' own reading is the second reference.  manifest.json says
       for every variant what it derives from and what was done.

check: against a mount of SOURCE, read every variant the way tools do
       (O_DIRECT preads at odd offsets and lengths, aligned 64 KiB steps,
       then a buffered sequential read like cat), each variant in a forked
       child under a timeout.  A successful read must return exactly the
       reference bytes at its offset, never a byte past its end; a failed
       one must fail with EIO.  A variant whose bytes are no longer its
       suffix's format (a damaged magic) keeps its decoded name and its
       open fails with EIO ("refused").  A sequential read that ends
       early without an error is a silently short file: a failure.  Every
       few variants the daemon must still be alive and intact control files
       must read back exactly.  Prints TAP lines ("ok - ...", "not ok - ...")
       and the outcome table as "# " diagnostics.
"""

import argparse
import errno
import json
import os
import random
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib

SEED = 20261121
ORIG_LEN = 220_123          # several 64 KiB blocks, the last one partial
SPLIT = 120_000             # where the two-frame base switches frames
CONTROL_LEN = 150_003

LZ4_MAGIC = 0x184D2204
SKIP_MAGIC = 0x184D2A50
ST_MAGIC = 0x184D2A5B
ST_FOOTER_MAGIC = 0xB10C5EEC
ST_FOOTER = 36
M32 = 0xFFFFFFFF

# ---------------------------------------------------------------- helpers


def le16(b, o):
    return struct.unpack_from("<H", b, o)[0]


def le32(b, o):
    return struct.unpack_from("<I", b, o)[0]


def le64(b, o):
    return struct.unpack_from("<Q", b, o)[0]


P1, P2, P3, P4, P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def xxh32(data, seed=0):
    """XXH32 (xxhash spec), enough for LZ4 header checksums and seek tables."""
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + P1 + P2) & M32, (seed + P2) & M32, seed & M32, (seed - P1) & M32]
        while i + 16 <= n:
            for j in range(4):
                v[j] = (_rotl((v[j] + le32(data, i) * P2) & M32, 13) * P1) & M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M32
    else:
        h = (seed + P5) & M32
    h = (h + n) & M32
    while i + 4 <= n:
        h = (_rotl((h + le32(data, i) * P3) & M32, 17) * P4) & M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * P5) & M32, 11) * P1) & M32
        i += 1
    h ^= h >> 15
    h = (h * P2) & M32
    h ^= h >> 13
    h = (h * P3) & M32
    h ^= h >> 16
    return h


def make_original(rng, length):
    """Text-like lines, incompressible runs and repeats, deterministic."""
    words = [b"block", b"frame", b"member", b"hostile", b"offset", b"checksum",
             b"lz4", b"bgzf", b"seek", b"table", b"the", b"a", b"of", b"\n"]
    out = bytearray()
    while len(out) < length:
        kind = rng.randrange(10)
        if kind < 6:
            line = b" ".join(rng.choice(words) for _ in range(rng.randrange(3, 14)))
            out += b"%d %s\n" % (rng.randrange(10 ** 9), line)
        elif kind < 8:
            out += rng.randbytes(rng.randrange(200, 9000))
        else:
            out += bytes([rng.randrange(256)]) * rng.randrange(10, 3000)
    return bytes(out[:length])


def run(cmd, data=None):
    return subprocess.run(cmd, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          check=True).stdout


# ---------------------------------------------------------------- parsers


def parse_lz4(b):
    """Frames (with their blocks) and skippable frames of a well-formed file."""
    frames, skips, pos = [], [], 0
    while pos < len(b):
        magic = le32(b, pos)
        if magic & 0xFFFFFFF0 == SKIP_MAGIC:
            size = le32(b, pos + 4)
            skips.append({"off": pos, "len": 8 + size})
            pos += 8 + size
            continue
        assert magic == LZ4_MAGIC, "base file is not what lz4 writes"
        flg, bd = b[pos + 4], b[pos + 5]
        hlen = 7 + (8 if flg & 8 else 0) + (4 if flg & 1 else 0)
        fr = {"off": pos, "hlen": hlen, "bmax": 1 << (8 + 2 * ((bd >> 4) & 7)),
              "bcsum": bool(flg & 0x10), "ccsum": bool(flg & 4), "csize": bool(flg & 8),
              "blocks": []}
        p = pos + hlen
        while True:
            w = le32(b, p)
            if w == 0:
                fr["endmark"] = p
                p += 4
                break
            dlen = w & 0x7FFFFFFF
            clen = 4 + dlen + (4 if fr["bcsum"] else 0)
            fr["blocks"].append({"coff": p, "clen": clen, "dlen": dlen, "stored": bool(w >> 31)})
            p += clen
        if fr["ccsum"]:
            fr["ccsum_off"] = p
            p += 4
        fr["end"] = p
        frames.append(fr)
        pos = p
    return frames, skips


def lz4_block(src, cap):
    """Decode one LZ4 block (lz4_Block_format.md); None when it is not valid."""
    out, i, n = bytearray(), 0, len(src)
    while True:
        if i >= n:
            return None
        tok = src[i]
        i += 1
        lit = tok >> 4
        if lit == 15:
            while True:
                if i >= n:
                    return None
                lit += src[i]
                i += 1
                if src[i - 1] != 255:
                    break
        if i + lit > n or len(out) + lit > cap:
            return None
        out += src[i:i + lit]
        i += lit
        if i == n:
            return bytes(out)
        if i + 2 > n:
            return None
        off = src[i] | src[i + 1] << 8
        i += 2
        if off == 0 or off > len(out):
            return None
        ml = tok & 15
        if ml == 15:
            while True:
                if i >= n:
                    return None
                ml += src[i]
                i += 1
                if src[i - 1] != 255:
                    break
        ml += 4
        if len(out) + ml > cap:
            return None
        start = len(out) - off
        while ml:
            chunk = out[start:start + min(ml, off)]
            out += chunk
            start += len(chunk)
            ml -= len(chunk)


def lz4_decode_blocks(b):
    """Decode a whole LZ4 file block by block, checking block checksums but
    neither content checksums nor content sizes: what a reader that can only
    check each block on its own may see. None when a block does not decode."""
    try:
        frames, _ = parse_lz4(b)
    except (AssertionError, struct.error, IndexError):
        return None
    out = bytearray()
    for fr in frames:
        for bl in fr["blocks"]:
            data = b[bl["coff"] + 4:bl["coff"] + 4 + bl["dlen"]]
            if len(data) != bl["dlen"] or bl["dlen"] > fr["bmax"]:
                return None
            if fr["bcsum"] and xxh32(data) != le32(b, bl["coff"] + 4 + bl["dlen"]):
                return None
            d = data if bl["stored"] else lz4_block(data, fr["bmax"])
            if d is None:
                return None
            out += d
    return bytes(out)


def parse_bgzf(b):
    members, pos = [], 0
    while pos < len(b):
        assert b[pos:pos + 4] == b"\x1f\x8b\x08\x04" and b[pos + 12:pos + 14] == b"BC"
        mlen = le16(b, pos + 16) + 1
        members.append({"off": pos, "len": mlen, "isize": le32(b, pos + mlen - 4)})
        pos += mlen
    return members


def parse_table(b):
    f = len(b) - ST_FOOTER
    assert le32(b, f + 32) == ST_FOOTER_MAGIC
    toff, n = le64(b, f), le32(b, f + 16)
    ents = []
    for i in range(n):
        p = toff + 8 + 16 * i
        ents.append({"pos": p, "coff": le64(b, p), "clen": le32(b, p + 8), "info": le32(b, p + 12)})
    return {"off": toff, "n": n, "footer": f, "entries": ents}


# ---------------------------------------------------------------- mutations


def flip(b, off, bit):
    b = bytearray(b)
    b[off] ^= 1 << bit
    return bytes(b)


def put(b, off, fmt, val):
    b = bytearray(b)
    struct.pack_into(fmt, b, off, val)
    return bytes(b)


def zero(b, a, n):
    b = bytearray(b)
    n = max(0, min(n, len(b) - a))
    b[a:a + n] = bytes(n)
    return bytes(b)


def fix_hc(b, fr):
    """Recompute an LZ4 frame header checksum, so a changed field passes as genuine."""
    flg = b[fr["off"] + 4]
    hlen = 7 + (8 if flg & 8 else 0) + (4 if flg & 1 else 0)
    hc = (xxh32(b[fr["off"] + 4:fr["off"] + hlen - 1]) >> 8) & 0xFF
    return put(b, fr["off"] + hlen - 1, "B", hc)


def table_rewrite(b, ents, tweak_footer=None):
    """A seek table that lies consistently: entries as given, sum and checksum redone."""
    t = parse_table(b)
    body = bytearray()
    for e in ents:
        body += struct.pack("<QII", e["coff"], e["clen"], e["info"])
    size = 8 + len(body) + ST_FOOTER
    toff = t["off"]
    usize = sum(e["info"] & 0x7FFFFF for e in ents)
    footer = {"toff": toff, "usize": usize, "n": len(ents),
              "bsize": le32(b, t["footer"] + 20), "version": 1}
    if tweak_footer:
        tweak_footer(footer)
    tab = bytearray(struct.pack("<II", ST_MAGIC, size - 8)) + body
    tab += struct.pack("<QQIII", footer["toff"], footer["usize"], footer["n"],
                       footer["bsize"], footer["version"])
    tab += struct.pack("<II", xxh32(bytes(tab[8:])), ST_FOOTER_MAGIC)
    return bytes(b[:toff]) + bytes(tab)


class Gen:
    def __init__(self, work, src):
        self.work, self.src = work, src
        self.variants = []
        self.rng = random.Random(SEED)

    def add(self, base, kind, desc, data, sidecar=None, undetectable=None):
        n = len(self.variants)
        slug = "".join(c if c.isalnum() or c in "+-=" else "_" for c in desc)[:48]
        stem = "v%04d-%s-%s-%s" % (n, base["name"], kind, slug)
        name = stem + base["suffix"]
        with open(os.path.join(self.src, name), "wb") as f:
            f.write(data)
        side = None
        if sidecar is not None:
            side = name + ".gzi"
            with open(os.path.join(self.src, side), "wb") as f:
                f.write(sidecar)
        self.variants.append({"name": name, "shown": stem, "base": base["name"],
                              "codec": base["codec"], "kind": kind, "desc": desc,
                              "sidecar": side, "orig": base["orig"], "size": len(data),
                              "undetectable": undetectable})


# ---------------------------------------------------------------- variants per base


def lz4_variants(g, base, data, level):
    """level: "trunc" (truncations only), "some" (plus size words), "all"."""
    rng = g.rng
    frames, skips = parse_lz4(data)
    add = lambda kind, desc, d: g.add(base, kind, desc, d)
    size = len(data)

    # Truncation at every block boundary +-1, inside headers, around EndMarks.
    cuts = set()
    for fi, fr in enumerate(frames):
        o = fr["off"]
        cuts.update([o + 1, o + 4, o + 5, o + 6, o + fr["hlen"] - 1, o + fr["hlen"]]
                    if fi == 0 or level == "all" else [o + 4, o + fr["hlen"] - 1])
        for bl in fr["blocks"]:
            c = bl["coff"]
            cuts.update([c - 1, c, c + 1, c + 4])
        cuts.update([fr["endmark"] + 2, fr["endmark"] + 4, fr["end"] - 1, fr["end"], fr["end"] + 1])
    for s in skips:
        cuts.update([s["off"] + 4, s["off"] + s["len"] - 1])
    cuts.update([size - 1])
    for c in sorted(x for x in cuts if 0 < x < size):
        add("trunc", "at%d" % c, data[:c])
    if level == "trunc":
        return

    blocks = [(fi, bi, fr, bl) for fi, fr in enumerate(frames)
              for bi, bl in enumerate(fr["blocks"])]
    # Size words: the stored bit, a low bit, absurd values.
    for fi, bi, fr, bl in blocks:
        c, tag = bl["coff"], "f%d-blk%d" % (fi, bi)
        add("flip", "%s-size-B0-b0" % tag, flip(data, c, 0))
        # The block checksum covers the data, not the size word: with its
        # "stored" bit flipped the block is still valid, only read as
        # stored data (or as LZ4). The content checksum of the whole frame
        # tells, which a block-by-block reader cannot check.
        g.add(base, "flip", "%s-size-B3-b7" % tag, flip(data, c + 3, 7),
              undetectable="stored bit of a size word: not under the block checksum")
        if fr["bcsum"]:
            add("flip", "%s-csum-b0" % tag, flip(data, c + bl["clen"] - 4, 0))
        add("flip", "%s-data-mid" % tag, flip(data, c + 4 + bl["dlen"] // 2, rng.randrange(8)))
    fi, bi, fr, bl = blocks[1]
    c, tag = bl["coff"], "f%d-blk%d" % (fi, bi)
    stored = 0x80000000 if bl["stored"] else 0
    for val, vt in ((0x7FFFFFFF, "7fffffff"), (0xFFFFFFFF, "ffffffff"),
                    (stored | (fr["bmax"] + 1), "bmax+1"),
                    (stored | min(size - c, 0x7FFFFFFF), "pastEOF"),
                    (stored | (bl["dlen"] - 1), "dlen-1"), (stored | (bl["dlen"] + 1), "dlen+1"),
                    (0x80000000, "stored0")):
        add("absurd", "%s-size=%s" % (tag, vt), put(data, c, "<I", val))
    add("zero", "%s-sizeword" % tag, zero(data, c, 4))
    if level == "some":
        return

    # Every header field: plain flips, and changes with the header checksum
    # redone (a valid header that describes the frame wrongly).
    for fi, fr in enumerate(frames):
        o = fr["off"]
        add("flip", "f%d-magic-b0" % fi, flip(data, o, 0))
        add("flip", "f%d-magic3-b7" % fi, flip(data, o + 3, 7))
        for bit in range(8):
            add("flip", "f%d-flg-b%d" % (fi, bit), flip(data, o + 4, bit))
        for bit in (1, 4, 5, 6, 7):
            add("flip", "f%d-bd-b%d" % (fi, bit), flip(data, o + 5, bit))
        for bit in (0, 2, 3, 4, 5):
            add("absurd", "f%d-flg-b%d-hcfix" % (fi, bit), fix_hc(flip(data, o + 4, bit), fr))
        for bit in (4, 5, 6):
            add("absurd", "f%d-bd-b%d-hcfix" % (fi, bit), fix_hc(flip(data, o + 5, bit), fr))
        if fr["csize"]:
            cs = le64(data, o + 6)
            for val, tag in ((cs + 1, "+1"), (cs - 1, "-1"), (0, "0"), (2 ** 64 - 1, "max"),
                             (2 ** 63, "2e63")):
                add("absurd", "f%d-csize%s-hcfix" % (fi, tag),
                    fix_hc(put(data, o + 6, "<Q", val), fr))
            add("flip", "f%d-csize-b0" % fi, flip(data, o + 6, 0))
        add("flip", "f%d-hc-b0" % fi, flip(data, o + fr["hlen"] - 1, 0))
        add("flip", "f%d-endmark-B0-b0" % fi, flip(data, fr["endmark"], 0))
        add("flip", "f%d-endmark-B3-b7" % fi, flip(data, fr["endmark"] + 3, 7))
        if fr["ccsum"]:
            add("flip", "f%d-ccsum-b0" % fi, flip(data, fr["ccsum_off"], 0))
        if len(fr["blocks"]) > 2:
            bl = fr["blocks"][1]
            add("zero", "f%d-blk1-whole" % fi, zero(data, bl["coff"], bl["clen"]))
            add("zero", "f%d-blk1-data16" % fi, zero(data, bl["coff"] + 4 + bl["dlen"] // 3, 16))
    for si, s in enumerate(skips):
        add("flip", "skip%d-magic-b4" % si, flip(data, s["off"], 4))
        add("absurd", "skip%d-size=ffffffff" % si, put(data, s["off"] + 4, "<I", 0xFFFFFFFF))
        add("absurd", "skip%d-size-1" % si, put(data, s["off"] + 4, "<I", s["len"] - 9))

    # Random single bit flips anywhere.
    for _ in range(12):
        off = rng.randrange(size)
        bit = rng.randrange(8)
        add("flip", "rand-%d-b%d" % (off, bit), flip(data, off, bit))

    # Zeroed ranges.
    add("zero", "first64", zero(data, 0, 64))
    add("zero", "last64", zero(data, size - 64, 64))
    a = rng.randrange(size)
    add("zero", "r%d+4096" % a, zero(data, a, 4096))

    # Junk appended.
    for n in (1, 3, 5000):
        add("junk", "rand%d" % n, data + rng.randbytes(n))
    add("junk", "zeros4096", data + bytes(4096))
    add("junk", "magic-only", data + struct.pack("<I", LZ4_MAGIC))
    add("junk", "own-header", data + data[:frames[0]["hlen"]])
    add("junk", "skippable", data + struct.pack("<II", SKIP_MAGIC + 3, 10) + bytes(10))
    add("junk", "skip-runs-past", data + struct.pack("<II", SKIP_MAGIC + 3, 1000) + bytes(10))


def table_variants(g, base, data):
    """blockfs-pack's seek table: damaged (ignored) and lying (checksum redone)."""
    rng = g.rng
    add = lambda kind, desc, d: g.add(base, kind, desc, d)
    t = parse_table(data)
    ents, f = t["entries"], t["footer"]
    n = len(ents)
    # Plain damage: the checksum no longer matches, the table must be ignored.
    add("table", "hdr-magic-b0", flip(data, t["off"], 0))
    add("table", "hdr-size-b0", flip(data, t["off"] + 4, 0))
    for i in sorted({0, 1, n - 1}):
        p = ents[i]["pos"]
        add("table", "e%d-coff-b0" % i, flip(data, p, 0))
        add("table", "e%d-coff-b60" % i, flip(data, p + 7, 4))
        add("table", "e%d-clen-b0" % i, flip(data, p + 8, 0))
        add("table", "e%d-usize-b0" % i, flip(data, p + 12, 0))
        add("table", "e%d-csumbit" % i, flip(data, p + 15, 7))
    for off, name in ((0, "toff"), (8, "usize"), (16, "count"), (20, "bsize"), (24, "version"),
                      (28, "csum"), (32, "magic")):
        add("table", "footer-%s-b0" % name, flip(data, f + off, 0))
    add("table", "footer-zero", zero(data, f, 36))

    # Lies that pass every check of the reader: only the blocks can tell.
    def lie(desc, new_ents, tweak=None):
        add("table-lie", desc, table_rewrite(data, new_ents, tweak))

    def with_usize(e, u):
        return dict(e, info=(e["info"] & ~0x7FFFFF) | (u & 0x7FFFFF))

    us = [e["info"] & 0x7FFFFF for e in ents]
    e2 = list(ents)
    e2[0], e2[-1] = with_usize(ents[0], us[-1]), with_usize(ents[-1], us[0])
    lie("usize-swap-first-last", e2)
    e2 = list(ents)
    e2[0], e2[1] = with_usize(ents[0], us[0] - 1), with_usize(ents[1], us[1] + 1 - (us[1] == 65536))
    lie("usize-first-1", e2)
    e2 = list(ents)
    e2[-1] = with_usize(ents[-1], us[-1] + 1)
    lie("usize-last+1", e2)
    e2 = list(ents)
    e2[-1] = with_usize(ents[-1], us[-1] - 1)
    lie("usize-last-1", e2)
    e2 = list(ents)
    e2[1] = dict(ents[1], info=ents[1]["info"] & ~0x80000000)
    lie("e1-no-csum-flag", e2)
    e2 = list(ents)
    e2[1] = dict(ents[1], coff=ents[1]["coff"] + 1)
    lie("e1-coff+1", e2)
    e2 = list(ents)
    e2[2] = dict(ents[2], coff=ents[2]["coff"] + 16, clen=ents[2]["clen"] - 16)
    lie("e2-coff+16-clen-16", e2)
    e2 = list(ents)
    e2[1] = dict(ents[1], clen=0x7FFFFFFF)
    lie("e1-clen-huge", e2)
    e2 = list(ents)
    e2[1], e2[2] = ents[2], ents[1]
    lie("swap-e1-e2", e2)
    e2 = list(ents)
    e2[1] = dict(ents[1], coff=1 << 40)
    lie("e1-coff-pastEOF", e2)
    e2 = [dict(e, info=(e["info"] & ~(7 << 24)) | (7 << 24)) for e in ents]
    lie("bmax-4M", e2)
    # Entries left out: the blocks they skip would vanish from the file.
    lie("omit-first", ents[1:])
    lie("omit-middle", ents[:2] + ents[3:])
    lie("omit-last", ents[:-1])
    lie("count-huge", ents, lambda ft: ft.update(n=0xFFFFFFFF))
    lie("count+1", ents, lambda ft: ft.update(n=n + 1))
    lie("usize-huge", ents, lambda ft: ft.update(usize=2 ** 63))
    lie("toff+1", ents, lambda ft: ft.update(toff=ft["toff"] + 1))
    lie("bsize-huge", ents, lambda ft: ft.update(bsize=0xFFFFFFFF))
    lie("version2", ents, lambda ft: ft.update(version=2))
    lie("empty", [], lambda ft: ft.update(usize=0))
    for _ in range(6):
        off = rng.randrange(t["off"], len(data))
        bit = rng.randrange(8)
        add("table", "rand-%d-b%d" % (off, bit), flip(data, off, bit))


def bgzf_variants(g, base, data, gzi, level):
    """level: "trunc" (truncations only), "some" (plus sizes and CRCs), "all"."""
    rng = g.rng
    mem = parse_bgzf(data)
    size = len(data)

    def add(kind, desc, d, side=None):
        g.add(base, kind, desc, d, side if side is not None else gzi)

    cuts = set()
    for i, m in enumerate(mem):
        o, ln = m["off"], m["len"]
        cuts.update([o - 1, o, o + 1])
        if i == 0 or level == "all":
            cuts.update([o + 4, o + 12, o + 17, o + 18, o + ln - 8, o + ln - 4])
    cuts.update([size - 27, size - 1])
    for c in sorted(x for x in cuts if 0 < x < size):
        add("trunc", "at%d" % c, data[:c])
    if level == "trunc":
        return

    data_members = [i for i, m in enumerate(mem) if m["isize"] > 0]
    picks = sorted({data_members[0], data_members[1], data_members[-1], len(mem) - 1})
    fields = ((0, 0, "id1"), (1, 7, "id2"), (2, 0, "cm"), (3, 1, "fhcrc"), (3, 2, "fextra"),
              (3, 3, "fname"), (3, 4, "fcomment"), (3, 6, "freserved"), (4, 0, "mtime"),
              (8, 1, "xfl"), (9, 0, "os"), (10, 0, "xlen-b0"), (11, 7, "xlen-b15"),
              (12, 0, "si1"), (13, 0, "si2"), (14, 0, "slen"), (16, 0, "bsize-b0"),
              (17, 7, "bsize-b15"))
    few = {"fextra", "xlen-b0", "bsize-b0", "bsize-b15"}
    for i in picks:
        o, ln = mem[i]["off"], mem[i]["len"]
        tag = "m%d" % i
        if level == "all":
            for at, bit, name in fields:
                if i == data_members[1] or name in few:
                    add("flip", "%s-%s" % (tag, name), flip(data, o + at, bit))
        add("flip", "%s-crc-b0" % tag, flip(data, o + ln - 8, 0))
        add("flip", "%s-isize-b0" % tag, flip(data, o + ln - 4, 0))
        add("flip", "%s-isize-b31" % tag, flip(data, o + ln - 1, 7))
        if mem[i]["isize"]:
            add("flip", "%s-data-mid" % tag, flip(data, o + ln // 2, rng.randrange(8)))
        if i != data_members[1]:
            continue
        for val, vt in ((0xFFFF, "ffff"), (ln - 2, "len-2"), (ln, "len"), (19, "19"), (0, "0")):
            add("absurd", "%s-bsize=%s" % (tag, vt), put(data, o + 16, "<H", val))
        for val, vt in ((0xFFFFFFFF, "ffffffff"), (65536, "65536"), (65537, "65537"), (0, "0"),
                        (max(mem[i]["isize"] - 1, 0), "isize-1")):
            add("absurd", "%s-isize=%s" % (tag, vt), put(data, o + ln - 4, "<I", val))
        add("absurd", "%s-xlen=ffff" % tag, put(data, o + 10, "<H", 0xFFFF))
        add("absurd", "%s-xlen=0" % tag, put(data, o + 10, "<H", 0))
        add("zero", "%s-header" % tag, zero(data, o, 18))
        add("zero", "%s-data16" % tag, zero(data, o + 18 + (ln - 26) // 3, 16))
        add("zero", "%s-trailer" % tag, zero(data, o + ln - 8, 8))
        add("zero", "%s-whole" % tag, zero(data, o, ln))
    # A BSIZE that points past the end of the file from the last data member.
    last = mem[data_members[-1]]
    add("absurd", "last-bsize-pastEOF", put(data, last["off"] + 16, "<H",
                                            min(size - last["off"] + 100, 0xFFFF)))
    if level == "some":
        return
    for _ in range(12):
        off = rng.randrange(size)
        bit = rng.randrange(8)
        add("flip", "rand-%d-b%d" % (off, bit), flip(data, off, bit))
    add("zero", "first64", zero(data, 0, 64))
    add("zero", "eof-marker", zero(data, size - 28, 28))
    a = rng.randrange(size)
    add("zero", "r%d+4096" % a, zero(data, a, 4096))
    for n in (1, 3, 5000):
        add("junk", "rand%d" % n, data + rng.randbytes(n))
    add("junk", "zeros4096", data + bytes(4096))
    add("junk", "eof-marker-again", data + data[-28:])
    add("junk", "header-only", data + data[:18])
    add("junk", "gzip-magic", data + b"\x1f\x8b\x08\x04")


def gzi_variants(g, base, data, gzi, foreign):
    """An intact .gz beside a .gzi that lies."""
    n = le64(gzi, 0)
    pairs = [struct.unpack_from("<QQ", gzi, 8 + 16 * i) for i in range(n)]
    size = len(data)

    def mk(ps, count=None):
        return struct.pack("<Q", len(ps) if count is None else count) + b"".join(
            struct.pack("<QQ", c, u) for c, u in ps)

    def add(desc, side):
        g.add(base, "gzi-lie", desc, data, side)

    rng = g.rng
    sh = list(pairs)
    rng.shuffle(sh)
    add("shuffled", mk(sh))
    add("swap01", mk([pairs[1], pairs[0]] + pairs[2:]))
    add("c-pastEOF", mk(pairs[:-1] + [(size + 1000, pairs[-1][1])]))
    add("extra-pastEOF", mk(pairs + [(size + 70000, pairs[-1][1] + 65280)]))
    add("count-huge", mk(pairs, 2 ** 64 - 1))
    add("count+1", mk(pairs, n + 1))
    add("count-1", mk(pairs, n - 1))
    add("count0", mk([]))
    add("empty-file", b"")
    add("7-bytes", b"\x01" * 7)
    add("last-dropped", mk(pairs[:-1]))
    add("first-dropped", mk(pairs[1:]))
    for k in sorted({0, n // 2, n - 1}):
        c, u = pairs[k]
        add("p%d-c+1" % k, mk(pairs[:k] + [(c + 1, u)] + pairs[k + 1:]))
        add("p%d-c-1" % k, mk(pairs[:k] + [(c - 1, u)] + pairs[k + 1:]))
        add("p%d-u+1" % k, mk(pairs[:k] + [(c, u + 1)] + pairs[k + 1:]))
        add("p%d-u-1" % k, mk(pairs[:k] + [(c, u - 1)] + pairs[k + 1:]))
        add("p%d-u+100" % k, mk(pairs[:k] + [(c, u + 100)] + pairs[k + 1:]))
    add("all-u+1", mk([(c, u + 1) for c, u in pairs]))
    add("all-c+18", mk([(c + 18, u) for c, u in pairs]))
    add("c-tiny-span", mk([pairs[0], (pairs[0][0] + 10, pairs[0][1] + 5)] + pairs[1:]))
    add("foreign", foreign)
    add("zeros", bytes(len(gzi)))


# ---------------------------------------------------------------- gen


def oracle(codec, data):
    """What the format's own tool makes of @data: (accepted, output)."""
    cmd = ["lz4", "-d", "-c", "-q"] if codec == "lz4" else ["gzip", "-d", "-c", "-q"]
    p = subprocess.run(cmd, input=data, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return p.returncode == 0, p.stdout


def cmd_gen(a):
    work, src = a.work, a.src
    os.makedirs(work, exist_ok=True)
    os.makedirs(src, exist_ok=True)
    tmp = os.path.join(work, "tmp")
    refdir = os.path.join(work, "ref")
    os.makedirs(tmp, exist_ok=True)
    os.makedirs(refdir, exist_ok=True)
    rng = random.Random(SEED)
    orig = make_original(rng, ORIG_LEN)
    control = make_original(random.Random(SEED + 1), CONTROL_LEN)
    origs = {"orig": orig, "control": control}
    for k, v in origs.items():
        with open(os.path.join(work, k + ".bin"), "wb") as f:
            f.write(v)
    op = os.path.join(tmp, "orig")
    with open(op, "wb") as f:
        f.write(orig)

    # Real files made by the real tools.
    lz4bx = run(["lz4", "-q", "-c", "-BX", "-B4"], orig)
    # --content-size needs a file to know the size: from a pipe lz4 leaves it out.
    lz4cs = run(["lz4", "-q", "-c", "-BX", "-B4", "--content-size", op])
    tail = os.path.join(tmp, "tail")
    with open(tail, "wb") as f:
        f.write(orig[SPLIT:])
    lz4cat = (run(["lz4", "-q", "-c", "-BX", "-B4"], orig[:SPLIT]) +
              struct.pack("<II", SKIP_MAGIC + 7, 100) + bytes(range(100)) +
              run(["lz4", "-q", "-c", "-BX", "-B4", "--content-size", tail]))
    lz4plain = run(["lz4", "-q", "-c", "-B4"], orig)
    bgz = run(["bgzip", "-c"], orig)
    run(["bgzip", "-c", "-i", "-I", os.path.join(tmp, "bgz.gzi"), op])
    with open(os.path.join(tmp, "bgz.gzi"), "rb") as f:
        bgz_gzi = f.read()
    run([a.pack, "-q", "-B", "64K", "-o", os.path.join(tmp, "p.lz4"), op])
    run([a.pack, "-q", "-c", "gzip", "-o", os.path.join(tmp, "p.gz"), op])
    with open(os.path.join(tmp, "p.lz4"), "rb") as f:
        packlz4 = f.read()
    with open(os.path.join(tmp, "p.gz"), "rb") as f:
        packgz = f.read()
    with open(os.path.join(tmp, "p.gz.gzi"), "rb") as f:
        packgz_gzi = f.read()
    for data, what in ((lz4bx, "lz4 -BX"), (lz4cs, "lz4 --content-size"), (lz4cat, "two frames"),
                       (lz4plain, "lz4 -B4"), (packlz4, "blockfs-pack")):
        ok, out = oracle("lz4", data)
        # lz4 1.9.4 decodes a frame without content checksum followed by a
        # skippable frame (blockfs-pack's table) completely, then exits 1
        # ("Stream followed by undecodable data"); its verdict on such
        # variants is "no", which only makes the reference stricter.
        assert (ok or data is packlz4) and out == orig, what
    for data in (bgz, packgz):
        ok, out = oracle("bgzf", data)
        assert ok and out == orig, "bgzf base"

    B = lambda name, codec, suffix: {"name": name, "codec": codec, "suffix": suffix, "orig": "orig"}
    g = Gen(work, src)
    lz4_variants(g, B("lz4bx", "lz4", ".lz4"), lz4bx, "all")
    lz4_variants(g, B("lz4cs", "lz4", ".lz4"), lz4cs, "all")
    lz4_variants(g, B("lz4cat", "lz4", ".lz4"), lz4cat, "all")
    lz4_variants(g, B("lz4plain", "lz4", ".lz4"), lz4plain, "trunc")
    lz4_variants(g, B("packlz4", "lz4", ".lz4"), packlz4, "some")
    table_variants(g, B("packlz4", "lz4", ".lz4"), packlz4)
    bgzf_variants(g, B("bgz", "bgzf", ".gz"), bgz, None, "all")
    bgzf_variants(g, B("bgzgzi", "bgzf", ".bgz"), bgz, bgz_gzi, "some")
    bgzf_variants(g, B("packgz", "bgzf", ".gz"), packgz, packgz_gzi, "trunc")
    gzi_variants(g, B("bgzgzi", "bgzf", ".gz"), bgz, bgz_gzi, packgz_gzi)

    # Intact controls in the same mount.
    with open(os.path.join(src, "control.lz4"), "wb") as f:
        f.write(run(["lz4", "-q", "-c", "-BX", "-B4"], control))
    with open(os.path.join(src, "controlgz.gz"), "wb") as f:
        f.write(run(["bgzip", "-c"], control))

    # The reference for each variant: the format tool's output when it
    # accepts the file, else the original.
    counts = {}
    stamp = time.time() - 3600
    for v in g.variants:
        with open(os.path.join(src, v["name"]), "rb") as f:
            data = f.read()
        ok, out = oracle(v["codec"], data)
        o = origs[v["orig"]]
        v["tool_ok"] = ok
        if v["undetectable"] and not ok:
            # What the blocks say on their own is a second valid reading.
            alt = lz4_decode_blocks(data)
            if alt is not None:
                ok, out = True, alt
        if not ok or out == o:
            v["ref"] = "orig"
        elif out == o[:len(out)]:
            v["ref"] = "prefix"
            v["ref_len"] = len(out)
        else:
            v["ref"] = "alt"
            p = os.path.join(refdir, v["shown"] + ".bin")
            with open(p, "wb") as f:
                f.write(out)
            v["ref_path"] = p
        counts[v["kind"]] = counts.get(v["kind"], 0) + 1
        # A sidecar is used only when not older than its data file.
        os.utime(os.path.join(src, v["name"]), (stamp, stamp))
        if v["sidecar"]:
            os.utime(os.path.join(src, v["sidecar"]), (stamp, stamp))
    manifest = {"seed": SEED, "src": src, "work": work,
                "origs": {k: os.path.join(work, k + ".bin") for k in origs},
                "controls": [{"shown": "control", "orig": "control"},
                             {"shown": "controlgz", "orig": "control"}],
                "variants": g.variants}
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    shutil.rmtree(tmp)
    print("# %d hostile variants from %d bases (seed %d): %s" % (
        len(g.variants), len({v["base"] + v["name"][-4:] for v in g.variants}), SEED,
        ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
    print("# the format's own tool accepts %d of them (%d with other bytes than the original)" % (
        sum(v["tool_ok"] for v in g.variants), sum(v["ref"] == "alt" for v in g.variants)))


# ---------------------------------------------------------------- check

CHUNK = 64 << 10
SEQ_CHUNK = 128 << 10


class Variant:
    """Reads of one variant through the mount, judged one by one."""

    def __init__(self, v, ref, orig, seed):
        self.v, self.ref, self.orig = v, ref, orig
        self.rng = random.Random(seed)
        self.fails = []
        self.eio = 0
        self.reads = 0
        self.first_eio = None
        self.ok_after_eio = False

    def fail(self, msg):
        if len(self.fails) < 5:
            self.fails.append(msg)

    def judge(self, off, want, data, err):
        self.reads += 1
        if err is not None:
            if err != errno.EIO:
                self.fail("pread(%d, %d): %s, not EIO" % (off, want, errno.errorcode.get(err, err)))
            else:
                self.eio += 1
                if self.first_eio is None or off < self.first_eio:
                    self.first_eio = off
            return
        n = len(data)
        if n > want:
            self.fail("pread(%d, %d) returned %d bytes" % (off, want, n))
            return
        good = [r for r in (self.ref, self.orig) if r is not None]
        if all(off + n > len(r) for r in good) and n:
            self.fail("pread(%d, %d) returned %d bytes, past the end (%d)" % (
                off, want, n, len(self.ref)))
            return
        if not any(data == r[off:off + n] for r in good):
            r = self.ref
            at = next((i for i in range(min(n, len(r) - off)) if data[i] != r[off + i]), n)
            self.fail("pread(%d, %d): wrong bytes from offset %d" % (off, want, off + at))
            return
        if n and self.first_eio is not None and off >= self.first_eio + CHUNK:
            self.ok_after_eio = True


def pread_plan(rng, size, reflen):
    span = max(size, reflen)
    plan = [(rng.randrange(0, span + 64), rng.choice([1, 7, 4095, 4097, 65537, 100003,
                                                      rng.randrange(1, 200000)]))
            for _ in range(10)]
    plan += [(k * CHUNK - 3, 6) for k in range(1, span // CHUNK + 1)]
    plan += [(max(size - 1, 0), 1), (size, 10), (size + 100, 10), (reflen - 1, 2)]
    rng.shuffle(plan)
    if rng.randrange(3) == 0:
        plan.sort(reverse=True)         # from the end first: settling jumps ahead
    return plan


def read_decoded(t, path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        for off, n in pread_plan(t.rng, size, len(t.ref)):
            try:
                t.judge(off, n, os.pread(fd, n, off), None)
            except OSError as e:
                t.judge(off, n, None, e.errno)
        for off in range(0, size + CHUNK, CHUNK):
            try:
                t.judge(off, CHUNK, os.pread(fd, CHUNK, off), None)
            except OSError as e:
                t.judge(off, CHUNK, None, e.errno)
    finally:
        os.close(fd)
    # cat: buffered, sequential, stops at the first error.
    fd = os.open(path, os.O_RDONLY)
    got, err = bytearray(), None
    try:
        while True:
            try:
                b = os.read(fd, SEQ_CHUNK)
            except OSError as e:
                err = e.errno
                break
            if not b:
                break
            got += b
    finally:
        os.close(fd)
    t.judge(0, len(got), bytes(got), None)
    if err is not None:
        t.judge(len(got), SEQ_CHUNK, None, err)
    k = len(got)
    if err is None:
        if k < len(t.ref) and not (t.orig is not None and k == len(t.orig)):
            t.fail("cat: silently short: %d of %d bytes, then end of file" % (k, len(t.ref)))
        cls = "exact" if t.eio == 0 else "exact+eio"
    elif k == 0:
        cls = "eio-at-once"
    else:
        cls = "prefix-then-eio"
    return cls, size


def check_one(v, mnt, src, ref, orig, seed):
    t = Variant(v, ref, orig, seed)
    dec = os.path.join(mnt, v["shown"])
    raw = os.path.join(mnt, v["name"])
    if os.path.lexists(dec):
        try:
            os.close(os.open(dec, os.O_RDONLY))
        except OSError as e:
            if e.errno != errno.EIO:
                t.fail("open: %s, not EIO" % errno.errorcode.get(e.errno, e.errno))
            t.eio += 1
            return {"cls": "refused", "fails": t.fails, "eio": t.eio, "reads": t.reads,
                    "size": 0, "ok_after_eio": t.ok_after_eio}
        cls, size = read_decoded(t, dec)
    elif os.path.lexists(raw):
        with open(os.path.join(src, v["name"]), "rb") as f:
            want = f.read()
        with open(raw, "rb") as f:
            got = f.read()
        if got != want:
            t.fail("shown unchanged but its %d bytes differ from the backing file's %d" % (
                len(got), len(want)))
        cls, size = "shown-raw", len(got)
    else:
        t.fail("neither %s nor %s is in the mount" % (v["shown"], v["name"]))
        cls, size = "missing", 0
    return {"cls": cls, "fails": t.fails, "eio": t.eio, "reads": t.reads, "size": size,
            "ok_after_eio": t.ok_after_eio}


def in_child(fn, timeout):
    """Run @fn in a forked child; its JSON result, or None on timeout or crash."""
    sys.stdout.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            res = json.dumps(fn()).encode()
        except BaseException as e:      # report, never hang the parent
            res = json.dumps({"crash": "%s: %s" % (type(e).__name__, e)}).encode()
        os.write(w, res)
        os._exit(0)
    os.close(w)
    buf, deadline = b"", time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([r], [], [], left)[0]:
            os.kill(pid, signal.SIGKILL)
            os.close(r)
            for _ in range(50):         # a killed FUSE waiter exits at once
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
                time.sleep(0.1)
            return None
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        buf += chunk
    os.close(r)
    os.waitpid(pid, 0)
    try:
        return json.loads(buf)
    except ValueError:
        return {"crash": "child died without a result"}


def status_kb(pid, field):
    """A "kB" field of /proc/PID/status (VmHWM, RssAnon), or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open("/proc/%d/status" % pid) as f:
            return "State:\tZ" not in f.read()
    except OSError:
        return False


def read_controls(mnt, man, origs):
    bad = []
    for c in man["controls"]:
        p = os.path.join(mnt, c["shown"])
        try:
            with open(p, "rb") as f:
                got = f.read()
            if got != origs[c["orig"]]:
                bad.append("%s: wrong bytes" % c["shown"])
        except OSError as e:
            bad.append("%s: %s" % (c["shown"], e))
    return {"bad": bad}


def tap(ok, msg, details=()):
    print(("ok - " if ok else "not ok - ") + msg)
    for d in details:
        print("#   " + d)


def cmd_check(a):
    with open(a.manifest) as f:
        man = json.load(f)
    origs = {}
    for k, p in man["origs"].items():
        with open(p, "rb") as f:
            origs[k] = f.read()
    label, mnt, src = a.label, a.mnt, man["src"]
    variants = man["variants"]
    if a.only:
        variants = [v for v in variants if a.only in v["name"]]
    results, groups = {}, {}
    control_checks, control_bad, dead_after, hung_at = 0, [], None, None
    anon_peak = 0
    t0 = time.monotonic()
    for i, v in enumerate(variants):
        o = origs[v["orig"]]
        if v["ref"] == "orig":
            ref = o
        elif v["ref"] == "prefix":
            ref = o[:v["ref_len"]]
        else:
            with open(v["ref_path"], "rb") as f:
                ref = f.read()
        seed = zlib.crc32((label + v["name"]).encode())
        res = in_child(lambda: check_one(v, mnt, src, ref, o if ref is not o else None, seed),
                       a.timeout)
        if res is None:
            res = {"cls": "hang", "fails": ["no answer within %g s" % a.timeout], "eio": 0,
                   "reads": 0}
            hung_at = v["name"]
        elif "crash" in res:
            res = {"cls": "checker-error", "fails": [res["crash"]], "eio": 0, "reads": 0}
        res["tool_ok"] = v["tool_ok"]
        results[v["name"]] = res
        groups.setdefault((v["base"], v["kind"]), []).append(v)
        if not alive(a.pid):
            dead_after = v["name"]
            break
        if hung_at:
            break                       # every later read would wait as long
        anon_peak = max(anon_peak, status_kb(a.pid, "RssAnon") or 0)
        if (i + 1) % a.every == 0 or i + 1 == len(variants):
            control_checks += 1
            c = in_child(lambda: read_controls(mnt, man, origs), a.timeout)
            if c is None:
                control_bad.append("after %s: control reads hung" % v["name"])
            elif c.get("bad") or c.get("crash"):
                control_bad.append("after %s: %s" % (v["name"], c.get("bad") or c.get("crash")))
    elapsed = time.monotonic() - t0

    # One TAP line per (base, kind): every variant's reads judged.
    for (base, kind), vs in sorted(groups.items()):
        bad = [(v["name"], results[v["name"]]) for v in vs if results[v["name"]]["fails"]]
        nreads = sum(results[v["name"]]["reads"] for v in vs)
        det = []
        for name, r in bad[:8]:
            det.append("%s (%s): %s" % (name, r["cls"], "; ".join(r["fails"][:3])))
        tap(not bad, "%s: %s %s: %d variants, %d reads, each the reference bytes or EIO%s" % (
            label, base, kind, len(vs), nreads, "" if not bad else " (%d wrong)" % len(bad)), det)
    tap(dead_after is None, "%s: the daemon lived through every variant" % label,
        ["died after %s" % dead_after] if dead_after else ())
    tap(hung_at is None and len(results) == len(variants),
        "%s: every variant checked, none hung (%d of %d, %g s each at most)" % (
            label, len(results), len(variants), a.timeout),
        ["no answer within %g s for %s; later variants not checked" % (a.timeout, hung_at)]
        if hung_at else ())
    tap(control_checks > 0 and not control_bad,
        "%s: intact control files read back exactly, %d times between variants" % (
            label, control_checks), control_bad[:5])

    # Memory that is the daemon's own (RssAnon: heap, stacks; not the
    # backing files' pages the mmap path maps), after every variant.
    if a.anon_bound_kb:
        tap(0 < anon_peak <= a.anon_bound_kb,
            "%s: anonymous RSS after each variant at most %d KiB (peak %d KiB)" % (
                label, a.anon_bound_kb, anon_peak))
    else:
        print("# %s: peak anonymous RSS %d KiB (not bounded here)" % (label, anon_peak))

    # The daemon's log: each variant that failed a read with EIO is named,
    # and no variant floods it (one line per bad block, not per read).
    if a.log:
        with open(a.log, errors="replace") as f:
            lines = f.read().splitlines()
        san = [l for l in lines if "runtime error" in l or "Sanitizer" in l or "LeakSanitizer" in l]
        tap(not san, "%s: the daemon's log has no sanitizer report" % label, san[:5])
        per = {}
        for l in lines:
            if not l.startswith("blockfs: "):
                continue
            name = l[len("blockfs: "):].split(":", 1)[0]
            per[name] = per.get(name, 0) + 1
        unnamed = [n for n, r in results.items() if r["eio"] and not per.get(n)]
        tap(not unnamed, "%s: every variant that gave EIO has a log line naming it (%d)" % (
            label, sum(1 for r in results.values() if r["eio"])), unnamed[:8])
        flood = ["%s: %d lines for %d EIO reads" % (n, per[n], r["eio"])
                 for n, r in results.items() if per.get(n, 0) > r["eio"] + 2]
        tap(not flood, "%s: no variant logs more lines than it had failed reads (+2)" % label,
            flood[:8])
        noblock = [l for l in lines if l.startswith("blockfs: v") and
                   not re.search(r"(block|offset|at) \d+|block sizes|named as \w+ but holds", l)]
        tap(not noblock, "%s: every log line about a variant says which block or offset" % label,
            noblock[:5])

    # The figures.
    classes = ["exact", "exact+eio", "prefix-then-eio", "eio-at-once", "refused", "shown-raw"]
    bykind = {}
    for (base, kind), vs in groups.items():
        for v in vs:
            r = results[v["name"]]
            row = bykind.setdefault(kind, {})
            row[r["cls"]] = row.get(r["cls"], 0) + 1
            row["n"] = row.get("n", 0) + 1
            if r["fails"]:
                row["WRONG"] = row.get("WRONG", 0) + 1
            if r["eio"] and r["tool_ok"]:
                row["eio-tool-ok"] = row.get("eio-tool-ok", 0) + 1
            if v["undetectable"]:
                row["undetectable"] = row.get("undetectable", 0) + 1
            if r.get("ok_after_eio"):
                row["rest-readable"] = row.get("rest-readable", 0) + 1
    extra = sorted({c for row in bykind.values() for c in row} - set(classes) - {"n"})
    cols = classes + extra
    print("# %s: %d variants checked in %.1f s; outcomes per kind of damage:" % (
        label, len(results), elapsed))
    print("# %-10s %5s %s" % ("kind", "n", " ".join("%15s" % c for c in cols)))
    total = {}
    for kind in sorted(bykind):
        row = bykind[kind]
        for c, x in row.items():
            total[c] = total.get(c, 0) + x
        print("# %-10s %5d %s" % (kind, row["n"], " ".join("%15d" % row.get(c, 0) for c in cols)))
    print("# %-10s %5d %s" % ("total", total.get("n", 0),
                              " ".join("%15d" % total.get(c, 0) for c in cols)))
    print("# (eio-tool-ok: EIO on a file the format's own tool decodes; rest-readable: a read")
    print("#  at least 64 KiB past the first EIO still gave the right bytes; undetectable:")
    print("#  damage no per-block check covers, where the blocks' own reading is accepted too)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--work", required=True)
    g.add_argument("--src", required=True)
    g.add_argument("--pack", required=True, help="blockfs-pack binary")
    c = sub.add_parser("check")
    c.add_argument("--manifest", required=True)
    c.add_argument("--mnt", required=True)
    c.add_argument("--pid", type=int, required=True)
    c.add_argument("--label", required=True)
    c.add_argument("--log")
    c.add_argument("--json")
    c.add_argument("--only", help="variants whose name contains this")
    c.add_argument("--timeout", type=float, default=20.0)
    c.add_argument("--every", type=int, default=25, help="control reads every N variants")
    c.add_argument("--anon-bound-kb", type=int, default=0,
                   help="fail if the daemon's RssAnon exceeds this after a variant")
    a = ap.parse_args()
    if a.cmd == "gen":
        cmd_gen(a)
    else:
        cmd_check(a)


if __name__ == "__main__":
    main()
