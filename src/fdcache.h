/* SPDX-License-Identifier: MIT */
/*
 * The cache of backing descriptors (fdcache.c): at most a bound of them
 * open, least recently used closed first, never one in use (pinned). An
 * entry is embedded in what holds the descriptor (struct bfs_inode); the
 * cache knows nothing else of it: opening by path again, and checking it
 * is the same object, are the holder's (backing.c). Every function takes
 * the cache's lock itself; none is held on return.
 */
#ifndef BLOCKFS_FDCACHE_H
#define BLOCKFS_FDCACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* 24 bytes of every inode: pins and rdonly share a word. */
struct bfs_fdc_ent {
	struct bfs_fdc_ent *prev, *next; /* LRU links while fd >= 0 */
	int fd;				 /* O_PATH (rdonly: O_RDONLY) or -1 */
	unsigned int pins : 31;		 /* users of fd: it is not closed while pinned */
	unsigned int rdonly : 1;	 /* fd is open for reading (regular files) */
};

struct bfs_fdc {
	pthread_mutex_t lock;	       /* every entry's fields, the list and counts */
	struct bfs_fdc_ent *mru, *lru; /* entries with an open fd, newest first */
	size_t n, max;		       /* open descriptors, and their bound */
};

/* An empty cache of at most @max descriptors (pinned ones may overshoot it). */
void bfs_fdc_init(struct bfs_fdc *c, size_t max);
/* Its lock: every entry has been released (bfs_fdc_release()) before. */
void bfs_fdc_destroy(struct bfs_fdc *c);
/* How many descriptors to keep open: a quarter of RLIMIT_NOFILE, at least 16. */
size_t bfs_fdc_budget(void);

/* An entry holding no descriptor. */
static inline void bfs_fdc_ent_init(struct bfs_fdc_ent *e)
{
	*e = (struct bfs_fdc_ent){ .fd = -1 };
}

/* @e's descriptor pinned (bfs_fdc_put()) and made the newest, if it is open; else -1. */
int bfs_fdc_get(struct bfs_fdc *c, struct bfs_fdc_ent *e);
/* Unpin @e's descriptor; trims the cache if pins held it over the bound. */
void bfs_fdc_put(struct bfs_fdc *c, struct bfs_fdc_ent *e);
/*
 * Give @e descriptor @fd (consumed: closed when @e has one already; open
 * for reading if @rd, else O_PATH), pinned if @pin; trims the cache.
 * Return: @e's descriptor now (with @pin, pinned; without, it may be
 * closed already: -1).
 */
int bfs_fdc_adopt(struct bfs_fdc *c, struct bfs_fdc_ent *e, int fd, bool rd, bool pin);
/* @e is going: close its descriptor. */
void bfs_fdc_release(struct bfs_fdc *c, struct bfs_fdc_ent *e);
/* The process ran out of descriptors: close every unpinned one. */
void bfs_fdc_shed(struct bfs_fdc *c);
/* Is @fd (pinned by the caller) @e's descriptor, open for reading? */
bool bfs_fdc_is_rdonly(struct bfs_fdc *c, struct bfs_fdc_ent *e, int fd);
/* @e's descriptor if it is open for reading, else -1 (not pinned: the caller's is). */
int bfs_fdc_rdonly_fd(struct bfs_fdc *c, struct bfs_fdc_ent *e);
/*
 * Put @fd (open for reading; not consumed) in place of @e's descriptor
 * @old, which the caller holds pinned, if that is still @e's and open for
 * reading: the number stays, holders of it read the new one.
 * Return: 0 when replaced, else -1.
 */
int bfs_fdc_replace(struct bfs_fdc *c, struct bfs_fdc_ent *e, int old, int fd);

#endif
