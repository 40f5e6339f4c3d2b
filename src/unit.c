// SPDX-License-Identifier: MIT
/*
 * Spilled units, for a file version's read path. A block whose decode
 * costs much (an xz -T block of 24 MiB takes a quarter of a second; a
 * bzip2 block tens of milliseconds) is decoded whole, with its check, at
 * a random reader's first touch, and kept in the spill (spill.h,
 * bfs_spill_put()): later reads of any part of it cost a pread instead of
 * decoding it again, which the block cache cannot offer for blocks that
 * big. Only a block that decoded whole and passed its check is spilled; a
 * read the spill cannot serve decodes as before. The sizes from which a
 * block is worth it come from measuring each codec's decode against a
 * pread (doc/design.md, "The spill").
 *
 * read.c decides when (take_blocks(), read_random(), readv_as()); this
 * file keeps f->units: which blocks are worth it, who spills a block, who
 * waits for that, and reading it back.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/spill.h"
#include "file_i.h"
#include "read_i.h"

/*
 * Spilled units (bfs_unit_worth()): decoded blocks at least this big, per
 * codec, are kept in the spill once decoded whole. Writing a spill costs
 * about a millisecond a MiB; xz and bzip2 decode at tens of milliseconds
 * a MiB: worth it from a few hundred KiB on. zstd decodes about as fast
 * as a spill is written: only frames big enough that a random read of
 * one (half a frame decoded, on average) costs milliseconds; its 1 MiB
 * seekable frames read slower with a spill. LZ4 and gzip blocks: never.
 * Measured in doc/design.md ("The spill").
 */
#define BFS_UNIT_MIN_XZ	   (256u << 10)
#define BFS_UNIT_MIN_BZIP2 (256u << 10)
#define BFS_UNIT_MIN_ZSTD  (8u << 20)

/* The smallest decoded block of @c worth spilling; UINT32_MAX: none (fast codecs). */
static uint32_t unit_min(const struct bfs_codec *c)
{
	static const struct {
		const char *name;
		uint32_t min;
	} mins[] = {
		{ "xz", BFS_UNIT_MIN_XZ },
		{ "bzip2", BFS_UNIT_MIN_BZIP2 },
		{ "zstd", BFS_UNIT_MIN_ZSTD },
	};

	for (size_t i = 0; i < BFS_ARRAY_SIZE(mins); i++)
		if (strcmp(c->name, mins[i].name) == 0)
			return mins[i].min;
	return UINT32_MAX;
}

/* Is block @k of @f one to serve from a unit's spill? */
bool bfs_unit_worth(const struct bfs_file *f, size_t k)
{
	const struct bfs_blk *b = &f->idx.blk[k];

	return !(b->flags & (BFS_BLK_BAD | BFS_BLK_CHAIN)) && b->usize >= unit_min(f->codec) &&
	       bfs_spill_on();
}

/*
 * Block @k of @f is decoded whole (it passed its check): is it ours to
 * spill (bfs_unit_put())? Then it is marked as being spilled, and readers of
 * it wait for that (unit_take()) rather than decode it again.
 */
bool bfs_unit_claim(struct bfs_file *f, size_t k)
{
	struct bfs_spill *dead = NULL;
	struct bfs_unit *u;
	bool mine = false;

	bfs_mutex_lock(&f->unit_lock);
	if (k >= f->unit_n) {
		/* the index may still grow (a walk settles later blocks): room up to @k at least */
		size_t n = f->idx.n > k ? f->idx.n : k + 1;
		struct bfs_unit *nu = realloc(f->units, n * sizeof(*nu));

		if (nu) {
			memset(nu + f->unit_n, 0, (n - f->unit_n) * sizeof(*nu));
			f->units = nu;
			f->unit_n = n;
		}
	}
	if (k < f->unit_n) {
		u = &f->units[k];
		/* one dropped to make room goes once no read uses it, and is made anew */
		if (u->s && f->unit_users == 0 && !bfs_spill_live(u->s)) {
			dead = u->s;
			u->s = NULL;
		}
		mine = !u->s && !u->making && !u->refused;
		u->making |= mine;
	}
	bfs_mutex_unlock(&f->unit_lock);
	bfs_spill_drop(dead);
	return mine;
}

/* Spill block @k's @len decoded bytes at @data, as bfs_unit_claim() let us; wake its waiters. */
void bfs_unit_put(struct bfs_file *f, size_t k, const uint8_t *data, uint32_t len)
{
	struct bfs_spill *s = bfs_spill_put(data, len);
	struct bfs_unit *u;

	bfs_mutex_lock(&f->unit_lock);
	u = &f->units[k];
	u->making = false;
	u->s = s;
	u->refused = !s;
	pthread_cond_broadcast(&f->unit_cond);
	bfs_mutex_unlock(&f->unit_lock);
}

/*
 * Block @k's spill, held for a read (unit_users; unit_drop() when done),
 * after its spilling if that is under way; NULL if it has none. Waiting
 * is safe: a spilling thread waits for nothing.
 */
static struct bfs_spill *unit_take(struct bfs_file *f, size_t k)
{
	struct bfs_spill *s = NULL;

	bfs_mutex_lock(&f->unit_lock);
	while (k < f->unit_n && f->units[k].making)
		pthread_cond_wait(&f->unit_cond, &f->unit_lock);
	if (k < f->unit_n && (s = f->units[k].s))
		f->unit_users++;
	bfs_mutex_unlock(&f->unit_lock);
	return s;
}

static void unit_drop(struct bfs_file *f)
{
	bfs_mutex_lock(&f->unit_lock);
	f->unit_users--;
	bfs_mutex_unlock(&f->unit_lock);
}

/* [@off, @off + @size) of block @k from its spill into rv. Return: @size, or 0: not spilled. */
static ssize_t unit_read(struct bfs_file *f, size_t k, uint64_t off, size_t size,
			 struct bfs_readv *rv)
{
	struct bfs_spill *s = unit_take(f, k);
	int rc;

	if (!s)
		return 0;
	rv->own = malloc(size ? size : 1);
	rc = rv->own ? bfs_spill_read(s, rv->own, size, off - f->idx.blk[k].uoff) : -ENOMEM;
	unit_drop(f);
	if (rc < 0) {
		free(rv->own); /* dropped to make room, or failed: decode instead */
		rv->own = NULL;
		return 0;
	}
	rv->iov[0] = (struct iovec){ .iov_base = rv->own, .iov_len = size };
	rv->cnt = 1;
	return (ssize_t)size;
}

/* Block @k's @len bytes from its spill into @dst. Return: 0, or -ENOENT: not spilled. */
int bfs_unit_fill(struct bfs_file *f, size_t k, uint8_t *dst, uint32_t len)
{
	struct bfs_spill *s = unit_take(f, k);
	int rc;

	if (!s)
		return -ENOENT;
	rc = bfs_spill_read(s, dst, len, 0);
	unit_drop(f);
	return rc < 0 ? -ENOENT : 0;
}

/*
 * Serve [@off, @off + @size), all in block @k, from its spill when there is
 * one and the block cache does not hold it. Return: bytes served; 0 for
 * the common path (which decodes the block whole and spills it).
 */
ssize_t bfs_unit_serve(struct bfs_file *f, size_t k, uint64_t off, size_t size,
		       struct bfs_readv *rv)
{
	struct bfs_block *hit;

	if (bfs_cache_lookup(f->env->cache, f->id, k, &hit) == 0) {
		bfs_block_put(hit);
		return 0; /* cached: the common path takes it from there */
	}
	return unit_read(f, k, off, size, rv);
}
