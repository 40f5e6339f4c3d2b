#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The dependency graph of src/: which file calls which, and which header
includes which; exit 1 if either has a cycle.

    tools/depgraph.py [--dot] [--direct] [--strict] [SRC_DIR]

A call edge a.c -> b.c means a.c calls a bfs_ function that b.c defines,
or calls through the codec vtable (codec->decode(...), ->measure(...):
any member of struct bfs_codec that is a function pointer), which is an
edge to the codec interface, codec.c; codec.c reaches every codec_*.c
that defines a struct bfs_codec (the registry holds them). An include
edge a.h -> b.h means a.h includes b.h (headers of include/blockfs and
the private ones in src). Names in comments, strings and character
constants are neither calls nor includes.

Calls go down the layers of doc/design.md's map (LAYERS below, top
first); a call to a file of a layer above is reported as "upward", and
a file the map does not place as "unplaced". Neither fails the run
unless --strict, as the lint suite runs it (tests/meson.build). --direct
leaves the vtable edges out: calls by name only.
"""
import os
import re
import sys

# doc/design.md's "Layers" map, top to bottom. A file may call files of
# its own layer and of the layers below it.
LAYERS = [
    ("main", ["main.c", "mount_helper.c", "mountinfo.c"]),
    ("loop", ["loop.c"]),
    ("ops", ["ops.c"]),
    ("mount", ["fs.c"]),
    ("tree", ["lookup.c", "facts.c", "version.c", "inode.c", "dir.c", "snap.c", "snapmemo.c", "shown.c", "handle.c", "xattr.c",
              "hints.c", "rdplus.c", "backing.c", "fdcache.c", "walkahead.c", "trim.c"]),
    ("stream", ["stream.c"]),
    ("push", ["push.c"]),
    ("read", ["read.c"]),
    ("decode", ["decode.c", "unit.c"]),
    ("file", ["file.c"]),
    ("index cache", ["index_cache.c", "dirmemo.c"]),
    ("settle", ["settle.c"]),
    ("registry", ["codec.c", "names.c"]),
    ("codecs", ["codec_lz4.c", "codec_lz4_linked.c", "codec_bgzf.c", "codec_gzip.c",
                "codec_zstd.c", "codec_xz.c", "codec_bzip2.c"]),
    ("index", ["index.c", "seektable.c"]),
    ("bytes", ["cache.c", "mmap.c", "io.c"]),
    ("spill", ["spill.c"]),
    ("leaves", ["workq.c", "gate.c", "stats.c", "vocab.c", "opts.c", "log.c", "handoff.c",
                "xxh32.c", "park.c"]),
]

# Vtables whose calls are edges to an interface: (header, struct, the
# file that is the interface).
VTABLES = [("codec.h", "bfs_codec", "codec.c")]


def code(text):
    """TEXT without its comments, string literals and character constants:
    names there are not calls. Newlines are kept, so lines still count."""
    return re.sub(r"""/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""",
                  lambda m: "\n" * m.group(0).count("\n") if m.group(0)[0] == "/"
                  else m.group(0)[0] * 2, text, flags=re.S)


def members(header_text, struct):
    """The function-pointer members of struct STRUCT in HEADER_TEXT."""
    m = re.search(r"\bstruct\s+" + struct + r"\s*\{(.*?)\n\};", code(header_text), re.S)
    return set(re.findall(r"\(\s*\*\s*(\w+)\s*\)\s*\(", m.group(1))) if m else set()


def scan(src, inc, vtables=True):
    """Return (calls, via, headers): calls[f] the files f calls, via[(f, g)]
    the names it calls them by, headers[h] the headers h includes."""
    files = sorted(f for f in os.listdir(src) if f.endswith(".c"))
    text = {f: code(open(os.path.join(src, f)).read()) for f in files}
    defs = {}
    for f, s in text.items():
        for m in re.finditer(r"^[a-z_][\w \*]*?\b(bfs_\w+)\s*\(", s, re.M):
            defs.setdefault(m.group(1), f)
    calls = {f: set() for f in files}
    via = {}

    def edge(a, b, name):
        if a != b:
            calls[a].add(b)
            via.setdefault((a, b), set()).add(name)

    for f, s in text.items():
        for name in set(re.findall(r"\b(bfs_\w+)\s*\(", s)):
            if name in defs:
                edge(f, defs[name], name + "()")
    if vtables:
        for header, struct, iface in VTABLES:
            path = os.path.join(inc, header)
            ops = members(open(path).read(), struct) if os.path.exists(path) else set()
            if not ops or iface not in calls:
                continue
            alt = "|".join(sorted(ops))
            impl = re.compile(r"^(?:static\s+)?const\s+struct\s+" + struct + r"\s+(\w+)\s*=",
                              re.M)
            # One codec's own vtable called by name (bfs_codec_bgzf.probe())
            # is an edge to that codec; any other call through one, to the
            # interface.
            named = re.compile(r"\b(\w+)\s*(?:\.|->)\s*(" + alt + r")\s*\(")
            pat = re.compile(r"(?:->|\.)\s*(" + alt + r")\s*\(")
            owner = {o: f for f, s in text.items() for o in impl.findall(s)}
            for f, s in text.items():
                for obj, name in set(named.findall(s)):
                    if obj in owner:
                        edge(f, owner[obj], "%s.%s()" % (obj, name))
                rest = named.sub(lambda m: "" if m.group(1) in owner else m.group(0), s)
                for name in set(pat.findall(rest)):
                    edge(f, iface, "->" + name + "()")
                if impl.search(s):
                    edge(iface, f, "struct " + struct)
    headers = {}
    for d in (inc, src):
        for h in os.listdir(d):
            if h.endswith(".h"):
                s = re.sub(r"/\*.*?\*/|//[^\n]*", "", open(os.path.join(d, h)).read(),
                           flags=re.S)
                headers[h] = {os.path.basename(x) for x in
                              re.findall(r'#include "(?:blockfs/)?([\w.]+\.h)"', s)} - {"config.h"}
    return calls, via, headers


def path(graph, a, b, inside):
    """A shortest path a ... b within INSIDE, breadth first, or None."""
    prev, todo = {a: None}, [a]
    while todo:
        nxt = []
        for n in todo:
            for m in sorted(graph.get(n, ())):
                if m in inside and m not in prev:
                    prev[m] = n
                    if m == b:
                        out = [m]
                        while prev[out[-1]] is not None:
                            out.append(prev[out[-1]])
                        return out[::-1]
                    nxt.append(m)
        todo = nxt
    return None


def components(graph):
    """The strongly connected components of more than one node (Tarjan's),
    each sorted: the files that reach each other, a cycle among them."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(n):
        index[n] = low[n] = len(index)
        stack.append(n)
        on.add(n)
        for m in sorted(graph.get(n, ())):
            if m not in index:
                visit(m)
                low[n] = min(low[n], low[m])
            elif m in on:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            comp = []
            while True:
                m = stack.pop()
                on.discard(m)
                comp.append(m)
                if m == n:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for n in sorted(graph):
        if n not in index:
            visit(n)
    return sorted(comps)


def cycles(graph, rank):
    """For each component, the cycles that close it: one shortest cycle
    through each of its edges that goes up (RANK: a file's layer, lower
    is higher), or through its first node when none does."""
    out = []
    for comp in components(graph):
        inside = set(comp)
        ups = [(a, b) for a in comp for b in sorted(graph.get(a, ()))
               if b in inside and rank.get(b, 1 << 30) < rank.get(a, -1)]
        found = []
        for a, b in ups or [(comp[0], m) for m in sorted(graph[comp[0]]) if m in inside][:1]:
            back = path(graph, b, a, inside)
            if back:
                found.append([a] + back)
        out.append((comp, found))
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    unknown = flags - {"--dot", "--direct", "--strict"}
    if unknown:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = args[0] if args else os.path.join(root, "src")
    inc = os.path.join(os.path.dirname(os.path.abspath(src)), "include", "blockfs")
    calls, via, headers = scan(src, inc, vtables="--direct" not in flags)
    if "--dot" in flags:
        print("digraph src {")
        for a, bs in sorted(calls.items()):
            for b in sorted(bs):
                print('  "%s" -> "%s";' % (a, b))
        print("}")
        return 0
    for a, bs in sorted(calls.items()):
        print("%-18s -> %s" % (a, " ".join(sorted(bs)) or "-"))

    layer = {f: (i, name) for i, (name, fs) in enumerate(LAYERS) for f in fs}
    bad = strict = 0
    for f in sorted(set(calls) - set(layer)):
        print("unplaced: %s is in no layer of LAYERS (doc/design.md's map)" % f)
        strict = 1
    for a, bs in sorted(calls.items()):
        for b in sorted(bs):
            if a in layer and b in layer and layer[b][0] < layer[a][0]:
                print("upward: %s (%s) -> %s (%s) by %s" % (
                    a, layer[a][1], b, layer[b][1], ", ".join(sorted(via[(a, b)]))))
                strict = 1
    rank = {f: i for f, (i, _) in layer.items()}
    for what, g in (("calls", calls), ("includes", headers)):
        found = cycles(g, rank if what == "calls" else {})
        for comp, loops in found:
            print("cycle in %s among %s:" % (what, " ".join(comp)))
            for loop in loops:
                steps = []
                for x, y in zip(loop, loop[1:]):
                    how = via.get((x, y)) if what == "calls" else None
                    steps.append("%s -> %s%s" % (x, y, " (" + ", ".join(sorted(how)) + ")"
                                                 if how else ""))
                print("  " + "; ".join(steps))
            bad = 1
        if not found:
            print("no cycle in %s (%d files%s)" % (
                what, len(g), ", calls by name only" if what == "calls" and
                "--direct" in flags else ""))
    return 1 if bad or ("--strict" in flags and strict) else 0


if __name__ == "__main__":
    sys.exit(main())
