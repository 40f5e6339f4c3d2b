/* SPDX-License-Identifier: MIT */
/*
 * The name rules of SPEC §5: which backing entry a shown name stands for,
 * and what name a backing entry is shown under. Pure logic over two
 * questions about one directory, so readdir (a listing in memory), lookup
 * (syscalls) and the unit tests (a fake) share one implementation.
 *
 * A backing entry B = S + suffix, a regular file whose content its codec
 * claims, is shown as S when no entry S exists and no entry S + suffix'
 * with an earlier (codec, suffix) pair also claims S. Everything else is
 * shown under its own name. Order: .lz4, .gz, .bgz.
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

struct bfs_codec;

struct bfs_name_ops {
	/* Does an entry of any type named @name exist? */
	bool (*exists)(void *ctx, const char *name);
	/* Is @name a regular file whose first bytes @codec claims? */
	bool (*claims)(void *ctx, const char *name, const struct bfs_codec *codec);
};

/*
 * Whether showing backing entry @backing asks ops->claims about it (its
 * name ends in a codec's suffix): what a listing may read ahead for.
 */
bool bfs_name_asks(const char *backing);

/**
 * bfs_name_shown() - the name backing entry @backing is shown under.
 * @shown: NAME_MAX + 1 bytes; @codec: set to the codec it is decoded with,
 * or NULL when shown unchanged. With @keep, an entry shown decoded is also
 * shown unchanged under @backing (the caller lists both).
 * Return: false when it is not shown at all (a hidden sidecar).
 */
bool bfs_name_shown(const struct bfs_name_ops *ops, void *ctx, const char *backing,
		    char *shown, const struct bfs_codec **codec, bool keep);

/**
 * bfs_name_resolve() - the backing entry shown as @name.
 * @backing: NAME_MAX + 1 bytes; @keep: as for bfs_name_shown().
 * Return: 0, or -ENOENT when nothing is shown as @name (a hidden sidecar,
 * or without @keep a backing file that is shown under a shorter name).
 */
BFS_MUST_CHECK int bfs_name_resolve(const struct bfs_name_ops *ops, void *ctx, const char *name,
		     char *backing, const struct bfs_codec **codec, bool keep);

#endif
