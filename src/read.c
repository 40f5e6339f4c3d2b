// SPDX-License-Identifier: MIT
/*
 * The read path of a file version, by request: find the blocks a request
 * touches, take each from the block cache, and have the missing ones
 * decoded (decode.c), run by run, or read from their spill (unit.c); a
 * random reader's cold block decoded only as far as the read needs. The
 * reply points into the cached blocks.
 *
 * Blocks are taken in ascending order, and a thread waits only for blocks
 * above every block it is itself decoding: that order is what keeps two
 * requests that overlap from waiting for each other.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/log.h"
#include "blockfs/settle.h"
#include "blockfs/stats.h"
#include "file_i.h"
#include "read_i.h"

static ssize_t read_raw(struct bfs_file *f, struct bfs_readv *rv, size_t size, uint64_t off)
{
	size_t done = 0;
	bool revived = false;

	rv->own = malloc(size ? size : 1);
	if (!rv->own)
		return -ENOMEM;
	while (done < size) {
		ssize_t n =
			f->io.ops->read(&f->io, (uint8_t *)rv->own + done, size - done, off + done);

		BFS_COUNT(f->ctr, syscalls, 1);
		if (n < 0 && !revived && bfs_read_revive(f, (int)n) == 0) {
			revived = true;
			continue;
		}
		if (n < 0)
			return n;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	rv->iov[0] = (struct iovec){ .iov_base = rv->own, .iov_len = done };
	rv->cnt = done ? 1 : 0;
	return (ssize_t)done;
}

/* Room for @n blocks in @rv: the inline arrays, or the heap. */
static int readv_reserve(struct bfs_readv *rv, size_t n)
{
	if (n <= BFS_READV_INLINE)
		return 0;
	rv->iov = malloc(n * sizeof(*rv->iov));
	rv->blk = malloc(n * sizeof(*rv->blk));
	return rv->iov && rv->blk ? 0 : -ENOMEM;
}

static void readv_init(struct bfs_readv *rv)
{
	memset(rv, 0, sizeof(*rv));
	rv->iov = rv->iov_inline;
	rv->blk = rv->blk_inline;
}

void bfs_readv_release(struct bfs_readv *rv)
{
	for (size_t i = 0; i < rv->nblk; i++)
		bfs_block_put(rv->blk[i]);
	if (rv->iov != rv->iov_inline)
		free(rv->iov);
	if (rv->blk != rv->blk_inline)
		free(rv->blk);
	free(rv->own);
	readv_init(rv);
}

/*
 * Take blocks [k0, k1] into rv->blk; decode those that are ours to fill,
 * run by run. Every block we were given to fill is finished (done) on
 * every path, or its waiters would wait forever.
 */
