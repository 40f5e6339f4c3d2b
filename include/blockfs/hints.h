/* SPDX-License-Identifier: MIT */
/*
 * Access hints (man 8 blockfs, EXTENDED ATTRIBUTES), in the spirit of
 * madvise(2): what a reader of a file is likely to do next, set per file
 * or directory with setfattr.
 *
 * This module owns the store that keeps them for the life of the mount
 * and the inheritance rule (their values and names are vocab.h's). It
 * knows nothing of FUSE or of inodes: the
 * store is keyed by a backing path below SOURCE ("." is SOURCE itself,
 * then "dir", "dir/file.lz4"), so a hint outlives the inode it was set
 * through, and belongs to the path, not to the object behind it.
 */
#ifndef BLOCKFS_HINTS_H
#define BLOCKFS_HINTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"
#include "blockfs/vocab.h"

/* --- the store ------------------------------------------------------------ */

enum bfs_hint_kind { BFS_HINT_ADVICE, BFS_HINT_READPATH, BFS_HINT_KINDS };

/*
 * Hints set on paths below SOURCE, for the life of the mount. Embedded in
 * the mount; bfs_hints_init() cannot fail (the table is allocated on the
 * first set). Used on open and setxattr only: one mutex, a leaf lock
 * (callers may hold inode locks; nothing is called with it held).
 */
struct bfs_hint_ent;
struct bfs_hints {
	pthread_mutex_t lock;
	struct bfs_hint_ent **tab; /* protected by lock; NULL until the first set */
	size_t nbuckets, count;	   /* protected by lock */
};

void bfs_hints_init(struct bfs_hints *h);
void bfs_hints_destroy(struct bfs_hints *h);

/* Set @path's own hint of @kind to @value. Return: 0 or -ENOMEM. */
BFS_MUST_CHECK int bfs_hints_set(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind,
				 int value);
/* Remove @path's own hint of @kind. Return: 0, or -ENODATA when it had none. */
BFS_MUST_CHECK int bfs_hints_clear(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind);
/* @path's own hint of @kind into *@value; false when it has none. */
bool bfs_hints_own(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind, int *value);

/**
 * bfs_hints_effective() - the hint of @kind that applies to @path: its
 * own, else that of its nearest ancestor directory ("a/b/f" asks "a/b",
 * "a", then "."), else @dflt (the mount option).
 */
int bfs_hints_effective(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind, int dflt);

#endif
