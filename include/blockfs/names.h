/* SPDX-License-Identifier: MIT */
/*
 * The name rules: which backing entry a shown name stands for,
 * and what name a backing entry is shown under. Pure logic over two
 * questions about one directory, so readdir (a listing in memory), lookup
 * (syscalls) and the unit tests (a fake) share one implementation.
 *
 * Names come from suffixes alone: no file is opened to name it. The
 * suffixes, in registry order: .lz4; .gz, .bgz, .tgz; .zst, .tzst; .xz,
 * .txz; .bz2, .tbz2, .tbz (the t-forms shown as .tar). A
 * backing regular file B = S + suffix is shown as S + the suffix's shown
 * ending (x.lz4 as x, x.tgz as x.tar) when no entry of that name exists
 * and no regular file with an earlier (codec, suffix) pair in registry
 * order is shown under it too. Everything else is shown under its own
 * name. The codec returned is the first one listing the suffix; which
 * codec of that family decodes the file is settled from its bytes when
 * it is first used (bfs_codec_settle()).
 *
 * Sidecar indexes of a file shown decoded (X.gz.gzi, .tbi, .csi, .fai;
 * X.bgz.gzi) describe compressed bytes nobody sees, and are hidden. With
 * keep_compressed (@keep) the compressed file is shown under its own name
 * too, unchanged (a raw view), and its sidecars with it, so that tabix and
 * samtools work through the mount.
 */
#ifndef BLOCKFS_NAMES_H
#define BLOCKFS_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "blockfs/common.h"

struct bfs_codec;
struct bfs_codec_conf;

struct bfs_name_ops {
	/* Does an entry of any type named @name exist? */
	bool (*exists)(void *ctx, const char *name);
	/* Is @name a regular file (as far as the directory tells, without I/O on it)? */
	bool (*is_file)(void *ctx, const char *name);
};

/**
 * bfs_name_shown() - the name backing entry @backing is shown under.
 * @shown: NAME_MAX + 1 bytes; @codec: set to the codec it is decoded with,
 * or NULL when shown unchanged. With @keep, an entry shown decoded is also
 * shown unchanged under @backing (the caller lists both). @conf: the
 * codecs whose suffixes count (the mount's, codec.h; NULL: the defaults).
 * Return: false when it is not shown at all (a hidden sidecar).
 */
bool bfs_name_shown(const struct bfs_name_ops *ops, void *ctx, const char *backing, char *shown,
		    const struct bfs_codec **codec, bool keep, const struct bfs_codec_conf *conf);

/**
 * bfs_name_resolve() - the backing entry shown as @name.
 * @backing: NAME_MAX + 1 bytes; @keep, @conf: as for bfs_name_shown().
 * Return: 0, or -ENOENT when nothing is shown as @name (a hidden sidecar,
 * or without @keep a backing file that is shown under a shorter name).
 */
BFS_MUST_CHECK int bfs_name_resolve(const struct bfs_name_ops *ops, void *ctx, const char *name,
				    char *backing, const struct bfs_codec **codec, bool keep,
				    const struct bfs_codec_conf *conf);

#endif
