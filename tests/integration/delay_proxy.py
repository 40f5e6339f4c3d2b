#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A TCP proxy on 127.0.0.1 that delays every byte by a fixed time.

    delay_proxy.py --target PORT [--port PORT] [--delay-ms 2]
                   [--port-file FILE] [--max-queue BYTES]
                   [--lifetime SECONDS] [--parent PID]

Each accepted connection is joined to 127.0.0.1:TARGET. Each direction
has its own queue of (due time, bytes): a reader thread stamps what it
receives with now + DELAY and queues it, a writer thread sends each piece
when it is due. So a round trip through the proxy takes 2 x DELAY more
than without it, whatever the sizes, and bytes keep flowing while earlier
ones wait (a delay line, not a stop-and-wait). A queue holds at most
--max-queue bytes (8 MiB): a reader that finds it full waits, so memory
stays bounded and TCP's own flow control slows the sender.

Self-terminating: the proxy exits after --lifetime seconds (900), or as
soon as --parent PID (when given) is gone, so a test that dies leaves no
proxy behind. It prints its port to --port-file (written whole, then
renamed) once it listens. Killing it (SIGKILL, SIGTERM) closes every
connection at once: both ends see the peer go away; SIGSTOP freezes them.
"""
import argparse
import collections
import os
import socket
import sys
import threading
import time

CHUNK = 64 << 10


class Line:
    """One direction of one connection: a bounded delay line."""

    def __init__(self, src, dst, delay, limit):
        self.src, self.dst, self.delay, self.limit = src, dst, delay, limit
        self.q = collections.deque()
        self.bytes = 0
        self.cv = threading.Condition()
        self.closed = False		# set on any error: both threads stop

    def read_loop(self):
        try:
            while True:
                data = self.src.recv(CHUNK)
                with self.cv:
                    while self.bytes >= self.limit and not self.closed:
                        self.cv.wait()
                    if self.closed:
                        return
                    # b"" (the peer's end of stream) travels the line too
                    self.q.append((time.monotonic() + self.delay, data))
                    self.bytes += len(data)
                    self.cv.notify_all()
                if not data:
                    return
        except OSError:
            self.close()

    def write_loop(self):
        try:
            while True:
                with self.cv:
                    while not self.q and not self.closed:
                        self.cv.wait()
                    if self.closed:
                        return
                    due, data = self.q[0]
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                with self.cv:
                    self.q.popleft()
                    self.bytes -= len(data)
                    self.cv.notify_all()
                if not data:
                    self.dst.shutdown(socket.SHUT_WR)
                    return
                self.dst.sendall(data)
        except OSError:
            self.close()

    def close(self):
        with self.cv:
            self.closed = True
            self.cv.notify_all()
        for s in (self.src, self.dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(conn, target, delay, limit):
    try:
        up = socket.create_connection(("127.0.0.1", target))
    except OSError:
        conn.close()
        return
    for s in (conn, up):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lines = [Line(conn, up, delay, limit), Line(up, conn, delay, limit)]
    threads = [threading.Thread(target=f, daemon=True)
               for ln in lines for f in (ln.read_loop, ln.write_loop)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    conn.close()
    up.close()


def watchdog(parent, deadline):
    while time.monotonic() < deadline:
        if parent:
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                break
        time.sleep(0.5)
    os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", type=int, required=True, help="port on 127.0.0.1 to forward to")
    ap.add_argument("--port", type=int, default=0, help="port to listen on (0: any free one)")
    ap.add_argument("--delay-ms", type=float, default=2.0, help="one-way delay, each direction")
    ap.add_argument("--port-file", help="write the port listened on here")
    ap.add_argument("--max-queue", type=int, default=8 << 20, help="bytes queued per direction")
    ap.add_argument("--lifetime", type=float, default=900.0, help="seconds before exiting")
    ap.add_argument("--parent", type=int, default=0, help="exit when this process is gone")
    a = ap.parse_args()

    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", a.port))
    ls.listen(16)
    threading.Thread(target=watchdog, args=(a.parent, time.monotonic() + a.lifetime),
                     daemon=True).start()
    port = ls.getsockname()[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.rename(a.port_file + ".tmp", a.port_file)
    print("delay_proxy: 127.0.0.1:%d -> 127.0.0.1:%d, %.1f ms each way"
          % (port, a.target, a.delay_ms), file=sys.stderr, flush=True)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve, args=(conn, a.target, a.delay_ms / 1000.0, a.max_queue),
                         daemon=True).start()


if __name__ == "__main__":
    main()
