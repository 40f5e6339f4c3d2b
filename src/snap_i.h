/* SPDX-License-Identifier: MIT */
/*
 * What the files of the snapshot part share beyond dir.h: a snapshot's
 * entries (snap.c reads and caches them; shown.c gives them out, as they
 * are and as shown) and their memos in the index cache (snapmemo.c).
 * Nothing else includes this.
 */
#ifndef BLOCKFS_SNAP_I_H
#define BLOCKFS_SNAP_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct bfs_fs;
struct bfs_shown;

/*
 * A snapshot: the entries of one backing directory in the order getdents
 * returned them, names packed in one buffer (about 30 bytes an entry with
 * its name), and per entry what probing found. It is valid
 * while the directory's identity, mtime and ctime are those it was read
 * under: adding, removing or renaming an entry changes the directory's
 * mtime. A decoded size a lookup learned is remembered with the change
 * stamp of the file it looked at, and holds while that stamp does. With
 * the index cache on, what lookups learned is kept there as the
 * directory's memo (index_cache.h) and taken up again by the next mount's
 * first snapshot of the same directory version (snapmemo.c).
 */
struct snent {
	uint32_t name;	    /* offset in names */
	unsigned char type; /* DT_* */
	atomic_bool probed; /* stamp is known: a lookup or a memo gave it */
	atomic_bool queued; /* a directory whose snapshot was queued to be read ahead */
	ino_t ino;
	atomic_uint_fast64_t stamp; /* bfs_backing_stamp() of the file looked up */
	uint64_t size;		    /* its decoded size under stamp, or NO_SIZE */
};

#define NO_SIZE UINT64_MAX

struct bfs_snap {
	atomic_uint refs; /* the cache's, and each user's */
	dev_t dev;	  /* the directory: identity ... */
	ino_t ino;
	struct timespec mtime, ctime; /* ... and times when read */
	size_t n, bytes;	      /* entries; memory held */
	struct snent *e;
	char *names;
	uint64_t *slot;	   /* names by hash: hash << 32 | entry + 1, 0 empty
					   (snap_index()); NULL: e is sorted by name */
	size_t mask;	   /* slots - 1 */
	bool cached;	   /* in the cache; protected by fs->snaps.lock */
	atomic_bool dirty; /* learned something its memo does not say */
	atomic_bool ahead; /* read ahead, cached, not asked for since (snaps.ahead) */
	_Atomic(struct bfs_shown *) shown;    /* its entries as shown, once made (dir.c) */
	pthread_mutex_t pair_lock;	      /* each entry's stamp and size change together */
	struct bfs_snap *hnext, *prev, *next; /* chain and LRU; protected by fs->snaps.lock */
};

static inline const char *bfs_snap_ename(const struct bfs_snap *s, const struct snent *e)
{
	return s->names + e->name;
}

/* Take up what the memo of @s's directory version says; @s is not shared yet (snapmemo.c). */
void bfs_snap_memo_load(struct bfs_fs *fs, struct bfs_snap *s);

#endif
