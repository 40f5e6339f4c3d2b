/* SPDX-License-Identifier: MIT */
/*
 * Directory snapshots (snap.c) and the listings made from them (dir.c).
 * Private to the mount's modules.
 */
#ifndef BLOCKFS_DIR_H
#define BLOCKFS_DIR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "blockfs/common.h"
#include "handle.h"

struct bfs_codec;
struct bfs_fs;
struct bfs_inode;
struct bfs_name_ops;
struct bfs_snap;

/* --- snap.c: snapshots and their cache --------------------------------------- */

/*
 * A backing directory's entries as read, with the decoded sizes
 * lookups found: kept while the directory's
 * mtime and ctime stay as they were, in a cache of at most
 * BFS_SNAP_BUDGET bytes, so that lookups and listings after a timeout do
 * not read the directory again (snap.c).
 */
#define BFS_SNAP_BUDGET	 (8u << 20)
#define BFS_SNAP_BUCKETS 256 /* chains of the snapshot cache */

/* The mount's cache of snapshots (fs->snaps). */
struct bfs_snaps {
	pthread_mutex_t lock;	    /* protects the cache: */
	struct bfs_snap **chains;   /* BFS_SNAP_BUCKETS chains by directory identity */
	struct bfs_snap *mru, *lru; /* every cached snapshot, newest first */
	size_t bytes;		    /* their size, bounded by BFS_SNAP_BUDGET */
	atomic_uint ahead;	    /* snapshots read ahead, not asked for yet */
	struct bfs_snap_reading {   /* directories being read ahead now; under lock */
		bool busy;
		dev_t dev;
		ino_t ino;
	} reading[32];
	pthread_cond_t read_done; /* one of them was read; with lock */
};

/**
 * bfs_snap_get() - the snapshot of the directory open as @dirfd.
 * The cached one if the directory's mtime and ctime are as it was read
 * under (one fstat), else read anew and cached unless it is too large or
 * the directory changed just before (racy).
 * @out: one reference (bfs_snap_put()).
 * Return: 0 or -errno. Context: takes fs->snaps.lock, not across the read.
 */
BFS_MUST_CHECK int bfs_snap_get(struct bfs_fs *fs, int dirfd, struct bfs_snap **out);
/* One more reference to @s, for bfs_snap_put(). */
struct bfs_snap *bfs_snap_hold(struct bfs_snap *s);
void bfs_snap_put(struct bfs_snap *s);
/* An empty cache: 0 or -ENOMEM. */
BFS_MUST_CHECK int bfs_snap_cache_init(struct bfs_snaps *c);
/*
 * Drop every cached snapshot, keeping what lookups learned (bfs_snap_save()),
 * and free the cache (the mount ends; nothing if it was never set up).
 */
void bfs_snap_cache_free(struct bfs_fs *fs);

/* The name rules' questions (names.h) answered from a snapshot: names and types only. */
struct bfs_snap_ctx {
	struct bfs_fs *fs;
	int dirfd; /* the directory, for lookups */
	struct bfs_snap *snap;
};

extern const struct bfs_name_ops bfs_snap_name_ops;

/* Entry @i of a snapshot as getdents gave it; @name lives as long as the snapshot. */
struct bfs_snap_entry {
	const char *name;
	ino_t ino;
	unsigned char type; /* DT_* */
};

/* Entry @i (< bfs_snap_count()) of @s, in the order the directory listed them. */
struct bfs_snap_entry bfs_snap_at(const struct bfs_snap *s, size_t i);
/* The entries of @s. */
size_t bfs_snap_count(const struct bfs_snap *s);

/*
 * Entry @name of @c's snapshot, a directory, was looked up: queue reads of
 * the snapshots of the next few directories of the listing on the
 * workers (a walk lists them next). Never waits; a hint.
 */
void bfs_snap_ahead(struct bfs_snap_ctx *c, const char *name);

/*
 * With the index cache on, keep what @s learned as its directory's memo
 * (index_cache.h), if it learned anything since it was read or last kept
 * and is cached (a racy snapshot is neither). Context: writes one file.
 */
void bfs_snap_save(struct bfs_fs *fs, struct bfs_snap *s);

/* Entry @name of @c's snapshot has decoded size @size under backing stamp @stamp. */
void bfs_snap_note_size(struct bfs_snap_ctx *c, const char *name, uint64_t stamp, uint64_t size);

/* The decoded size of entry @name under stamp @stamp, if known: true and *@size. */
BFS_MUST_CHECK bool bfs_snap_size(struct bfs_snap_ctx *c, const char *name, uint64_t stamp,
				  uint64_t *size);

/*
 * Is entry @name of @c's snapshot a regular file (as the directory listed
 * it) of no known decoded size? Then true, and *@dev, *@ino: its identity
 * as listed (the directory's device).
 */
BFS_MUST_CHECK bool bfs_snap_new_file(struct bfs_snap_ctx *c, const char *name, dev_t *dev,
				      ino_t *ino);

/* --- shown.c and dir.c: entries as shown, listings ------------------------------- */

/* An entry as shown. */
struct bfs_dirent {
	const char *name;    /* shown name: @backing, or a copy kept with the entries as shown */
	const char *backing; /* backing name, in the snapshot */
	const struct bfs_codec *codec;
	ino_t ino;
	unsigned char type; /* DT_* */
};

/*
 * The entries of a snapshot as shown (the name rules of names.h applied
 * to each): made once per snapshot and kept with it (bfs_snap_shown()),
 * so that the listings of a directory that did not change share them, and
 * a directory read ahead is listed ahead too, on the worker that read it.
 */
struct bfs_shown;

/* @s's entries as shown, new: NULL without memory. */
struct bfs_shown *bfs_shown_make(struct bfs_fs *fs, struct bfs_snap *s);
void bfs_shown_free(struct bfs_shown *sh);
/* The memory @sh holds. */
size_t bfs_shown_bytes(const struct bfs_shown *sh);
/* Entry @i of @sh: 0 and *@out (its names valid while @sh is), or 1 past the last. */
BFS_MUST_CHECK int bfs_shown_at(const struct bfs_shown *sh, size_t i, struct bfs_dirent *out);

/*
 * The entries of @s as shown: made by the first to ask (bfs_shown_make())
 * and kept with @s, their memory counted in the snapshot cache's budget.
 * NULL without memory. Context: may take fs->snaps.lock.
 */
const struct bfs_shown *bfs_snap_shown(struct bfs_fs *fs, struct bfs_snap *s);

/* A directory listing open: a snapshot and its entries as shown. */
struct bfs_dir {
	struct bfs_open open;	       /* listed by bfs_handle_opendir() */
	struct bfs_snap *snap;	       /* one reference */
	const struct bfs_shown *shown; /* @snap's, which keeps them */
	/*
	 * readdirplus=auto (ops.c): files the last reply gave with their
	 * attributes, not yet counted as used. The kernel serialises a
	 * handle's READDIRs; atomic as their threads differ.
	 */
	atomic_uint rdp_pending;
};

BFS_MUST_CHECK int bfs_dir_open(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_dir **out);
void bfs_dir_free(struct bfs_dir *d);

/**
 * bfs_dir_at() - entry @i of listing @d.
 * Return: 0 and *@out (its names valid while @d is), or 1 past the last entry.
 */
BFS_MUST_CHECK int bfs_dir_at(const struct bfs_dir *d, size_t i, struct bfs_dirent *out);
#endif
