// SPDX-License-Identifier: MIT
/*
 * Read-ahead workers (contract in prefetch.h): a ring of jobs and a fixed
 * pool of threads that decode blocks into the cache. A job is one block,
 * or "settle sizes up to a byte, then queue a range" when the range lies
 * past what the index knows exactly: settling reads the file, and a FUSE
 * thread must not wait for that.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "blockfs/cache.h"
#include "blockfs/file.h"
#include "blockfs/mmap.h"
#include "blockfs/prefetch.h"

struct job {
	struct bfs_file *f;	/* one reference and one use of its descriptor */
	size_t blkno;		/* or RANGE: settle, then queue [off, off + len); or POPULATE */
	uint64_t off, len;
	uint64_t push;		/* FUSE inode to push the decoded block to, or 0 */
	bool carry;		/* RANGE: carry on past a full ring (queue_range()) */
};

#define RANGE SIZE_MAX
#define POPULATE (SIZE_MAX - 1)

struct bfs_prefetch {
	pthread_mutex_t lock;	/* protects everything below; never held while decoding */
	pthread_cond_t work;	/* a job was queued, or stop */
	struct job *ring;
	size_t cap, head, count;
	bool stop;
	unsigned int nthreads;
	pthread_t *threads;
};

static size_t queue_range(struct bfs_prefetch *p, struct bfs_file *f, uint64_t off,
			  uint64_t len, uint64_t push, bool carry);

/*
 * Hand block @k to the kernel's page cache. The kernel marks a page
 * up to date only when one message fills it whole, and blocks need not
 * start on a page (BGZF's are 65280 bytes), so each job pushes from the
 * first page boundary in its block to the first one past it: the page it
 * shares with the next block goes whole, decoding a little of that block.
 * Its own block then leaves blockfs's cache: the kernel holds it now.
 */
static void push_block(struct bfs_file *f, size_t k, uint64_t ino)
{
	const struct bfs_blk *b = &f->idx.blk[k];
	uint64_t page = 4096, usize = atomic_load(&f->idx.usize);
	uint64_t from = (b->uoff + page - 1) & ~(page - 1);
	uint64_t to = (b->uoff + b->usize + page - 1) & ~(page - 1);
	struct bfs_readv rv;
	ssize_t n;

	if (to > usize)
		to = usize;
	if (from >= to || !f->env->push)
		return;
	n = bfs_file_peekv(f, from, (size_t)(to - from), &rv);
	if (n > 0) {
		f->env->push(f->env->push_ctx, ino, from, rv.iov, rv.cnt);
		BFS_COUNT(f->ctr, prefetched, 1);
	}
	bfs_readv_release(&rv);
	bfs_cache_drop(f->env->cache, f->id, k);
}

static void run(struct bfs_prefetch *p, struct job *j)
{
	struct bfs_file *f = j->f;
	struct bfs_block *b;

	if (j->blkno == RANGE) {
		if (bfs_index_settle(&f->idx, &f->io, f->codec, j->off + j->len - 1) == 0)
			(void)queue_range(p, f, j->off, j->len, j->push, j->carry);
		return;
	}
	if (j->push) {
		push_block(f, j->blkno, j->push);
		return;
	}
	if (j->blkno == POPULATE) {
		bfs_map_populate(f);
		return;
	}
	if (bfs_cache_try_new(f->env->cache, f->id, j->blkno, f->idx.blk[j->blkno].usize, f->ctr,
			      &b) != 1)
		return;			/* cached, being decoded, or no room */
	BFS_COUNT(f->ctr, prefetched, 1);
	bfs_cache_done(f->env->cache, b, bfs_file_load_block(f, j->blkno, b));
	bfs_block_put(b);
}

static void *worker(void *arg)
{
	struct bfs_prefetch *p = arg;
	struct job j;

	for (;;) {
		pthread_mutex_lock(&p->lock);
		while (!p->count && !p->stop)
			pthread_cond_wait(&p->work, &p->lock);
		if (p->stop) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		j = p->ring[p->head];
		p->head = (p->head + 1) % p->cap;
		p->count--;
		pthread_mutex_unlock(&p->lock);
		run(p, &j);
		bfs_file_unuse(j.f);
		bfs_file_put(j.f);
	}
}

