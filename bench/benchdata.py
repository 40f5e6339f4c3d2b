# SPDX-License-Identifier: MIT
"""What the bench/ scripts share: the first bytes of Debian's linux-source
tarball, made once per directory and size, and the options of a first
mount."""
import glob
import os
import subprocess as sp


def first_mount(opts):
    """OPTS for a blockfs mount that opens its files as on their first
    mount: with index_cache=off, unless OPTS says which index cache to use.
    At default options every mount after the first would find the indexes
    and directory memos the first kept in ~/.cache/blockfs, and the rounds
    would not measure the same thing. A later mount is a variant with
    index_cache=DIR, its entries made beforehand."""
    if opts and "index_cache" in opts:
        return opts
    return "index_cache=off" + ("," + opts if opts else "")


def linux_text(data_dir, size):
    """DATA_DIR/text holding the first SIZE bytes of the newest
    /usr/src/linux-source-*.tar.xz. Returns (path, made): made is True when
    it was (re)made now, so that files derived from an older one must go."""
    os.makedirs(data_dir, exist_ok=True)
    text = os.path.join(data_dir, "text")
    if os.path.exists(text) and os.path.getsize(text) == size:
        return text, False
    src = sorted(glob.glob("/usr/src/linux-source-*.tar.xz"))
    if not src:
        raise SystemExit("needs Debian's linux-source package")
    sp.run("xz -dc %s | head -c %d > %s.tmp && mv %s.tmp %s" % (src[-1], size, text, text, text),
           shell=True, check=True)
    return text, True
