#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Backing-store faults under a live blockfs mount (tests/integration/faults.sh).

Usage: faults.py SOURCE MOUNT WORK

For each format (.lz4 from the lz4 CLI, .gz from bgzip) it opens a mounted
file, reads part of it, changes the backing side under the reader, and
checks what blockfs(8) promises (CACHING):

  replaced by rename  the open reader keeps reading the old bytes; the
                      next open sees the new file
  appended to         the open reader keeps the old bytes; the next open
                      sees old + new
  truncated           the open reader's reads past the cut fail with EIO,
                      every read that succeeds is right; the next open
                      shows a prefix of the old bytes, then EIO
  deleted             the open reader keeps reading; the name is gone
  directory renamed   the open reader keeps reading; the old path is
                      ENOENT, the new one reads right
  directory removed   the paths below it are ENOENT
  made unreadable     the open reader keeps reading; the next open is
                      EACCES; readable again, it reads right (faults.sh
                      runs the daemon without CAP_DAC_OVERRIDE for this)

After every case a control file must still read right. Prints TAP lines
("ok - ...", "not ok - ...", "# ...") for lib.sh's tap_import.
"""

import errno
import os
import random
import shutil
import subprocess
import sys

CHUNK = 128 << 10


def ok(cond, name, *diag):
    print(("ok - " if cond else "not ok - ") + name)
    if not cond:
        for d in diag:
            print("# " + str(d))
    return cond


def make_plain(path, seed, size):
    """Text-like bytes (compressible, not trivially): numbered lines."""
    rnd = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"lz4", b"bgzf", b"block", b"fuse"]
    out, n = bytearray(), 0
    while len(out) < size:
        out += b"%08d " % n + b" ".join(rnd.choice(words) for _ in range(8)) + b"\n"
        n += 1
    data = bytes(out[:size])
    with open(path, "wb") as f:
        f.write(data)
    return data


def compress(fmt, plain_path, dest):
    """Write @dest from @plain_path with the real tool; never in place."""
    tmp = dest + ".tmp"
    with open(tmp, "wb") as out:
        if fmt == "lz4":
            subprocess.run(["lz4", "-q", "-B4", "-BX", "-c", plain_path], stdout=out, check=True)
        else:
            subprocess.run(["bgzip", "-c", plain_path], stdout=out, check=True)
    return tmp


def read_all(path):
    """The whole file by 128 KiB preads: (bytes, errno of the first failure or 0)."""
    got = bytearray()
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        return b"", e.errno
    try:
        while True:
            try:
                b = os.pread(fd, CHUNK, len(got))
            except OSError as e:
                return bytes(got), e.errno
            if not b:
                return bytes(got), 0
            got += b
    finally:
        os.close(fd)


def read_rest(fd, start, want):
    """Read from @start to EOF on an open fd; check each successful read
    against @want. Returns (bytes read, errors by errno, wrong reads)."""
    off, errs, wrong = start, {}, 0
    while True:
        try:
            b = os.pread(fd, CHUNK, off)
        except OSError as e:
            errs[e.errno] = errs.get(e.errno, 0) + 1
            off += CHUNK            # past the bad block: the rest may read
            if off >= len(want) + CHUNK:
                break
            continue
        if not b:
            break
        if b != want[off:off + len(b)]:
            wrong += 1
        off += len(b)
    return off - start, errs, wrong


def errname(e):
    return errno.errorcode.get(e, str(e)) if e else "none"


class Case:
    def __init__(self, src, mnt, work, fmt, control):
        self.src, self.mnt, self.work, self.fmt, self.control = src, mnt, work, fmt, control
        self.sfx = ".lz4" if fmt == "lz4" else ".gz"

    def setup(self, rel, seed, size=3 << 20):
        """A fresh backing file SOURCE/rel+suffix; returns its plain bytes."""
        plain = os.path.join(self.work, "plain-%s-%d" % (self.fmt, seed))
        data = make_plain(plain, seed, size)
        dest = os.path.join(self.src, rel + self.sfx)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.replace(compress(self.fmt, plain, dest), dest)
        return data

    def name(self, what):
        return "%s: %s" % (self.fmt, what)

    def check_control(self, after):
        self.reads_as("control", self.control,
                      "after %s, the control file still reads right" % after)

    def open_and_read_head(self, rel, data):
        fd = os.open(os.path.join(self.mnt, rel), os.O_RDONLY)
        head = os.pread(fd, CHUNK, 0)
        ok(head == data[:CHUNK], self.name("%s: the first %d bytes read right" % (rel, CHUNK)))
        return fd

    def reader_keeps(self, fd, old, what):
        """The rest of an open reader's file (from CHUNK) reads as @old, no error."""
        n, errs, wrong = read_rest(fd, CHUNK, old)
        os.close(fd)
        ok(n == len(old) - CHUNK and not errs and not wrong,
           self.name("%s: the open reader reads the old bytes to the end" % what),
           "read %d of %d, errors %s, wrong reads %d" % (n, len(old) - CHUNK, errs, wrong))

    def reads_as(self, rel, want, what):
        """A fresh open of @rel reads exactly @want."""
        got, err = read_all(os.path.join(self.mnt, rel))
        ok(got == want and err == 0, self.name(what),
           "read %d of %d, error %s" % (len(got), len(want), errname(err)))

    def fails_with(self, rel, want, what):
        """A fresh open or read of @rel fails with errno @want."""
        _, err = read_all(os.path.join(self.mnt, rel))
        ok(err == want, self.name(what), "got %s" % errname(err))

    def replaced(self):
        old = self.setup("rep/a", 1)
        fd = self.open_and_read_head("rep/a", old)
        plain = os.path.join(self.work, "new-%s" % self.fmt)
        new = make_plain(plain, 101, 2 << 20)
        dest = os.path.join(self.src, "rep/a" + self.sfx)
        os.replace(compress(self.fmt, plain, dest), dest)
        self.reader_keeps(fd, old, "replaced by rename")
        self.reads_as("rep/a", new, "replaced by rename: the next open reads the new file")
        st = os.stat(os.path.join(self.mnt, "rep/a"))
        ok(st.st_size == len(new), self.name("replaced by rename: stat shows the new size"),
           "st_size %d, want %d" % (st.st_size, len(new)))
        self.check_control("a rename")

    def appended(self):
        old = self.setup("app/a", 2)
        fd = self.open_and_read_head("app/a", old)
        plain = os.path.join(self.work, "extra-%s" % self.fmt)
        extra = make_plain(plain, 102, 1 << 20)
        tmp = compress(self.fmt, plain, plain + self.sfx)
        # Concatenated frames (lz4) or members (BGZF) decompress to old + extra.
        with open(tmp, "rb") as f, open(os.path.join(self.src, "app/a" + self.sfx), "ab") as out:
            out.write(f.read())
        self.reader_keeps(fd, old, "appended to")
        self.reads_as("app/a", old + extra, "appended to: the next open reads old + new bytes")
        self.check_control("an append")

    def truncated(self):
        # Larger than the mount's 4 MiB cache: read-ahead cannot have
        # decoded it all before the cut, so some reads must meet it.
        old = self.setup("tru/a", 3, 16 << 20)
        fd = self.open_and_read_head("tru/a", old)
        path = os.path.join(self.src, "tru/a" + self.sfx)
        os.truncate(path, os.path.getsize(path) // 2)
        n, errs, wrong = read_rest(fd, CHUNK, old)
        os.close(fd)
        ok(wrong == 0 and set(errs) == {errno.EIO},
           self.name("truncated: the open reader's reads are right or EIO, and some are EIO"),
           "read %d bytes, errors %s, wrong reads %d" % (n, {errname(k): v for k, v in errs.items()},
                                                        wrong))
        got, err = read_all(os.path.join(self.mnt, "tru/a"))
        ok(err == errno.EIO and len(got) > 0 and old.startswith(got),
           self.name("truncated: the next open reads a prefix of the old bytes, then EIO"),
           "read %d bytes (prefix: %s), error %s" % (len(got), old.startswith(got), errname(err)))
        self.check_control("a truncation")

    def deleted(self):
        old = self.setup("del/a", 4)
        fd = self.open_and_read_head("del/a", old)
        os.unlink(os.path.join(self.src, "del/a" + self.sfx))
        self.reader_keeps(fd, old, "deleted")
        self.fails_with("del/a", errno.ENOENT, "deleted: the next open is ENOENT")
        ok("a" not in os.listdir(os.path.join(self.mnt, "del")),
           self.name("deleted: the listing no longer shows it"))
        self.check_control("a deletion")

    def dir_renamed(self):
        old = self.setup("dir/sub/a", 5)
        fd = self.open_and_read_head("dir/sub/a", old)
        os.rename(os.path.join(self.src, "dir"), os.path.join(self.src, "dir2"))
        self.reader_keeps(fd, old, "directory renamed")
        self.fails_with("dir/sub/a", errno.ENOENT, "directory renamed: the old path is ENOENT")
        self.reads_as("dir2/sub/a", old, "directory renamed: the new path reads right")
        self.check_control("a directory rename")

    def dir_removed(self):
        self.setup("gone/sub/a", 6)
        got, err = read_all(os.path.join(self.mnt, "gone/sub/a"))
        ok(err == 0 and len(got) > 0, self.name("directory removed: reads before the removal"))
        shutil.rmtree(os.path.join(self.src, "gone"))
        self.fails_with("gone/sub/a", errno.ENOENT, "directory removed: a path below it is ENOENT")
        try:
            os.listdir(os.path.join(self.mnt, "gone/sub"))
            err = 0
        except OSError as e:
            err = e.errno
        ok(err == errno.ENOENT, self.name("directory removed: listing it is ENOENT"),
           "got %s" % errname(err))
        self.check_control("a directory removal")

    def unreadable(self):
        old = self.setup("perm/a", 7)
        fd = self.open_and_read_head("perm/a", old)
        path = os.path.join(self.src, "perm/a" + self.sfx)
        os.chmod(path, 0)
        self.reader_keeps(fd, old, "made unreadable")
        self.fails_with("perm/a", errno.EACCES, "made unreadable: the next open is EACCES")
        os.chmod(path, 0o644)
        self.reads_as("perm/a", old, "readable again: it reads right")
        self.check_control("a chmod")


def main():
    src, mnt, work = sys.argv[1:4]
    with open(os.path.join(work, "control"), "rb") as f:
        control = f.read()
    for fmt in ("lz4", "bgzf"):
        c = Case(src, mnt, work, fmt, control)
        for step in (c.replaced, c.appended, c.truncated, c.deleted, c.dir_renamed, c.dir_removed,
                     c.unreadable):
            step()
        # The next read path run starts from a clean tree.
        for d in ("rep", "app", "tru", "del", "dir2", "perm"):
            shutil.rmtree(os.path.join(src, d), ignore_errors=True)


if __name__ == "__main__":
    main()