static int take_blocks(struct bfs_file *f, size_t k0, size_t k1, struct bfs_readv *rv, bool quiet,
		       bool once, const atomic_bool *live)
{
	struct bfs_cache *cache = f->env->cache;
	size_t n = k1 - k0 + 1, run = SIZE_MAX;
	uint8_t fill_inline[BFS_READV_INLINE], *fill = fill_inline;
	struct bfs_read_tls *t = bfs_read_tls();
	int rc = 0;

	if (!t)
		return -ENOMEM;
	if (n > BFS_READV_INLINE && !(fill = calloc(n, 1)))
		return -ENOMEM;
	t->quiet = quiet;
	for (size_t i = 0; i < n && rc >= 0; i++) {
		const struct bfs_blk *b = &f->idx.blk[k0 + i];

		fill[i] = 0;
		if (b->flags & BFS_BLK_BAD) {
			rc = bfs_decode_poisoned(f, k0 + i);
			break;
		}
		rc = bfs_cache_get(cache, f->id, k0 + i, b->usize, f->ctr, &rv->blk[i]);
		if (rc < 0)
			break;
		rv->nblk++;
		fill[i] = (uint8_t)rc;
		if (quiet) {
			if (rc == 1) /* decoded ahead: a reader's hit on it counts as used */
				rv->blk[i]->prefetched = true;
		} else {
			if (rc == 1) /* readers' lookups only */
				BFS_COUNT(f->ctr, misses, 1);
			else
				BFS_COUNT(f->ctr, hits, 1);
		}
		/* a spilled block is read back whole rather than decoded again (after the marks above) */
		if (rc == 1 && bfs_unit_worth(f, k0 + i) &&
		    bfs_unit_fill(f, k0 + i, rv->blk[i]->data, rv->blk[i]->len) == 0) {
			bfs_cache_done(cache, rv->blk[i], 0);
			fill[i] = 0;
		}
	}
	/*
	 * Decode each run of blocks to fill, even when the request has
	 * failed already (a later block's cached failure): other readers may
	 * wait for these. The blocks a run decoded before one failed are
	 * good; in a run of independent blocks, those after the failed one
	 * are decoded on (quiet: the failure the request met was logged), so
	 * that the good ones are not failed with the bad one. fill[] of the
	 * run says which blocks are good from then on.
	 */
	for (size_t i = 0; i <= rv->nblk; i++) {
		bool filling = i < rv->nblk && fill[i];
		int rr = 0;

		if (filling && run == SIZE_MAX)
			run = i;
		if (filling || run == SIZE_MAX)
			continue;
		t->quiet = quiet || rc < 0;
		for (size_t j = run; j < i; j++)
			fill[j] = 0;
		for (size_t s = run, done = 0; s < i; s += done + 1) {
			int r = bfs_decode_run(f, t, k0 + s, k0 + i - 1, &rv->blk[s], &done);

			for (size_t j = s; j < s + done; j++)
				fill[j] = 1;
			if (r >= 0)
				break;
			if (rr == 0)
				rr = r; /* the run's first failure: its failed blocks' */
			t->quiet = true;
			if (bfs_decode_chained(f, k0 + run, k0 + i - 1))
				break; /* the rest continue the failed one's decoder */
			while (s + done + 1 < i &&
			       (f->idx.blk[k0 + s + done + 1].flags & BFS_BLK_BAD))
				done++; /* poisoned since: failed without a decode */
		}
		if (rr < 0 && rc >= 0)
			rc = rr;
		/*
		 * Good blocks to spill are claimed before done, so that no
		 * reader decodes them again meanwhile (bit 1 of fill[]); not
		 * those decoded for a reader that reads them once, as far as
		 * is known now that they are decoded: a big block takes long
		 * enough for its reader to show what kind it is.
		 */
		if (live && atomic_load_explicit(live, memory_order_relaxed))
			once = true;
		for (size_t j = run; j < i; j++)
			if (fill[j] && !once && bfs_unit_worth(f, k0 + j) &&
			    bfs_unit_claim(f, k0 + j))
				fill[j] |= 2;
		for (size_t j = run; j < i; j++)
			bfs_cache_done(cache, rv->blk[j], fill[j] ? 0 : rr);
		/* after done: the block's waiters need not wait for the spill's write */
		for (size_t j = run; j < i; j++)
			if (fill[j] & 2)
				bfs_unit_put(f, k0 + j, rv->blk[j]->data, rv->blk[j]->len);
		run = SIZE_MAX;
	}
	t->quiet = false;
	if (fill != fill_inline)
		free(fill);
	return rc < 0 ? rc : 0;
}

void bfs_file_let_go(struct bfs_file *f, uint64_t from, uint64_t to, uint64_t hole,
		     uint64_t hole_to, unsigned int how)
{
	struct bfs_cache *cache = f->env->cache;
	size_t k0, k1;

	if (!f->codec || to <= from || bfs_index_find(&f->idx, from, &k0) < 0 ||
	    bfs_index_find(&f->idx, to - 1, &k1) < 0)
		return;
	for (size_t k = k0; k <= k1; k++) {
		const struct bfs_blk *b = &f->idx.blk[k];
		uint64_t end = b->uoff + b->usize;

		if ((how & BFS_LET_GO_READ) && end > to)
			break; /* the reader is still in it */
		/* a chained block let go costs its chain from the start if a READ then asks for it */
		if (b->flags & BFS_BLK_CHAIN)
			continue;
		if (!(how & BFS_LET_GO_READ) && ((how & BFS_LET_GO_KEEP) || b->uoff < from ||
						 end > to || (hole < end && hole_to > b->uoff)))
			bfs_cache_demote(cache, f->id, k);
		else
			bfs_cache_drop(cache, f->id, k);
	}
}

void bfs_file_drop_range(struct bfs_file *f, uint64_t off, uint64_t len)
{
	uint64_t usize = atomic_load(&f->idx.usize);
	size_t k0, k1;

	if (!f->codec || len == 0 || off >= usize)
		return;
	if (len > usize - off)
		len = usize - off;
	if (bfs_index_find(&f->idx, off, &k0) < 0)
		return; /* never settled there: nothing can be cached */
	if (bfs_index_find(&f->idx, off + len - 1, &k1) < 0)
		k1 = atomic_load(&f->idx.nexact) - 1;
	for (size_t k = k0; k <= k1; k++)
		bfs_cache_drop(f->env->cache, f->id, k);
}

