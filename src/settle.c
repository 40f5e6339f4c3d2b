// SPDX-License-Identifier: MIT
/*
 * Settling an index (contract in settle.h): measuring the blocks whose
 * sizes a scan could only guess, with the codec's measure(), after the
 * scan (bfs_measure(), on the workers) and in order before a read relies
 * on them (bfs_settle()). It sits above the codecs: the codecs fill the
 * index (index.c, a data structure that calls nothing above it), and
 * this file asks the codec, through its vtable, what each guessed block
 * really holds.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/codec.h"
#include "blockfs/handoff.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "blockfs/settle.h"
#include "blockfs/spill.h"
#include "blockfs/workq.h"

static void poison_guess(struct bfs_index *idx, size_t k, const char *why)
{
	struct bfs_blk *b = &idx->blk[k];

	b->flags = (b->flags & ~BFS_BLK_GUESS) | BFS_BLK_BAD;
	snprintf(idx->why, sizeof(idx->why), "block %zu: %s", k, why);
}

int bfs_settle(struct bfs_index *idx, struct bfs_io *io, const struct bfs_codec *codec,
	       uint64_t uoff)
{
	size_t k = atomic_load_explicit(&idx->nexact, memory_order_acquire);
	uint8_t *buf = NULL;
	size_t bufcap = 0;
	int rc = 0;

	if (k > 0 && uoff < idx->blk[k - 1].uoff + idx->blk[k - 1].usize)
		return 0; /* published entries never change */
	if (pthread_mutex_trylock(&idx->settle_lock) != 0) {
		bfs_handoff(); /* another thread is measuring blocks */
		bfs_mutex_lock(&idx->settle_lock);
	}
	for (k = atomic_load(&idx->nexact); k < idx->n; k++) {
		struct bfs_blk *b = &idx->blk[k];
		const char *why = "corrupt block";
		uint32_t exact;

		if (uoff < b->uoff)
			break; /* the block holding uoff is exact now */
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
				b->usize = exact;
				if (exact > idx->max_usize)
					idx->max_usize = exact;
				/*
				 * The file stated another size: its index is damaged
				 * or forged here. Later blocks now sit where the data
				 * puts them; this one fails, as a corrupt block would,
				 * and so does the last, because the size shown, which
				 * the kernel knows, stays: damaged, not resized.
				 */
				if (b->flags & BFS_BLK_CLAIMED) {
					snprintf(idx->why, sizeof(idx->why),
						 "block %zu: decodes to %" PRIu32
						 " bytes, the index says %" PRIu32,
						 k, exact, claim);
					b->flags |= BFS_BLK_BAD;
					idx->blk[idx->n - 1].flags |= BFS_BLK_BAD;
				} else {
					idx->usize = idx->usize - claim + exact;
				}
			}
			b->flags &= ~(BFS_BLK_GUESS | BFS_BLK_CLAIMED);
		}
		atomic_store_explicit(&idx->nexact, k + 1, memory_order_release);
	}
	bfs_mutex_unlock(&idx->settle_lock);
	free(buf);
	return rc;
}

/* --- measuring after the scan --------------------------------------------- */

/* Compressed bytes one measuring item reads at once, at most. */
#define MEASURE_SPAN (1u << 20)

struct measure {
	struct bfs_index *idx;
	struct bfs_io *io;
	const struct bfs_codec *codec;
	size_t *todo; /* blocks to measure, ascending */
	size_t ntodo;
	size_t *item; /* item i measures todo[item[i] .. item[i + 1]) */
	size_t nitems;
	atomic_int err;		  /* first -errno from the I/O, or 0 */
	pthread_mutex_t why_lock; /* protects idx->why */
};

/* Measure block @k from its compressed bytes at @src; poison it on failure. */
static void measure_one(struct measure *m, size_t k, const uint8_t *src)
{
	struct bfs_blk *b = &m->idx->blk[k];
	const char *why = "corrupt block";
	uint32_t exact;
	int rc = m->codec->measure(b, src, &exact, &why);

	if (rc < 0) {
		bfs_mutex_lock(&m->why_lock);
		poison_guess(m->idx, k, why);
		bfs_mutex_unlock(&m->why_lock);
		return;
	}
	b->usize = exact;
	b->flags &= ~BFS_BLK_GUESS;
}

/*
 * One item: its blocks, each of which it alone writes, read with one
 * pread when they lie together (the usual case: they follow each other).
 */
