// SPDX-License-Identifier: MIT
/*
 * Block index: append during scan, binary search during reads, the walk's
 * kept bytes (see the contract in index.h). A data structure: it calls
 * nothing above it; making guessed sizes exact is settle.c's.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/index.h"
#include "blockfs/spill.h"

/* Every block costs at least a 4-byte header in any format we read. */
#define MIN_BLOCK_BYTES 4

void bfs_index_init(struct bfs_index *idx, uint64_t file_size)
{
	uint64_t max = file_size / MIN_BLOCK_BYTES + 1;

	memset(idx, 0, sizeof(*idx));
	idx->max_blocks = max < BFS_INDEX_MAX_BLOCKS ? (size_t)max : BFS_INDEX_MAX_BLOCKS;
	atomic_init(&idx->nexact, 0);
	bfs_mutex_init(&idx->settle_lock);
}

void bfs_index_destroy(struct bfs_index *idx)
{
	free(idx->blk);
	idx->blk = NULL;
	idx->n = idx->cap = 0;
	free(idx->sums);
	idx->sums = NULL;
	idx->nsums = 0;
	if (idx->priv && idx->priv_free)
		idx->priv_free(idx->priv);
	idx->priv = NULL;
	idx->priv_bytes = 0;
	bfs_spill_drop(idx->kept);
	idx->kept = NULL;
	free(idx->kept_off);
	idx->kept_off = NULL;
	idx->kept_n = idx->kept_cap = 0;
	pthread_mutex_destroy(&idx->settle_lock);
}

/* --- the walk's spill (spill.h, pieces) ----------------------------------- */

bool bfs_index_keep_begin(struct bfs_index *idx)
{
	if (!idx->kept)
		idx->kept = bfs_spill_begin_pieces();
	return idx->kept != NULL;
}

int bfs_index_keep_bytes(const struct bfs_index *idx, const void *p, size_t len, uint64_t *off)
{
	return idx->kept ? bfs_spill_piece(idx->kept, p, len, off) : -ENOENT;
}

void bfs_index_keep(struct bfs_index *idx, size_t k, uint64_t off)
{
	if (!idx->kept)
		return;
	if (k >= idx->kept_cap) {
		size_t cap = idx->kept_cap ? idx->kept_cap : 64;
		uint64_t *no;

		while (cap <= k)
			cap *= 2;
		no = realloc(idx->kept_off, cap * sizeof(*no));
		if (!no)
			return; /* not kept: decoded when read */
		idx->kept_off = no;
		idx->kept_cap = cap;
	}
	for (; idx->kept_n <= k; idx->kept_n++)
		idx->kept_off[idx->kept_n] = BFS_KEPT_NONE;
	idx->kept_off[k] = off;
}

void bfs_index_keep_seal(struct bfs_index *idx)
{
	bool any = false;

	if (!idx->kept || bfs_spill_live(idx->kept))
		return;
	for (size_t k = 0; k < idx->kept_n && !any; k++)
		any = idx->kept_off[k] != BFS_KEPT_NONE;
	if (!any || bfs_spill_seal_pieces(idx->kept) < 0) {
		bfs_spill_drop(idx->kept);
		idx->kept = NULL;
		idx->kept_n = 0;
	}
}

bool bfs_index_kept(const struct bfs_index *idx, size_t k)
{
	return idx->kept && k < idx->kept_n && idx->kept_off[k] != BFS_KEPT_NONE &&
	       bfs_spill_live(idx->kept);
}

bool bfs_index_kept_read(const struct bfs_index *idx, size_t k, void *dst, uint32_t n)
{
	if (!idx->kept || k >= idx->kept_n || idx->kept_off[k] == BFS_KEPT_NONE || n == 0)
		return false;
	return bfs_spill_read(idx->kept, dst, n, idx->kept_off[k]) == 0;
}

