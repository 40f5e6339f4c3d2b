// SPDX-License-Identifier: MIT
/*
 * Decoding ahead and pushing into the kernel's page cache (contract in
 * push.h). Below the stream policy (stream.c) and the willneed hint, above
 * the block fetch (read.c): calls go down only, and the push itself is a
 * function pointer that ops.c put in the environment.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/cache.h"
#include "blockfs/file.h"
#include "blockfs/push.h"
#include "blockfs/workq.h"

/* Bytes one job decodes, at least: enough to amortise the queue and a push. */
#define CHUNK_MIN (1u << 20)

struct bfs_push_window *bfs_push_window_new(void)
{
	struct bfs_push_window *w = calloc(1, sizeof(*w));

	if (w) {
		atomic_init(&w->refs, 1);
		atomic_init(&w->once, false);
		bfs_mutex_init(&w->lock);
	}
	return w;
}

void bfs_push_window_put(struct bfs_push_window *w)
{
	unsigned int was;

	if (!w)
		return;
	was = atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel);
	assert(was > 0);
	if (was == 1) {
		pthread_mutex_destroy(&w->lock);
		free(w);
	}
}

bool bfs_push_window_trip(struct bfs_push_window *w, uint64_t off, size_t len, void *buf)
{
	bool have;

	bfs_mutex_lock(&w->lock);
	have = w->trip_len && off >= w->trip_off && len <= w->trip_len &&
	       off - w->trip_off <= w->trip_len - len;
	if (have)
		memcpy(buf, w->trip + (off - w->trip_off), len);
	bfs_mutex_unlock(&w->lock);
	return have;
}

void bfs_push_window_keep(struct bfs_push_window *w, const uint64_t *at, uint8_t *const *buf,
			  size_t n, uint64_t hole, uint64_t hole_to)
{
	size_t i = 0;

	if (hole < at[0] || hole_to > at[n] || hole_to <= hole || hole_to - hole > BFS_PAGE)
		return;
	bfs_mutex_lock(&w->lock);
	w->trip_off = hole;
	w->trip_len = (uint32_t)(hole_to - hole);
	for (uint64_t pos = hole; pos < hole_to; i++) {
		uint64_t stop = at[i + 1] < hole_to ? at[i + 1] : hole_to;

		if (stop <= pos)
			continue;
		memcpy(w->trip + (pos - hole), buf[i] + (pos - at[i]), (size_t)(stop - pos));
		pos = stop;
	}
	bfs_mutex_unlock(&w->lock);
}

static uint64_t page_down(uint64_t x)
{
	return x & ~(uint64_t)(BFS_PAGE - 1);
}

static uint64_t page_up(uint64_t x)
{
	return page_down(x + BFS_PAGE - 1);
}

uint64_t bfs_push_chunk(const struct bfs_file *f)
{
	uint64_t b = page_up(bfs_file_block_size(f) ? bfs_file_block_size(f) : 1);

	return b > CHUNK_MIN ? b : CHUNK_MIN / b * b;
}

ssize_t bfs_push_slice(const uint64_t *at, uint8_t *const *buf, size_t n, uint64_t hole,
		       uint64_t hole_to, uint8_t *bounce,
		       int (*emit)(void *ctx, uint64_t off, const uint8_t *p, size_t len),
		       void *ctx)
{
	uint64_t pos = at[0], end = at[n];
	ssize_t done = 0;
	size_t i = 0;

	while (pos < end) {
		const uint8_t *p;
		size_t len;
		int rc;

		if (pos >= hole && pos < hole_to) {
			pos = hole_to < end ? hole_to : end;
			continue;
		}
		while (at[i + 1] <= pos)
			i++;
		if (pos + BFS_PAGE <= at[i + 1] || at[i + 1] == end) {
			/* whole pages of one buffer; at the end of the range, up to it */
			uint64_t run_end = at[i + 1] == end ? end : page_down(at[i + 1]);

			if (hole > pos && hole < run_end && hole < hole_to)
				run_end = hole;
			p = buf[i] + (pos - at[i]);
			len = (size_t)(run_end - pos);
		} else {
			/* one page that spans buffers: gather it */
			size_t got = 0;

			len = end - pos < BFS_PAGE ? (size_t)(end - pos) : BFS_PAGE;
			for (size_t j = i; got < len; j++) {
				size_t take = (size_t)(at[j + 1] - (pos + got));

				if (take > len - got)
					take = len - got;
				memcpy(bounce + got, buf[j] + (pos + got - at[j]), take);
				got += take;
			}
			p = bounce;
		}
		rc = emit(ctx, pos, p, len);
		if (rc < 0)
			return rc;
		if (rc == 0)
			done += (ssize_t)len;
		pos += len;
	}
	return done;
}

