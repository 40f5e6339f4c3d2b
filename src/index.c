// SPDX-License-Identifier: MIT
/*
 * Block index: append during scan, binary search during reads, and the
 * in-order settling of guessed sizes (see the contract in index.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/io.h"

/* Every block costs at least a 4-byte header in any format we read. */
#define MIN_BLOCK_BYTES 4

void bfs_index_init(struct bfs_index *idx, uint64_t file_size)
{
	uint64_t max = file_size / MIN_BLOCK_BYTES + 1;

	memset(idx, 0, sizeof(*idx));
	idx->max_blocks = max < BFS_INDEX_MAX_BLOCKS ? (size_t)max : BFS_INDEX_MAX_BLOCKS;
	atomic_init(&idx->nexact, 0);
	pthread_mutex_init(&idx->settle_lock, NULL);
}

void bfs_index_destroy(struct bfs_index *idx)
{
	free(idx->blk);
	idx->blk = NULL;
	idx->n = idx->cap = 0;
	pthread_mutex_destroy(&idx->settle_lock);
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
		.coff = coff, .uoff = idx->usize, .clen = clen, .usize = usize, .flags = flags,
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
		if (!(idx->blk[k].flags & BFS_BLK_BAD))	/* the poison ending a broken file */
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
		nominal = 0;		/* no majority: every size is measured */
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
	while (hi - lo > 1) {			/* invariant: blk[lo].uoff <= uoff */
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
 * it stay readable, as SPEC §6 asks. (A block both flushed short and
 * corrupt would misplace what follows; only a seek table rules that out.)
 */
static void poison_guess(struct bfs_index *idx, size_t k, const char *why)
{
	struct bfs_blk *b = &idx->blk[k];

	b->flags = (b->flags & ~BFS_BLK_GUESS) | BFS_BLK_BAD;
	snprintf(idx->why, sizeof(idx->why), "block %zu: %s", k, why);
}

int bfs_index_settle(struct bfs_index *idx, struct bfs_io *io, const struct bfs_codec *codec,
		     uint64_t uoff)
{
	size_t k = atomic_load_explicit(&idx->nexact, memory_order_acquire);
	uint8_t *buf = NULL;
	size_t bufcap = 0;
	int rc = 0;

	if (k > 0 && uoff < idx->blk[k - 1].uoff + idx->blk[k - 1].usize)
		return 0;			/* published entries never change */
	pthread_mutex_lock(&idx->settle_lock);
	for (k = atomic_load(&idx->nexact); k < idx->n; k++) {
		struct bfs_blk *b = &idx->blk[k];
		const char *why = "corrupt block";
		uint32_t exact;

		if (uoff < b->uoff)
			break;			/* the block holding uoff is exact now */
		if (b->flags & BFS_BLK_GUESS) {
			if (bufcap < b->clen) {
				free(buf);
				bufcap = b->clen;
				buf = malloc(bufcap);
				if (!buf) {
					rc = -ENOMEM;
					break;
				}
			}
			rc = bfs_io_read(io, buf, b->clen, b->coff);
			if (rc < 0)
				break;
			if (codec->measure(b, buf, &exact, &why) < 0) {
				poison_guess(idx, k, why);
				atomic_store_explicit(&idx->nexact, k + 1, memory_order_release);
				continue;
			}
			if (exact != b->usize) {
				uint32_t claim = b->usize;

				/* Only later, unpublished entries move. */
				for (size_t j = k + 1; j < idx->n; j++)
					idx->blk[j].uoff = idx->blk[j].uoff - b->usize + exact;
				idx->usize = idx->usize - b->usize + exact;
				b->usize = exact;
				if (exact > idx->max_usize)
					idx->max_usize = exact;
				/*
				 * The file stated another size: its index is damaged
				 * or forged here. Later blocks now sit where the data
				 * puts them; this one fails, as a corrupt block would.
				 */
				if (b->flags & BFS_BLK_CLAIMED) {
					snprintf(idx->why, sizeof(idx->why), "block %zu: decodes to %"
						 PRIu32 " bytes, the index says %" PRIu32, k, exact,
						 claim);
					b->flags |= BFS_BLK_BAD;
				}
			}
			b->flags &= ~(BFS_BLK_GUESS | BFS_BLK_CLAIMED);
		}
		atomic_store_explicit(&idx->nexact, k + 1, memory_order_release);
	}
	pthread_mutex_unlock(&idx->settle_lock);
	free(buf);
	return rc;
}