int bfs_prefetch_new(struct bfs_prefetch **out, unsigned int workers, size_t queue_len)
{
	struct bfs_prefetch *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	p->cap = queue_len ? queue_len : 1;
	p->ring = calloc(p->cap, sizeof(*p->ring));
	p->threads = calloc(workers ? workers : 1, sizeof(*p->threads));
	if (!p->ring || !p->threads)
		goto out_free;
	for (; p->nthreads < workers; p->nthreads++)
		if (pthread_create(&p->threads[p->nthreads], NULL, worker, p) != 0)
			goto out_free;
	*out = p;
	return 0;

out_free:
	bfs_prefetch_free(p);
	return -ENOMEM;
}

void bfs_prefetch_free(struct bfs_prefetch *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned int i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	for (; p->count; p->count--, p->head = (p->head + 1) % p->cap) {
		bfs_file_unuse(p->ring[p->head].f);
		bfs_file_put(p->ring[p->head].f);
	}
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p->ring);
	free(p->threads);
	free(p);
}

/*
 * Queue @j (taking a reference on its file and a use of its descriptor)
 * unless fewer than @spare + 1 slots are free. The caller reads the file,
 * so holds a use: ours never has to open the descriptor again.
 */
static bool try_queue_leaving(struct bfs_prefetch *p, struct job j, size_t spare)
{
	bool queued = false;

	pthread_mutex_lock(&p->lock);
	if (!p->stop && p->nthreads && p->count + spare < p->cap && bfs_file_use(j.f)) {
		j.f = bfs_file_get(j.f);
		p->ring[(p->head + p->count++) % p->cap] = j;
		pthread_cond_signal(&p->work);
		queued = true;
	}
	pthread_mutex_unlock(&p->lock);
	return queued;
}

static bool try_queue(struct bfs_prefetch *p, struct job j)
{
	return try_queue_leaving(p, j, 0);
}

/*
 * Queue the blocks of @f covering [@off, @off + @len) that need decoding.
 * A range past what the index knows exactly goes to a worker as a RANGE
 * job, to settle first: settling reads the file, and a FUSE thread must
 * not wait for that. A full ring ends it, unless @carry (willneed): then
 * one slot is kept for a RANGE job with the rest, which a worker takes up
 * when it gets there, so that a range of any length goes through.
 * Return: jobs queued.
 */
static size_t queue_range(struct bfs_prefetch *p, struct bfs_file *f, uint64_t off,
			  uint64_t len, uint64_t push, bool carry)
{
	struct job rest = { .f = f, .blkno = RANGE, .off = off, .len = len, .push = push,
			    .carry = carry };
	uint64_t end = off + len;
	size_t k0, k1, queued = 0;

	if (bfs_index_find(&f->idx, end - 1, &k1) < 0)	/* not settled that far yet */
		return try_queue(p, rest);
	if (bfs_index_find(&f->idx, off, &k0) < 0)
		return 0;
	for (size_t k = k0; k <= k1; k++) {
		const struct bfs_blk *b = &f->idx.blk[k];

		if (b->flags & BFS_BLK_BAD ||
		    (!push && bfs_cache_contains(f->env->cache, f->id, k)))
			continue;
		if (!try_queue_leaving(p, (struct job){ .f = f, .blkno = k, .push = push },
				       carry ? 1 : 0)) {
			rest.off = b->uoff;
			rest.len = end - b->uoff;
			return queued + (carry && try_queue(p, rest));
		}
		queued++;
	}
	return queued;
}

/* [@off, @off + @len) of @f within its decompressed size; false if empty. */
static bool clamp(const struct bfs_file *f, uint64_t off, uint64_t *len)
{
	uint64_t usize = atomic_load(&f->idx.usize);

	if (!f->codec || *len == 0 || off >= usize)
		return false;
	if (*len > usize - off)
		*len = usize - off;
	return true;
}

size_t bfs_prefetch_willneed(struct bfs_prefetch *p, struct bfs_file *f, uint64_t off,
			     uint64_t len, uint64_t push_ino)
{
	/* all of it on a worker: even a settled range may be long to walk */
	if (!p || !clamp(f, off, &len))
		return 0;
	return try_queue(p, (struct job){ .f = f, .blkno = RANGE, .off = off, .len = len,
					  .push = push_ino, .carry = true });
}

size_t bfs_prefetch_range(struct bfs_prefetch *p, struct bfs_file *f, uint64_t off, uint64_t len)
{
	if (!p || !clamp(f, off, &len))
		return 0;
	return queue_range(p, f, off, len, 0, false);
}

bool bfs_prefetch_populate(struct bfs_prefetch *p, struct bfs_file *f)
{
	return p && try_queue(p, (struct job){ .f = f, .blkno = POPULATE });
}
