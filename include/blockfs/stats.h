/* SPDX-License-Identifier: MIT */
/*
 * Counters (user.blockfs.stats): one set per file version and one for the
 * whole mount, which every version's counts add to, and their text. A
 * leaf: the read path counts without knowing the cache, and the cache
 * accounts its bytes without knowing the read path.
 */
#ifndef BLOCKFS_STATS_H
#define BLOCKFS_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"

/*
 * Counters of one file version (or of the whole mount). Refcounted on
 * their own so that cached blocks can account to a version that is gone.
 */
struct bfs_counters {
	atomic_uint refs;
	struct bfs_counters *parent;	   /* the mount's, or NULL; one reference */
	atomic_uint_fast64_t cached;	   /* decompressed bytes in the cache now */
	atomic_uint_fast64_t reads, bytes; /* read requests and bytes served */
	atomic_uint_fast64_t hits, misses; /* cache lookups */
	atomic_uint_fast64_t decoded;	   /* blocks decompressed */
	atomic_uint_fast64_t decode_ns;	   /* time spent decompressing */
	atomic_uint_fast64_t prefetched, prefetch_used;
	atomic_uint_fast64_t pushed;   /* bytes handed to the kernel's page cache */
	atomic_uint_fast64_t syscalls; /* backing reads */
	atomic_uint_fast64_t csum_failures, errors;
	atomic_uint_fast64_t
		lookup_opens; /* mount only: files of decoded names a lookup opened (facts.c) */
	atomic_uint_fast64_t walked_ahead; /* mount only: files listings looked up side by side */
	atomic_uint_fast64_t dir_memos;	   /* mount only: directory memos taken up (snap.c) */
	atomic_uint_fast64_t dirs_ahead; /* mount only: directories read ahead of a walk (snap.c) */
	atomic_uint_fast64_t dirs_ahead_used; /* mount only: ... and then listed or looked in */
	atomic_uint_fast64_t
		forgotten_dirs; /* mount only: directories the kernel was asked to forget */
	atomic_uint_fast64_t
		names_only_replies;	 /* mount only: first replies, names alone (ops.c) */
	atomic_uint_fast64_t attrs_used; /* mount only: files listed with attributes, stat'ed */
};

/* New counters that also add to @parent (NULL for none). */
struct bfs_counters *bfs_counters_new(struct bfs_counters *parent);

/* Add @n to @field of @c and of its parent. */
#define BFS_COUNT(c, field, n)                                                                     \
	do {                                                                                       \
		atomic_fetch_add_explicit(&(c)->field, (n), memory_order_relaxed);                 \
		if ((c)->parent)                                                                   \
			atomic_fetch_add_explicit(&(c)->parent->field, (n), memory_order_relaxed); \
	} while (0)

struct bfs_counters *bfs_counters_get(struct bfs_counters *c);
void bfs_counters_put(struct bfs_counters *c); /* NULL is a no-op */

/* --- user.blockfs.stats --------------------------------------------------- */

/*
 * For the mount root: the cache's bytes and bound, the inodes kept, and
 * the spill's counters (spill.h), added to its counters.
 */
struct bfs_stats_cache {
	uint64_t bytes, limit;
	uint64_t inodes;
	uint64_t spill_bytes, spill_limit, spill_proofs, spill_sealed, spill_reads;
	uint64_t spill_dropped, spill_failed;
	uint64_t spill_units;
};

/**
 * bfs_stats_format() - counters @c as "key value\n" lines into @buf.
 * @cache: for the mount root, the cache's bytes and bound (cache_bytes,
 *         cache_limit); NULL for a file.
 * Keys, in order: reads bytes cache_hits cache_misses blocks_decompressed
 * decompress_ns blocks_prefetched prefetched_used backing_syscalls
 * checksum_failures errors cached_bytes [the root's: ... cache_bytes
 * cache_limit spill_bytes spill_limit spill_proofs spill_sealed
 * spill_reads spill_dropped spill_failed spill_units].
 * Return: length written (no NUL counted), or -ERANGE when @len is short.
 */
BFS_MUST_CHECK int bfs_stats_format(const struct bfs_counters *c,
				    const struct bfs_stats_cache *cache, char *buf, size_t len);

/* A buffer this big holds any bfs_stats_format() output. */
#define BFS_STATS_MAX 2048

#endif
