#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""How fast can one process read a file on sshfs, by its pattern of reads?

    bench/remote_reads.py DELAY_MS ROUNDS [,SSHFS_OPTIONS]

The file and the network of bench/remote.py (the 256 MiB text as a stock
lz4 -B4 file, sshfs through a proxy adding DELAY_MS each way), read
without blockfs by: cat; one pread at a time of 1 MiB, with
POSIX_FADV_WILLNEED 4 or 32 MiB ahead, of 4 MiB, of 128 KiB; and 1 MiB
or 256 KiB preads from 2, 4 or 8 threads at once. Paired rounds on fresh
sshfs mounts, caches dropped before each; ratios to cat within a round.
It prints the sshfs mount's read_ahead_kb. As root.
"""
import os
import statistics
import subprocess as sp
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import remote as R  # noqa: E402

VARIANTS = {
    "cat": None,			# (request bytes, WILLNEED ahead, threads)
    "pread1M": (1 << 20, 0, 1),
    "pread1M+adv4M": (1 << 20, 4 << 20, 1),
    "pread1M+adv32M": (1 << 20, 32 << 20, 1),
    "pread4M": (4 << 20, 0, 1),
    "pread128K": (128 << 10, 0, 1),
    "2thr1M": (1 << 20, 0, 2),
    "4thr1M": (1 << 20, 0, 4),
    "8thr1M": (1 << 20, 0, 8),
    "4thr256K": (256 << 10, 0, 4),
}


def read_all(path, chunk, ahead, threads):
    """Seconds to read @path in @chunk preads from @threads threads."""
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    nxt = [0]
    lock = threading.Lock()

    def one_thread():
        advised = 0
        while True:
            with lock:
                off = nxt[0]
                nxt[0] += chunk
            if off >= size:
                return
            os.pread(fd, chunk, off)
            if ahead and off + chunk >= advised:
                os.posix_fadvise(fd, off + chunk, ahead, os.POSIX_FADV_WILLNEED)
                advised = off + chunk + ahead

    t = time.perf_counter()
    ts = [threading.Thread(target=one_thread) for _ in range(threads)]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    dt = time.perf_counter() - t
    os.close(fd)
    return dt


def main():
    delay, rounds = float(sys.argv[1]), int(sys.argv[2])
    extra = sys.argv[3] if len(sys.argv) > 3 else ""
    export, _, _ = R.prepare(256 << 20)
    server = R.Server(delay)
    work = tempfile.mkdtemp(prefix="blockfs-remote-reads.")
    res = {k: [] for k in VARIANTS}
    try:
        for r in range(rounds):
            for k, v in VARIANTS.items():
                mnt = tempfile.mkdtemp(dir=work)
                fs = R.Fuse(["sshfs", "-f", "-F", os.path.join(server.dir, "ssh_config"), "-o",
                             "IdentityFile=%s/id_ed25519,StrictHostKeyChecking=no,"
                             "UserKnownHostsFile=/dev/null,port=%d,noforget%s"
                             % (server.dir, server.port, extra),
                             "root@127.0.0.1:" + export, mnt], mnt, "sshfs",
                            os.path.join(work, "sshfs.log"))
                try:
                    if r == 0 and k == "cat":
                        dev = os.stat(mnt).st_dev
                        bdi = "/sys/class/bdi/%d:%d" % (os.major(dev), os.minor(dev))
                        print("sshfs: %s read_ahead_kb %s" % (
                            bdi, open(bdi + "/read_ahead_kb").read().strip()))
                    R.drop_caches()
                    p = os.path.join(mnt, "text.lz4")
                    if v is None:
                        t = time.perf_counter()
                        sp.run("cat %s > /dev/null" % p, shell=True, check=True)
                        res[k].append(time.perf_counter() - t)
                    else:
                        res[k].append(read_all(p, *v))
                finally:
                    fs.close()
                    os.rmdir(mnt)
            print("round", r + 1, {k: round(x[-1], 2) for k, x in res.items()},
                  file=sys.stderr, flush=True)
    finally:
        server.close()
        R.clean_work(work)
    for k, xs in res.items():
        rat = [x / c for x, c in zip(xs, res["cat"])]
        print("| %s | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) |" % (
            k, statistics.median(xs), min(xs), max(xs), statistics.median(rat), min(rat),
            max(rat)))


if __name__ == "__main__":
    main()
