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
#include "blockfs/handoff.h"
#include "blockfs/index.h"
#include "blockfs/io.h"
#include "blockfs/spill.h"
#include "blockfs/workq.h"

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

/* An entry of kept_off for every block (none kept), so that threads may each set their own. */
static bool keep_all(struct bfs_index *idx)
{
	if (idx->n == 0)
		return false;
	if (idx->kept_n < idx->n)
		bfs_index_keep(idx, idx->n - 1, BFS_KEPT_NONE);
	return idx->kept_n == idx->n;
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

int bfs_index_expect_sum(struct bfs_index *idx, size_t first, size_t last, uint64_t total)
{
	struct bfs_sum *ns = realloc(idx->sums, (idx->nsums + 1) * sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	idx->sums = ns;
	idx->sums[idx->nsums++] = (struct bfs_sum){ .first = first, .last = last, .total = total };
	return 0;
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
	bool keep;		  /* output into the walk's spill (codec->measure_out) */
	pthread_mutex_t why_lock; /* protects idx->why */
};

/* Measure block @k from its compressed bytes at @src; poison it on failure. */
static void measure_one(struct measure *m, size_t k, const uint8_t *src)
{
	struct bfs_blk *b = &m->idx->blk[k];
	const char *why = "corrupt block";
	uint32_t exact;
	uint8_t *out = NULL;
	uint64_t off;
	int rc = m->keep ? m->codec->measure_out(b, src, &exact, &out, &why) :
			   m->codec->measure(b, src, &exact, &why);

	/* kept_off has an entry for every block already: each item writes its own */
	if (rc == 0 && out && bfs_index_keep_bytes(m->idx, out, exact, &off) == 0)
		m->idx->kept_off[k] = off;
	free(out);
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

int bfs_index_measure(struct bfs_index *idx, struct bfs_io *io, const struct bfs_codec *codec,
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
		m.keep = codec->measure_out && io->size >= BFS_KEPT_MIN &&
			 bfs_index_keep_begin(idx) && keep_all(idx);
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
