# SPDX-License-Identifier: MIT
"""Data the bench/ scripts share: the first bytes of Debian's linux-source
tarball, made once per directory and size."""
import glob
import os
import subprocess as sp


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