static void measure_item(void *arg, size_t i)
{
	struct measure *m = arg;
	const struct bfs_blk *blk = m->idx->blk;
	size_t t0 = m->item[i], t1 = m->item[i + 1];
	const struct bfs_blk *a = &blk[m->todo[t0]], *z = &blk[m->todo[t1 - 1]];
	uint64_t need = 0, span = z->coff + z->clen - a->coff;
	bool spanned;
	uint8_t *buf;
	int rc = 0;

	for (size_t t = t0; t < t1; t++)
		need += blk[m->todo[t]].clen;
	spanned = z->coff >= a->coff && span <= 2 * need;
	buf = spanned ? malloc(span) : NULL;
	if (spanned) {
		if (!buf)
			rc = -ENOMEM;
		else
			rc = bfs_io_read(m->io, buf, span, a->coff);
		for (size_t t = t0; rc == 0 && t < t1; t++)
			measure_one(m, m->todo[t], buf + (blk[m->todo[t]].coff - a->coff));
	} else {
		for (size_t t = t0; rc == 0 && t < t1; t++) {
			const struct bfs_blk *b = &blk[m->todo[t]];
			uint8_t *nb = realloc(buf, b->clen);

			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
			rc = bfs_io_read(m->io, buf, b->clen, b->coff);
			if (rc == 0)
				measure_one(m, m->todo[t], buf);
		}
	}
	free(buf);
	if (rc < 0) {
		int zero = 0;

		atomic_compare_exchange_strong(&m->err, &zero, rc);
	}
}

/* Split the blocks to measure into items of at most MEASURE_SPAN compressed bytes. */
static int plan_items(struct measure *m)
{
	const struct bfs_blk *blk = m->idx->blk;
	uint64_t bytes = 0;

	m->item = malloc((m->ntodo + 1) * sizeof(*m->item));
	if (!m->item)
		return -ENOMEM;
	for (size_t t = 0; t < m->ntodo; t++) {
		if (t == 0 || bytes + blk[m->todo[t]].clen > MEASURE_SPAN) {
			m->item[m->nitems++] = t;
			bytes = 0;
		}
		bytes += blk[m->todo[t]].clen;
	}
	m->item[m->nitems] = m->ntodo;
	return 0;
}

/*
 * The blocks have their sizes: place them, and end the file after the
 * first run whose total differs from what the file states for it (what
 * lz4 -d does too: it writes the frame, then fails).
 */
static void place_blocks(struct bfs_index *idx)
{
	uint64_t at = 0;
	size_t s = 0, k;

	idx->max_usize = 0;
	for (k = 0; k < idx->n; k++) {
		struct bfs_blk *b = &idx->blk[k];

		b->uoff = at;
		at += b->usize;
		if (b->usize > idx->max_usize)
			idx->max_usize = b->usize;
		for (; s < idx->nsums && idx->sums[s].last == k; s++) {
			const struct bfs_sum *sum = &idx->sums[s];
			uint64_t got = at - idx->blk[sum->first].uoff;

			if (got == sum->total)
				continue;
			idx->n = k + 1;
			idx->usize = at;
			bfs_index_mark_broken(idx, b->coff + b->clen,
					      "frame ending at block %zu "
					      "holds %" PRIu64 " bytes, its header says %" PRIu64,
					      k, got, sum->total);
			return;
		}
	}
	idx->usize = at;
}

int bfs_measure(struct bfs_index *idx, struct bfs_io *io, const struct bfs_codec *codec,
		struct bfs_workq *wq)
{
	struct measure m = { .idx = idx, .io = io, .codec = codec };
	size_t k;
	int rc = 0;

	for (k = 0; k < idx->n; k++)
		if ((idx->blk[k].flags & (BFS_BLK_GUESS | BFS_BLK_CLAIMED)) == BFS_BLK_GUESS)
			m.ntodo++;
	if (m.ntodo) {
		m.todo = malloc(m.ntodo * sizeof(*m.todo));
		if (!m.todo)
			return -ENOMEM;
		m.ntodo = 0;
		for (k = 0; k < idx->n; k++)
			if ((idx->blk[k].flags & (BFS_BLK_GUESS | BFS_BLK_CLAIMED)) ==
			    BFS_BLK_GUESS)
				m.todo[m.ntodo++] = k;
		rc = plan_items(&m);
		if (rc == 0) {
			atomic_init(&m.err, 0);
			bfs_mutex_init(&m.why_lock);
			bfs_workq_for(wq, m.nitems, measure_item, &m);
			pthread_mutex_destroy(&m.why_lock);
			rc = atomic_load(&m.err);
		}
		free(m.item);
		free(m.todo);
		if (rc < 0)
			return rc;
	}
	if (m.ntodo || idx->nsums)
		place_blocks(idx);
	free(idx->sums);
	idx->sums = NULL;
	idx->nsums = 0;
	for (k = 0; k < idx->n && !(idx->blk[k].flags & BFS_BLK_GUESS); k++)
		;
	atomic_store(&idx->nexact, k);
	bfs_index_keep_seal(idx);
	return 0;
}