/*
 * Set block @k's bit in @f's touched map; was it set before? The map is
 * made at the first random read, its first word the count of words of
 * bits after it: a block the index gained since is treated as read
 * before (decoded whole), as is every block when there is no memory.
 */
static bool touch(struct bfs_file *f, size_t k)
{
	atomic_uint_fast64_t *map = atomic_load(&f->touched);
	uint_fast64_t bit = (uint_fast64_t)1 << (k % 64);

	if (!map) {
		size_t words = (f->idx.n + 63) / 64;
		atomic_uint_fast64_t *nm = calloc(1 + words, sizeof(*nm)), *none = NULL;

		if (!nm)
			return true;
		atomic_init(&nm[0], words);
		if (!atomic_compare_exchange_strong(&f->touched, &none, nm))
			free(nm); /* another thread made one */
		map = atomic_load(&f->touched);
	}
	if (k / 64 >= atomic_load_explicit(&map[0], memory_order_relaxed))
		return true;
	return atomic_fetch_or(&map[1 + k / 64], bit) & bit;
}

/*
 * BFS_READ_RANDOM (file.h): serve [@off, @off + @size), in blocks
 * [@k0, @k1], from a partial decode when that is what it takes. Return:
 * bytes served, 0 when the common path must serve it, or -errno.
 */
static ssize_t read_random(struct bfs_file *f, size_t k0, size_t k1, uint64_t off, size_t size,
			   struct bfs_readv *rv)
{
	const struct bfs_blk *b = &f->idx.blk[k1];
	uint64_t need = off + size - b->uoff; /* the prefix of the last block it takes */
	bool again = false;
	struct bfs_block *hit;
	unsigned int fresh = 0;
	int rc;

	for (size_t k = k0; k <= k1; k++)
		again |= touch(f, k);
	if (!again)
		fresh = atomic_fetch_add_explicit(&f->rand_new, 1, memory_order_relaxed);
	if (again) {
		atomic_fetch_add_explicit(&f->rand_back, 1, memory_order_relaxed);
		rv->again_from = f->idx.blk[k0].uoff;
		rv->again_to = b->uoff + b->usize;
	}
	if (k0 == k1 && bfs_unit_worth(f, k1))
		return bfs_unit_serve(f, k1, off, size, rv); /* else decoded whole, for the spill */
	if (again || k0 != k1 || !f->codec->prefix || (b->flags & (BFS_BLK_BAD | BFS_BLK_CHAIN)) ||
	    need >= b->usize)
		return 0;
	/*
	 * A partial decode saves half a block on average when the block is
	 * not read again, and costs a whole decode more when it is. Once a
	 * third of the random reads come back to blocks read before, a block
	 * is decoded whole at its first read too, and pushed as a block come
	 * back to is (doc/design.md, the read path, step 4).
	 */
	if (fresh < 2 * atomic_load_explicit(&f->rand_back, memory_order_relaxed)) {
		rv->again_from = b->uoff;
		rv->again_to = b->uoff + b->usize;
		return 0;
	}
	rc = bfs_cache_lookup(f->env->cache, f->id, k1, &hit);
	if (rc == 0) {
		bfs_block_put(hit);
		return 0; /* cached: the common path takes it from there */
	}
	rv->own = malloc((size_t)need);
	if (!rv->own)
		return -ENOMEM;
	rc = bfs_decode_prefix(f, k1, (uint32_t)need, rv->own);
	if (rc < 0)
		return rc;
	BFS_COUNT(f->ctr, misses, 1);
	rv->iov[0] =
		(struct iovec){ .iov_base = (uint8_t *)rv->own + (off - b->uoff), .iov_len = size };
	rv->cnt = 1;
	return (ssize_t)size;
}

ssize_t bfs_file_readv_copy(struct bfs_file *f, const void *p, size_t n, struct bfs_readv *rv)
{
	readv_init(rv);
	rv->own = malloc(n ? n : 1);
	if (!rv->own)
		return -ENOMEM;
	memcpy(rv->own, p, n);
	rv->iov[0] = (struct iovec){ .iov_base = rv->own, .iov_len = n };
	rv->cnt = 1;
	BFS_COUNT(f->ctr, reads, 1);
	BFS_COUNT(f->ctr, hits, 1);
	BFS_COUNT(f->ctr, bytes, (uint64_t)n);
	return (ssize_t)n;
}

