#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The dependency graph of src/: which file calls which, and which header
includes which; exit 1 if either has a cycle.

    tools/depgraph.py [--dot] [SRC_DIR]

A call edge a.c -> b.c means a.c calls a bfs_ function that b.c defines;
an include edge a.h -> b.h, that a.h includes b.h (headers of
include/blockfs and the private ones in src). Calls go down only: the
FUSE edge (ops.c) and main.c on top, then the mount and its inodes, then
the read path (stream, push, file), then mappings, cache, index, codecs,
I/O and the leaves (vocab, stats, workq, log).
"""
import os
import re
import sys


def code(text):
    """TEXT without its comments and string literals: names there are not calls."""
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"',
                  lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def scan(src, inc):
    files = sorted(f for f in os.listdir(src) if f.endswith(".c"))
    text = {f: code(open(os.path.join(src, f)).read()) for f in files}
    defs = {}
    for f, s in text.items():
        for m in re.finditer(r"^[a-z_][\w \*]*?\b(bfs_\w+)\s*\(", s, re.M):
            defs.setdefault(m.group(1), f)
    calls = {f: set() for f in files}
    for f, s in text.items():
        for name, where in defs.items():
            if where != f and re.search(r"\b" + name + r"\s*\(", s):
                calls[f].add(where)
    headers = {}
    for d in (inc, src):
        for h in os.listdir(d):
            if h.endswith(".h"):
                s = re.sub(r"/\*.*?\*/|//[^\n]*", "", open(os.path.join(d, h)).read(),
                           flags=re.S)
                headers[h] = {os.path.basename(x) for x in
                              re.findall(r'#include "(?:blockfs/)?([\w.]+\.h)"', s)} - {"config.h"}
    return calls, headers


def cycle(graph):
    """One cycle as a list of nodes, or None."""
    state, path = {}, []

    def visit(n):
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        state[n] = 2
        path.pop()
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = args[0] if args else os.path.join(root, "src")
    inc = os.path.join(os.path.dirname(os.path.abspath(src)), "include", "blockfs")
    calls, headers = scan(src, inc)
    if "--dot" in sys.argv:
        print("digraph src {")
        for a, bs in sorted(calls.items()):
            for b in sorted(bs):
                print('  "%s" -> "%s";' % (a, b))
        print("}")
        return 0
    for a, bs in sorted(calls.items()):
        print("%-14s -> %s" % (a, " ".join(sorted(bs)) or "-"))
    bad = 0
    for what, g in (("calls", calls), ("includes", headers)):
        c = cycle(g)
        if c:
            print("cycle in %s: %s" % (what, " -> ".join(c)))
            bad = 1
        else:
            print("no cycle in %s (%d files)" % (what, len(g)))
    return bad


if __name__ == "__main__":
    sys.exit(main())
