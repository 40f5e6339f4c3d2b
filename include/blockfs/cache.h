/* SPDX-License-Identifier: MIT */
/*
 * The decompressed-block cache: blocks keyed by (file version, block
 * number), shared by every file and thread, bounded in bytes. Misses are
 * single-flight: the first caller decodes, later ones wait for it.
 * Readers keep references to blocks until their reply is sent, so data
 * goes to the kernel without a copy; eviction never frees a block a
 * reader holds.
 *
 * Locking: one mutex per shard, never held across a decode or I/O.
 */
#ifndef BLOCKFS_CACHE_H
#define BLOCKFS_CACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"
#include "blockfs/stats.h"

struct bfs_cache;

enum bfs_block_state { BFS_BLOCK_LOADING, BFS_BLOCK_READY, BFS_BLOCK_FAILED };

struct bfs_block {
	/* Read-only once READY; the loader fills data while LOADING. */
	uint64_t fid;
	size_t blkno;
	uint32_t len;
	bool prefetched;	   /* decoded ahead; not yet used by a reader */
	struct bfs_counters *acct; /* one reference; owned */
	/* Private to cache.c. */
	atomic_uint refs;
	int state; /* enum bfs_block_state; protected by the shard lock */
	int err;
	uint64_t used; /* use tick of the last use; protected by the shard lock */
	bool in_cache;
	struct bfs_block *hnext, *lprev, *lnext;
	struct bfs_cache *home; /* whose spares it may join when freed; NULL: private */
	uint32_t cap;		/* data bytes allocated (a spare's may exceed len) */
	uint8_t *data;		/* len bytes */
};

/*
 * Blocks of at least this many bytes are kept as spares when freed, for
 * the next block of about their size (cache.c): malloc maps and unmaps
 * each allocation this big (main.c), and every page of a new mapping
 * faults in again.
 */
#define BFS_CACHE_SPARE_MIN (4u << 20)

/*
 * Buffers of at least this many bytes are mapped by malloc for their use
 * alone (main.c sets malloc's threshold to it); smaller ones come from the
 * heap, whose pages the next buffer reuses. A stock lz4 block of 4 MiB
 * fits below it, with the block's header.
 */
#define BFS_MAPPED_MIN ((4u << 20) + (64u << 10))

/*
 * malloc() of @len bytes for a big buffer (a block's data, a decoder's
 * dictionary): from BFS_MAPPED_MIN on, its pages fault in a huge page at
 * a time where the kernel offers them on request. Free with free().
 */
void *bfs_big_malloc(size_t len);

/**
 * bfs_cache_new() - a cache of at most @max_bytes of block data.
 * @max_bytes 0 makes a cache that keeps nothing: every get is a miss
 * whose block is private to the caller.
 */
BFS_MUST_CHECK int bfs_cache_new(struct bfs_cache **out, uint64_t max_bytes);
void bfs_cache_free(struct bfs_cache *c); /* NULL is a no-op; no block may be held */

/**
 * bfs_cache_get() - block (@fid, @blkno), or a new one for the caller to fill.
 * @len:  its decompressed size (the buffer a new block gets).
 * @acct: counters the block's bytes are accounted to while cached.
 * @out:  one reference for the caller; drop with bfs_block_put().
 * Return: 1 when the caller must fill (*out)->data and then call
 * bfs_cache_done(); 0 when the block is ready; -errno when a concurrent
 * load of it failed (that error) or memory ran out.
 * Context: may sleep waiting for another thread's load.
 */
BFS_MUST_CHECK int bfs_cache_get(struct bfs_cache *c, uint64_t fid, size_t blkno, uint32_t len,
				 struct bfs_counters *acct, struct bfs_block **out);

/*
 * bfs_cache_lookup() - block (@fid, @blkno) if the cache has it, waiting
 * for a load in progress; never adds it. Return: 0 with one reference in
 * *@out, -ENOENT when absent, or the error of a concurrent load.
 */
BFS_MUST_CHECK int bfs_cache_lookup(struct bfs_cache *c, uint64_t fid, size_t blkno,
				    struct bfs_block **out);

/*
 * Like get, but never waits and never allocates more than the cache may
 * hold: for read-ahead. Return: 1 (fill it), or 0 with *@out NULL when the
 * block is cached, loading, or there is no room.
 */
BFS_MUST_CHECK int bfs_cache_try_new(struct bfs_cache *c, uint64_t fid, size_t blkno, uint32_t len,
				     struct bfs_counters *acct, struct bfs_block **out);

/* The caller of a 1 from get finished filling @b: @err 0 or -errno. Wakes waiters. */
void bfs_cache_done(struct bfs_cache *c, struct bfs_block *b, int err);

/* Is (@fid, @blkno) cached and ready? Does not count as a use. */
bool bfs_cache_contains(struct bfs_cache *c, uint64_t fid, size_t blkno);

/* Forget (@fid, @blkno) if cached: readers holding it keep their copy. */
void bfs_cache_drop(struct bfs_cache *c, uint64_t fid, size_t blkno);

/*
 * Make (@fid, @blkno), if cached, the first to go when room is needed,
 * as if unused since the cache began; a later use makes it recent again.
 * For blocks a sequential reader has gone past, whose bytes the kernel's
 * page cache holds now: kept, they would mostly duplicate it.
 */
void bfs_cache_demote(struct bfs_cache *c, uint64_t fid, size_t blkno);

void bfs_block_put(struct bfs_block *b); /* NULL is a no-op */

/* Bytes of block data the cache holds now, and its bound. */
uint64_t bfs_cache_bytes(const struct bfs_cache *c);
/* Bytes of the spare blocks it keeps (cache.c), within the bound beside its blocks. */
uint64_t bfs_cache_spare_bytes(const struct bfs_cache *c);
uint64_t bfs_cache_limit(const struct bfs_cache *c);

#endif