struct emit_ctx {
	struct bfs_file *f;
	uint64_t ino;
	const struct bfs_push_window *win;
	unsigned int gen;
	bool read_instead; /* a slice was left to a READ of the kernel's */
};

static int emit(void *arg, uint64_t off, const uint8_t *p, size_t len)
{
	struct emit_ctx *e = arg;
	struct bfs_file *f = e->f;
	const struct bfs_file_env *env = f->env;
	int rc;

	if (e->win) {
		/* the reader jumped while we decoded: what is left is not wanted */
		if (atomic_load_explicit(&e->win->gen, memory_order_relaxed) != e->gen)
			return -ECANCELED;
		/* the kernel asked for these pages itself meanwhile: its READ fills them */
		if (off + len <= atomic_load_explicit(&e->win->served, memory_order_relaxed)) {
			e->read_instead = true;
			return 1;
		}
	}
	/* never into the page cache of a newer version (bfs_file_supersede()) */
	atomic_fetch_add(&f->pushing, 1);
	rc = atomic_load(&f->superseded) ? -ECANCELED :
					   env->push(env->push_ctx, e->ino, off, p, len);
	atomic_fetch_sub(&f->pushing, 1);
	return rc;
}

ssize_t bfs_push_run(const struct bfs_push_req *r)
{
	struct bfs_file *f = r->f;
	struct emit_ctx e = { .f = f, .ino = r->ino, .win = r->win, .gen = r->gen };
	uint64_t from = r->from, to = r->to, usize = bfs_file_size(f);
	uint8_t bounce[BFS_PAGE], *buf_inline[BFS_READV_INLINE], **buf = buf_inline;
	uint64_t at_inline[BFS_READV_INLINE + 1], *at = at_inline;
	struct bfs_readv rv;
	ssize_t n;

	if (r->win) {
		uint64_t served = atomic_load(&r->win->served);

		if (atomic_load(&r->win->gen) != r->gen)
			return 0; /* the reader went elsewhere */
		if (served > from)
			from = page_up(served); /* the kernel asked for those itself */
	}
	if (to > usize)
		to = usize;
	if (from >= to)
		return 0;
	n = bfs_file_peekv(f, from, (size_t)(to - from), &rv, r->win ? &r->win->once : NULL);
	if (n <= 0 || !r->ino || !f->env->push) {
		if (n > 0)
			BFS_COUNT(f->ctr, prefetched, rv.nblk);
		bfs_readv_release(&rv);
		return n < 0 ? n : 0;
	}
	to = from + (uint64_t)n;
	if (rv.cnt > BFS_READV_INLINE) {
		buf = malloc(rv.cnt * sizeof(*buf));
		at = malloc((rv.cnt + 1) * sizeof(*at));
		if (!buf || !at) {
			n = -ENOMEM;
			goto out;
		}
	}
	at[0] = from;
	for (size_t i = 0; i < rv.cnt; i++) {
		buf[i] = rv.iov[i].iov_base;
		at[i + 1] = at[i] + rv.iov[i].iov_len;
	}
	if (r->win)
		bfs_push_window_keep(r->win, at, buf, rv.cnt, r->hole, r->hole_to);
	n = bfs_push_slice(at, buf, rv.cnt, r->hole, r->hole_to, bounce, emit, &e);
	if (n > 0) {
		BFS_COUNT(f->ctr, prefetched, rv.nblk);
		BFS_COUNT(f->ctr, pushed, (uint64_t)n);
	}
out:
	if (buf != buf_inline)
		free(buf);
	if (at != at_inline)
		free(at);
	bfs_readv_release(&rv);
	/*
	 * The decoded blocks of [from, to) are in the kernel's page cache
	 * now: drop them from blockfs's, so that their buffers are reused
	 * while still hot, all but the ones that also hold bytes outside
	 * the range (a neighbouring job or a tripwire READ wants those),
	 * which only go first when room is needed. When a READ took some
	 * of the range, it may not have taken its blocks yet: all of them
	 * only go first then.
	 */
	if (n >= 0)
		bfs_file_let_go(f, from, to, r->hole, r->hole_to,
				e.read_instead ? BFS_LET_GO_KEEP : 0);
	return n == -ECANCELED ? 0 : n;
}

