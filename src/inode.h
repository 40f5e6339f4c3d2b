/* SPDX-License-Identifier: MIT */
/*
 * Inodes and their table (inode.c): one backing object shown one way
 * (decoded by a codec, or unchanged), known by its identity (device,
 * inode number) and the path below SOURCE it was last looked up at.
 * Private to the mount's modules.
 */
#ifndef BLOCKFS_INODE_H
#define BLOCKFS_INODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "blockfs/common.h"
#include "fdcache.h"

struct bfs_codec;
struct bfs_file;
struct bfs_fs;
struct bfs_handle;

/*
 * What the daemon keeps for every inode the kernel remembers: 112 bytes,
 * plus its rpath and a share of the table (README: memory per file). A
 * regular file's version (its block index, counters, descriptor) is kept
 * only while it is read or dear to build; what stat needs, the shown
 * size, is remembered in @memo under the backing file's change stamp.
 */
struct bfs_inode {
	struct bfs_inode *hnext; /* hash chain; protected by fs->itab.lock */
	uint64_t nlookup;	 /* protected by fs->itab.lock */
	dev_t dev;		 /* key: backing identity ... */
	ino_t ino;
	const struct bfs_codec *codec; /* ... and how it is shown (NULL: unchanged) */
	/* protected by the inode lock (bfs_ilock()): */
	struct bfs_file *file;	/* current version of a regular file, or NULL */
	char *rpath;		/* backing path below SOURCE, as last looked up */
	uint64_t stamp;		/* bfs_backing_stamp() @memo was found under; 0: none */
	uint64_t memo;		/* decoded: its size; raw: 1 if a codec claims its bytes */
	struct bfs_handle *kh;	/* -o kernel_open: the handle its READs share, or NULL */
	struct bfs_fdc_ent fde; /* its descriptor in fs->fdc; protected by fs->fdc.lock */
	uint16_t type;		/* S_IFMT bits of the backing object */
	bool idle;		/* in the idle ring, holding a lookup; fs->itab.idle_lock */
	bool kstale;		/* kernel_open: the kernel holds the size of other bytes
					   than the file's now, until a stat tells it (handle.c);
					   protected by the inode lock */
};

#define BFS_ILOCKS    512 /* inode lock stripes */
/*
 * Versions nobody reads are kept for the last this many inodes whose
 * versions went idle (a stat built one, a handle was released), with
 * their counters and index; older ones are dropped if cheap to build
 * again (inode.c), their size kept in the inode's memo.
 */
#define BFS_IDLE_KEEP 1024

/* The mount's inode table (fs->itab). */
struct bfs_itable {
	pthread_mutex_t lock; /* protects the table, count and every nlookup */
	struct bfs_inode **table;
	size_t nbuckets, count;
	pthread_mutex_t ilocks[BFS_ILOCKS];    /* the inode locks (bfs_ilock()) */
	pthread_mutex_t idle_lock;	       /* a leaf: protects the ring of idle inodes */
	struct bfs_inode *idle[BFS_IDLE_KEEP]; /* the last inodes whose versions went idle */
	size_t idle_next;		       /* the slot the next one takes */
};

/*
 * An empty table of 1024 chains, its inode locks and idle ring: 0 or
 * -ENOMEM.
 */
BFS_MUST_CHECK int bfs_inode_table_init(struct bfs_itable *t);
/*
 * Fill in @fs's root inode, the directory fs->root_fd opens, which @st
 * describes: path ".", looked up once. 0 or -ENOMEM; fs->root.rpath is
 * the caller's to free, when the mount ends.
 */
BFS_MUST_CHECK int bfs_inode_root_init(struct bfs_fs *fs, const struct stat *st);
/*
 * Free every inode, the table and its locks (the mount is ending: nobody
 * looks up; nothing if it was never set up).
 */
void bfs_inode_table_free(struct bfs_fs *fs);

/* Is backing object @dev:@ino known shown with @codec? */
BFS_MUST_CHECK bool bfs_inode_known(struct bfs_fs *fs, dev_t dev, ino_t ino,
				    const struct bfs_codec *codec);
/* The known inode of @st shown with @codec, with one more lookup; or NULL. */
struct bfs_inode *bfs_inode_ref(struct bfs_fs *fs, const struct stat *st,
				const struct bfs_codec *codec);
/*
 * Find or add the inode for descriptor @fd (consumed; open for reading if
 * @rd, else O_PATH; or -1: none yet, bfs_backing_fd() opens one by path when
 * needed) of backing object @st shown with @codec, with one more lookup.
 * The descriptor goes to the cache, unpinned.
 */
BFS_MUST_CHECK int bfs_inode_get(struct bfs_fs *fs, int fd, bool rd, const struct stat *st,
				 const struct bfs_codec *codec, struct bfs_inode **out);
/* Drop @nlookup lookups of @inode; freed with the last (never the root). */
void bfs_inode_forget(struct bfs_fs *fs, struct bfs_inode *inode, uint64_t nlookup);
/* One more lookup of @inode, which its caller already holds one of, for a ring that keeps it. */
void bfs_inode_hold(struct bfs_fs *fs, struct bfs_inode *inode);

/*
 * The inode of directory (@st->st_dev, @st->st_ino) if the kernel holds
 * it, with a copy of its rpath in *@rpath (unless NULL; the caller frees
 * it); NULL when there is none. The pointer is a node id to hand back to
 * the kernel, not to be dereferenced: the inode may be forgotten at once.
 */
struct bfs_inode *bfs_inode_dir_rpath(struct bfs_fs *fs, const struct stat *st, char **rpath);
/* Inodes in the table now. */
size_t bfs_inode_count(struct bfs_fs *fs);

/*
 * @inode's version may be idle now (a handle was released, a stat built
 * one): kept for a while, then dropped if cheap to build again (the memo
 * keeps its size).
 * Context: no inode lock held.
 */
void bfs_inode_idle(struct bfs_fs *fs, struct bfs_inode *inode);

/**
 * bfs_inode_reapply_hints() - a hint changed: file versions take it now.
 * @dir: NULL when the hint is @in's own (@in a regular file); else the
 *       directory's backing path, and every current version below it is
 *       given its effective hints again. Each version's value is computed
 *       and stored under its inode lock, so that of two concurrent changes
 *       the last computation (which sees both) wins. Regular files known
 *       now are pinned with a lookup reference under fs->itab.lock, then
 *       visited without it: an inode lock may be held across a scan, and
 *       lookups must not wait for that.
 */
void bfs_inode_reapply_hints(struct bfs_fs *fs, struct bfs_inode *in, const char *dir);

/*
 * The st_ino a view of backing inode @ino shows: the raw view its own, the
 * decoded one (@codec) another, stable one (stat and readdir agree).
 */
ino_t bfs_inode_shown_ino(ino_t ino, const struct bfs_codec *codec);

#endif