/*
 * bfs_file_readv(); @reader: a reader's request (counted, drives
 * read-ahead); @live: bfs_file_peekv()'s.
 */
static ssize_t readv_as(struct bfs_file *f, uint64_t off, size_t size, struct bfs_readv *rv,
			bool reader, unsigned int flags, const atomic_bool *live)
{
	struct bfs_index *idx = &f->idx;
	size_t k0, k1, done = 0;
	uint64_t usize;
	int rc;

	readv_init(rv);
	if (reader)
		BFS_COUNT(f->ctr, reads, 1);
	if (f->found)
		return bfs_file_misnamed(f);
	if (!f->codec) {
		ssize_t n = read_raw(f, rv, size, off);

		if (n > 0)
			BFS_COUNT(f->ctr, bytes, (uint64_t)n);
		return n;
	}
	if (size == 0 || off >= atomic_load(&idx->usize))
		return 0;
	rc = bfs_settle(idx, &f->io, f->codec, off + size - 1);
	if (rc < 0 && bfs_read_revive(f, rc) == 0)
		rc = bfs_settle(idx, &f->io, f->codec, off + size - 1);
	if (rc < 0) {
		/* one line per version: the blocks' own lines follow on later reads */
		if (atomic_exchange(&f->last_bad, BFS_SETTLE_FAILED) != BFS_SETTLE_FAILED)
			bfs_err("%s: cannot measure block sizes: %s", f->name,
				rc == -EIO ? bfs_read_failure(f, rc) : strerror(-rc));
		goto out_err;
	}
	usize = atomic_load(&idx->usize);
	if (off >= usize)
		return 0;
	if (size > usize - off)
		size = (size_t)(usize - off);
	rc = -EIO; /* cannot fail once settled; never serve a guess */
	if (bfs_index_find(idx, off, &k0) < 0 || bfs_index_find(idx, off + size - 1, &k1) < 0)
		goto out_err;
	if (flags & BFS_READ_RANDOM) {
		ssize_t n = read_random(f, k0, k1, off, size, rv);

		if (n < 0) {
			rc = (int)n;
			goto out_err;
		}
		if (n > 0) {
			BFS_COUNT(f->ctr, bytes, (uint64_t)n);
			return n;
		}
	} else if (k0 == k1 && bfs_unit_worth(f, k0)) {
		/* a spilled block is read from its spill by any reader, and pushed from there */
		ssize_t n = bfs_unit_serve(f, k0, off, size, rv);

		if (n > 0) {
			if (reader)
				BFS_COUNT(f->ctr, bytes, (uint64_t)n);
			return n;
		}
	}
	rc = readv_reserve(rv, k1 - k0 + 1);
	if (rc == 0)
		rc = take_blocks(f, k0, k1, rv, !reader, flags & BFS_READ_ONCE, live);
	if (rc < 0)
		goto out_err;
	for (size_t i = 0; i < rv->nblk; i++) {
		const struct bfs_blk *b = &idx->blk[k0 + i];
		size_t within = (size_t)(off + done - b->uoff);
		size_t take = b->usize - within;

		if (take > size - done)
			take = size - done;
		rv->iov[rv->cnt++] =
			(struct iovec){ .iov_base = rv->blk[i]->data + within, .iov_len = take };
		done += take;
	}
	if (reader)
		BFS_COUNT(f->ctr, bytes, done);
	return (ssize_t)done;

out_err:
	if (reader) /* a push that fails is no program's failed read */
		BFS_COUNT(f->ctr, errors, 1);
	return rc;
}

ssize_t bfs_file_readv(struct bfs_file *f, uint64_t off, size_t size, struct bfs_readv *rv,
		       unsigned int flags)
{
	return readv_as(f, off, size, rv, true, flags, NULL);
}

ssize_t bfs_file_peekv(struct bfs_file *f, uint64_t off, size_t size, struct bfs_readv *rv,
		       const atomic_bool *once)
{
	return readv_as(f, off, size, rv, false, 0, once);
}

ssize_t bfs_file_read(struct bfs_file *f, void *buf, size_t size, uint64_t off)
{
	struct bfs_readv rv;
	ssize_t n = bfs_file_readv(f, off, size, &rv, 0);

	for (size_t i = 0, at = 0; n > 0 && i < rv.cnt; at += rv.iov[i++].iov_len)
		memcpy((uint8_t *)buf + at, rv.iov[i].iov_base, rv.iov[i].iov_len);
	bfs_readv_release(&rv);
	return n;
}