static int reserve_one(struct bfs_index *idx)
{
	struct bfs_blk *nb;
	size_t cap;

	if (idx->n < idx->cap)
		return 0;
	cap = idx->cap ? idx->cap * 2 : 64;
	nb = realloc(idx->blk, cap * sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	idx->blk = nb;
	idx->cap = cap;
	return 0;
}

static void append(struct bfs_index *idx, uint64_t coff, uint32_t clen, uint32_t usize,
		   uint32_t flags)
{
	idx->blk[idx->n++] = (struct bfs_blk){
		.coff = coff,
		.uoff = idx->usize,
		.clen = clen,
		.usize = usize,
		.flags = flags,
	};
	idx->usize += usize;
	if (usize > idx->max_usize)
		idx->max_usize = usize;
	if (!(flags & BFS_BLK_GUESS) && atomic_load(&idx->nexact) == idx->n - 1)
		atomic_store(&idx->nexact, idx->n);
}

int bfs_index_add(struct bfs_index *idx, uint64_t coff, uint32_t clen, uint32_t usize,
		  uint32_t flags)
{
	int rc;

	if (usize == 0)
		return -EINVAL;
	if (idx->n >= idx->max_blocks || idx->usize > (uint64_t)INT64_MAX - usize)
		return -EFBIG;
	rc = reserve_one(idx);
	if (rc < 0)
		return rc;
	append(idx, coff, clen, usize, flags);
	return 0;
}

void bfs_index_mark_broken(struct bfs_index *idx, uint64_t coff, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(idx->why, sizeof(idx->why), fmt, ap);
	va_end(ap);
	idx->broken = true;
	/*
	 * Without room for the poison block the file simply ends early: a
	 * shorter file, never wrong bytes.
	 */
	if (reserve_one(idx) == 0)
		append(idx, coff, 0, 1, BFS_BLK_BAD);
}

void bfs_index_guess_irregular(struct bfs_index *idx, bool aux_is_max)
{
	uint32_t nominal = 0;
	size_t last = 0, votes = 0, others = 0, k;

	for (k = 0; k < idx->n; k++)
		if (!(idx->blk[k].flags & BFS_BLK_BAD)) /* the poison ending a broken file */
			last = k;
	/*
	 * The size most blocks share (Boyer-Moore vote), if more than half of
	 * them do. Nothing follows the last block: its size moves no other.
	 */
	for (k = 0; k < last; k++) {
		if (idx->blk[k].flags & BFS_BLK_BAD)
			continue;
		others++;
		if (votes == 0)
			nominal = idx->blk[k].usize;
		votes += idx->blk[k].usize == nominal ? 1 : (size_t)-1;
	}
	votes = 0;
	for (k = 0; k < last; k++)
		if (!(idx->blk[k].flags & BFS_BLK_BAD) && idx->blk[k].usize == nominal)
			votes++;
	if (votes * 2 <= others)
		nominal = 0; /* no majority: every size is measured */
	for (k = 0; k < last; k++) {
		struct bfs_blk *b = &idx->blk[k];

		if (!(b->flags & BFS_BLK_BAD) && b->usize != nominal &&
		    !(aux_is_max && b->usize == b->aux))
			b->flags |= BFS_BLK_GUESS | BFS_BLK_CLAIMED;
	}
	for (k = 0; k < idx->n && !(idx->blk[k].flags & BFS_BLK_GUESS); k++)
		;
	atomic_store(&idx->nexact, k);
}

int bfs_index_find(const struct bfs_index *idx, uint64_t uoff, size_t *blkno)
{
	size_t lo = 0, hi = atomic_load_explicit(&idx->nexact, memory_order_acquire);

	if (hi == 0 || uoff >= idx->blk[hi - 1].uoff + idx->blk[hi - 1].usize)
		return -ENXIO;
	while (hi - lo > 1) { /* invariant: blk[lo].uoff <= uoff */
		size_t mid = lo + (hi - lo) / 2;

		if (idx->blk[mid].uoff <= uoff)
			lo = mid;
		else
			hi = mid;
	}
	*blkno = lo;
	return 0;
}

/*
 * A guessed block turned out corrupt. Keep its guess, which is what every
 * writer but a flushing one produces, and make it poison: the blocks after
 * it stay readable (blockfs(8): a bad block fails only its own reads). (A block both flushed short and
 * corrupt would misplace what follows; only a seek table rules that out.)
 */
int bfs_index_expect_sum(struct bfs_index *idx, size_t first, size_t last, uint64_t total)
{
	struct bfs_sum *ns = realloc(idx->sums, (idx->nsums + 1) * sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	idx->sums = ns;
	idx->sums[idx->nsums++] = (struct bfs_sum){ .first = first, .last = last, .total = total };
	return 0;
}
