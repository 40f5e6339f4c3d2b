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

int bfs_stats_format(const struct bfs_counters *c, const struct bfs_stats_cache *cache,
		     char *buf, size_t len)
{
	/* C11 atomic_load takes a pointer to non-const (C17 relaxed that). */
	struct bfs_counters *m = (struct bfs_counters *)c;
	const struct {
		const char *key;
		uint64_t v;
	} rows[] = {
		{ "reads", LOAD(m, reads) },
		{ "bytes", LOAD(m, bytes) },
		{ "cache_hits", LOAD(m, hits) },
		{ "cache_misses", LOAD(m, misses) },
		{ "blocks_decompressed", LOAD(m, decoded) },
		{ "decompress_ns", LOAD(m, decode_ns) },
		{ "blocks_prefetched", LOAD(m, prefetched) },
		{ "prefetched_used", LOAD(m, prefetch_used) },
		{ "pushed_bytes", LOAD(m, pushed) },
		{ "backing_syscalls", LOAD(m, syscalls) },
		{ "checksum_failures", LOAD(m, csum_failures) },
		{ "errors", LOAD(m, errors) },
		{ "cached_bytes", LOAD(m, cached) },
		/* the mount root's only, from here */
		{ "probes", LOAD(m, probes) },
		{ "probed_ahead", LOAD(m, probed_ahead) },
		{ "dir_memos", LOAD(m, dir_memos) },
		{ "dirs_forgotten", LOAD(m, forgotten_dirs) },
		{ "inodes", cache ? cache->inodes : 0 },
		{ "cache_bytes", cache ? cache->bytes : 0 },
		{ "cache_limit", cache ? cache->limit : 0 },
	};
	size_t nrows = BFS_ARRAY_SIZE(rows) - (cache ? 0 : 7), at = 0;

	for (size_t i = 0; i < nrows; i++) {
		int n = snprintf(buf + at, len - at, "%s %" PRIu64 "\n", rows[i].key, rows[i].v);

		if (n < 0 || (size_t)n >= len - at)
			return -ERANGE;
		at += (size_t)n;
	}
	return (int)at;
}