/* A queued job; willneed jobs stride through a long range. */
struct push_job {
	struct bfs_work work;
	struct bfs_push_req req; /* holds a reference and a use of req.f, and of req.win */
	uint64_t stride, end;	 /* after [from, to): from += stride, up to end; 0: once */
};

static void job_run(struct bfs_work *w)
{
	struct push_job *j = (struct push_job *)w;
	uint64_t chunk = j->req.to - j->req.from;

	for (;;) {
		if (bfs_push_run(&j->req) < 0 || !j->stride)
			break;
		j->req.from += j->stride;
		if (j->req.from >= j->end)
			break;
		j->req.to = j->req.from + chunk < j->end ? j->req.from + chunk : j->end;
	}
	bfs_push_window_put(j->req.win);
	bfs_file_unuse(j->req.f);
	bfs_file_put(j->req.f);
	free(j);
}

/* Queue a job for @req; @offer: give up rather than wait for the queue (bfs_workq_offer()). */
static bool queue(struct bfs_workq *wq, const struct bfs_push_req *req, uint64_t stride,
		  uint64_t end, bool offer)
{
	struct push_job *j;

	if (!bfs_workq_threads(wq) || !bfs_file_use(req->f))
		return false;
	j = malloc(sizeof(*j));
	if (!j) {
		bfs_file_unuse(req->f);
		return false;
	}
	*j = (struct push_job){ .work.fn = job_run, .req = *req, .stride = stride, .end = end };
	bfs_file_get(req->f);
	if (req->win)
		atomic_fetch_add(&req->win->refs, 1);
	if (offer ? bfs_workq_offer(wq, &j->work) : bfs_workq_try(wq, &j->work))
		return true;
	bfs_push_window_put(req->win);
	bfs_file_put(req->f);
	bfs_file_unuse(req->f);
	free(j);
	return false;
}

bool bfs_push_try(struct bfs_workq *wq, const struct bfs_push_req *req)
{
	return queue(wq, req, 0, 0, true); /* from READs: never wait */
}

bool bfs_push_block(struct bfs_workq *wq, struct bfs_file *f, uint64_t ino, uint64_t from,
		    uint64_t to, uint64_t rfrom, uint64_t rto)
{
	uint64_t usize = bfs_file_size(f);
	struct bfs_push_req req = {
		.f = f,
		.ino = ino,
		/* whole pages of these blocks only: an edge page needs a neighbour */
		.from = page_up(from),
		.to = to >= usize ? usize : page_down(to),
		.hole = page_down(rfrom),
		.hole_to = page_up(rto),
	};

	if (req.from >= req.to || (req.hole <= req.from && req.hole_to >= req.to))
		return false; /* the READ took all there was */
	return bfs_push_try(wq, &req);
}

size_t bfs_push_willneed(struct bfs_workq *wq, struct bfs_file *f, uint64_t ino, uint64_t off,
			 uint64_t len)
{
	uint64_t usize = bfs_file_size(f), chunk = bfs_push_chunk(f), from, end, nchunks;
	unsigned int jobs = bfs_workq_threads(wq);
	size_t queued = 0;

	if (!f->codec || off >= usize || len == 0)
		return 0;
	from = page_down(off);
	end = len > usize - off ? usize : off + len;
	end = page_up(end) < usize ? page_up(end) : usize;
	nchunks = (end - from + chunk - 1) / chunk;
	if (jobs > nchunks)
		jobs = (unsigned int)nchunks;
	for (unsigned int j = 0; j < jobs; j++) {
		uint64_t a = from + j * chunk;
		struct bfs_push_req req = { .f = f,
					    .ino = ino,
					    .from = a,
					    .to = a + chunk < end ? a + chunk : end };

		queued += queue(wq, &req, jobs * chunk, end, false);
	}
	return queued;
}
