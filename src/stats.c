// SPDX-License-Identifier: MIT
/* Counters and their text (contract in stats.h). */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "blockfs/stats.h"

/* --- counters ------------------------------------------------------------- */

struct bfs_counters *bfs_counters_new(struct bfs_counters *parent)
{
	struct bfs_counters *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	atomic_init(&c->refs, 1);
	c->parent = parent ? bfs_counters_get(parent) : NULL;
	return c;
}

struct bfs_counters *bfs_counters_get(struct bfs_counters *c)
{
	atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
	return c;
}

void bfs_counters_put(struct bfs_counters *c)
{
	unsigned int was;

	if (!c)
		return;
	was = atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel);
	assert(was > 0);
	if (was == 1) {
		bfs_counters_put(c->parent);
		free(c);
	}
}

/* --- user.blockfs.stats ------------------------------------------------- */

#define LOAD(c, f) ((uint64_t)atomic_load_explicit(&(c)->f, memory_order_relaxed))

int bfs_stats_format(const struct bfs_counters *c, const struct bfs_stats_cache *cache, char *buf,
		     size_t len)
{
	/* C11 atomic_load takes a pointer to non-const (C17 relaxed that). */
	struct bfs_counters *m = (struct bfs_counters *)c;
	const struct {
		const char *key;
		uint64_t v;
		bool root; /* the mount root's only */
	} rows[] = {
		{ "reads", LOAD(m, reads), false },
		{ "bytes", LOAD(m, bytes), false },
		{ "cache_hits", LOAD(m, hits), false },
		{ "cache_misses", LOAD(m, misses), false },
		{ "blocks_decompressed", LOAD(m, decoded), false },
		{ "decompress_ns", LOAD(m, decode_ns), false },
		{ "blocks_prefetched", LOAD(m, prefetched), false },
		{ "prefetched_used", LOAD(m, prefetch_used), false },
		{ "pushed_bytes", LOAD(m, pushed), false },
		{ "backing_syscalls", LOAD(m, syscalls), false },
		{ "checksum_failures", LOAD(m, csum_failures), false },
		{ "errors", LOAD(m, errors), false },
		{ "cached_bytes", LOAD(m, cached), false },
		{ "lookup_opens", LOAD(m, lookup_opens), true },
		{ "walked_ahead", LOAD(m, walked_ahead), true },
		{ "dir_memos", LOAD(m, dir_memos), true },
		{ "dirs_read_ahead", LOAD(m, dirs_ahead), true },
		{ "dirs_ahead_used", LOAD(m, dirs_ahead_used), true },
		{ "dirs_forgotten", LOAD(m, forgotten_dirs), true },
		{ "names_only_replies", LOAD(m, names_only_replies), true },
		{ "attrs_used", LOAD(m, attrs_used), true },
		{ "inodes", cache ? cache->inodes : 0, true },
		{ "cache_bytes", cache ? cache->bytes : 0, true },
		{ "cache_limit", cache ? cache->limit : 0, true },
		{ "spill_bytes", cache ? cache->spill_bytes : 0, true },
		{ "spill_limit", cache ? cache->spill_limit : 0, true },
		{ "spill_proofs", cache ? cache->spill_proofs : 0, true },
		{ "spill_sealed", cache ? cache->spill_sealed : 0, true },
		{ "spill_reads", cache ? cache->spill_reads : 0, true },
		{ "spill_dropped", cache ? cache->spill_dropped : 0, true },
		{ "spill_failed", cache ? cache->spill_failed : 0, true },
		{ "spill_units", cache ? cache->spill_units : 0, true },
	};
	size_t at = 0;

	for (size_t i = 0; i < BFS_ARRAY_SIZE(rows); i++) {
		int n;

		if (rows[i].root && !cache)
			continue;
		n = snprintf(buf + at, len - at, "%s %" PRIu64 "\n", rows[i].key, rows[i].v);
		if (n < 0 || (size_t)n >= len - at)
			return -ERANGE;
		at += (size_t)n;
	}
	return (int)at;
}
