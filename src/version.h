/* SPDX-License-Identifier: MIT */
/*
 * File versions and attributes as shown (version.c): an inode's current
 * version, its stat, opens, and the walks under way. Private to the
 * mount's modules.
 */
#ifndef BLOCKFS_VERSION_H
#define BLOCKFS_VERSION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "blockfs/common.h"

struct bfs_file;
struct bfs_fs;
struct bfs_inode;

/*
 * A walk of a backing file under way (version.c), so that user.blockfs.walk
 * can say how far it is while the inode's lock is held for it. As many
 * are shown at once as there are slots; more walk unseen.
 */
#define BFS_WALKS_SHOWN 16

struct bfs_walking {
	const struct bfs_inode *in; /* NULL: a free slot; protected by fs->walks.lock */
	uint64_t total;		    /* the backing file's size */
	atomic_uint_fast64_t done;  /* bytes of it the walk has read */
};

/* The mount's walks under way (fs->walks). */
struct bfs_walks {
	pthread_mutex_t lock; /* a leaf: the slots */
	struct bfs_walking slot[BFS_WALKS_SHOWN];
};

/* Free slots and their lock; its lock destroyed, after every walk ended. */
void bfs_version_walks_init(struct bfs_walks *w);
void bfs_version_walks_destroy(struct bfs_walks *w);

/*
 * How far the walk of @in is, as "walking 1.2 GiB of 4.0 GiB" in @buf
 * (@len bytes): its length, or 0 when no walk of @in is under way.
 */
int bfs_version_walking(struct bfs_fs *fs, const struct bfs_inode *in, char *buf, size_t len);

/*
 * Backing stat @st of @in made what it shows. The size of a decoded file
 * comes from the version open readers hold, else from the memo while the
 * backing file's stamp is the one it was found under, else from a version
 * built now (and dropped again if cheap). Only that last reads the file.
 */
BFS_MUST_CHECK int bfs_version_shown(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st);
/* Attributes as shown: the backing file's, with the decompressed size. */
BFS_MUST_CHECK int bfs_version_stat(struct bfs_fs *fs, struct bfs_inode *inode, struct stat *st);
/* The same, with the size of version @f that an open handle reads. */
BFS_MUST_CHECK int bfs_version_stat_of(struct bfs_fs *fs, struct bfs_inode *inode,
				       const struct bfs_file *f, struct stat *st);

/**
 * bfs_version_open() - bfs_version_current() for an open: first checks
 * that the path @inode was last found at still names it. A backing file
 * replaced by rename is a new object under the old name, while the
 * kernel's cached entry still points at the old inode.
 * @out: also holds a use of its descriptor (bfs_file_unuse() at release).
 * @defer: NULL, or where to say that the open may go without a version:
 * a decoded file whose backing file, stat'ed now by path, is the one its
 * memo was found under, and whose version was dropped (bfs_inode_idle()).
 * The kernel's pages of it are good then (keep_cache), and a read that
 * misses them builds the version later (bfs_handle_stream()).
 * Return: as bfs_version_current(); 1 with the backing stamp in *@defer
 * and no version; or -ESTALE, which makes the VFS walk the path again with
 * LOOKUP_REVAL, so that the open finds the new file.
 */
BFS_MUST_CHECK int bfs_version_open(struct bfs_fs *fs, struct bfs_inode *inode,
				    struct bfs_file **out, bool *changed, uint64_t *defer);

/**
 * bfs_version_current() - the current version of a regular file.
 * Rebuilds it when the backing file changed since it was built.
 * @out: one reference for the caller (bfs_file_put()).
 * @changed: set when an older version existed and was replaced.
 */
BFS_MUST_CHECK int bfs_version_current(struct bfs_fs *fs, struct bfs_inode *inode,
				       struct bfs_file **out, bool *changed);

/*
 * Take a use of @f's descriptor (@f: a version of @inode), opening the
 * backing file again if it was closed. -ESTALE if the file changed since
 * @f was built.
 */
BFS_MUST_CHECK int bfs_version_use(struct bfs_fs *fs, struct bfs_inode *inode, struct bfs_file *f);

#endif
