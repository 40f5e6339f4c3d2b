// SPDX-License-Identifier: MIT
/*
 * A reader's stream (contract in stream.h): serve its READs through the
 * block fetch, then move its window of pushes. Above push.c and read.c,
 * below ops.c; the window's arithmetic is pure (bfs_window_*), the rest
 * is bookkeeping around it.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "blockfs/cache.h"
#include "blockfs/file.h"
#include "blockfs/log.h"
#include "blockfs/vocab.h"
#include "blockfs/push.h"
#include "blockfs/stream.h"
#include "blockfs/workq.h"

/*
 * A READ within this distance of where the reader was still counts as
 * going on from there: the kernel's read-ahead sends several requests at
 * once, and they arrive slightly out of order.
 */
#define SEQ_SLACK    (2u << 20)
/* Sequential READs in a row before pushing starts, under advice normal. */
#define SEQ_RUN_MIN  2
/*
 * READs in a row, each past every READ before it (within SEQ_SLACK),
 * before what is pushed ahead is taken to be read once: blocks decoded
 * for such pushes are not also kept in the spill (unit.c). A random
 * reader inside the window goes back within a few READs; eight records
 * in a row by chance are about one in 40,000.
 */
#define SEQ_ONCE_MIN 8

struct bfs_stream {
	struct bfs_file *f; /* one reference */
	uint64_t ino;
	struct bfs_push_window *pw; /* shared with the queued jobs */
	pthread_mutex_t lock;	    /* protects win; never held while queuing or reading */
	struct bfs_window win;
	atomic_uint refs; /* the handle's, and READs' past their replies */
};

static uint64_t page_down(uint64_t x)
{
	return x & ~(uint64_t)(BFS_PAGE - 1);
}

static uint64_t page_up(uint64_t x)
{
	return page_down(x + BFS_PAGE - 1);
}

void bfs_window_init(struct bfs_window *w)
{
	*w = (struct bfs_window){ .trip = UINT64_MAX };
}

bool bfs_window_step(struct bfs_window *w, const struct bfs_window_cfg *cfg, uint64_t off,
		     uint64_t end, struct bfs_window_plan *plan)
{
	bool tripped = w->trip != UINT64_MAX && off <= w->trip && w->trip < end;
	uint64_t ahead = w->pushed > w->next ? w->pushed : w->next;
	uint64_t back = cfg->size > SEQ_SLACK ? cfg->size : SEQ_SLACK;
	uint64_t from, to, half = page_down(cfg->size / 2);

	/*
	 * Anywhere from a window behind the furthest READ (the kernel's
	 * read-ahead READs arrive out of order) to just past the pushes.
	 */
	if (tripped || (off + back >= w->next && off <= ahead + SEQ_SLACK)) {
		w->run++;
		w->fwd = off + SEQ_SLACK >= w->next ? w->fwd + 1 : 0;
	} else {
		w->run = 1; /* a jump: this READ starts a new run */
		w->fwd = 0;
		w->gen++;
		w->pushed = 0;
		w->trip = UINT64_MAX;
	}
	if (end > w->next)
		w->next = end;
	if (tripped)
		w->trip = UINT64_MAX;
	if (w->run < cfg->run_min || cfg->size < 2 * BFS_PAGE)
		return false;
	if (w->pushed >= end && w->pushed - end >= cfg->size - (cfg->step ? cfg->step : half))
		return false; /* still ahead by all but a step (half a window) */
	from = w->pushed;
	if (from < page_up(end))
		from = page_up(end) + page_up(cfg->gap); /* the kernel reads up to there */
	to = page_down(end + cfg->size);
	if (to > cfg->eof || end + cfg->size >= cfg->eof)
		to = cfg->eof;
	if (from >= to)
		return false;
	/* half a window before the end of the batch, so that it trips with that much to go */
	plan->trip = to > from + half ? page_down(to - half) : from;
	if (to == cfg->eof && plan->trip >= page_down(cfg->eof))
		plan->trip = from; /* never the partial last page: nothing follows it */
	plan->from = from;
	plan->to = to;
	w->pushed = to;
	w->trip = plan->trip;
	return true;
}

bool bfs_window_once(const struct bfs_window *w)
{
	return w->fwd >= SEQ_ONCE_MIN;
}

void bfs_window_retreat(struct bfs_window *w, uint64_t at)
{
	if (at < w->pushed)
		w->pushed = at;
	if (w->trip != UINT64_MAX && w->trip >= at)
		w->trip = UINT64_MAX;
}

int bfs_stream_new(struct bfs_stream **out, struct bfs_file *f, uint64_t ino)
{
	struct bfs_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->pw = bfs_push_window_new();
	if (!s->pw) {
		free(s);
		return -ENOMEM;
	}
	s->f = bfs_file_get(f);
	atomic_fetch_add_explicit(&f->readers, 1, memory_order_relaxed);
	s->ino = ino;
	bfs_mutex_init(&s->lock);
	bfs_window_init(&s->win);
	atomic_init(&s->refs, 1);
	*out = s;
	return 0;
}

void bfs_stream_hold(struct bfs_stream *s)
{
	atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void bfs_stream_put(struct bfs_stream *s)
{
	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	bfs_push_window_put(s->pw);
	pthread_mutex_destroy(&s->lock);
	atomic_fetch_sub_explicit(&s->f->readers, 1, memory_order_release);
	bfs_file_put(s->f);
	free(s);
}

void bfs_stream_take(struct bfs_stream *s)
{
	bool used = bfs_file_use(s->f);

	assert(used); /* the handle's use keeps the descriptor open */
	(void)used;
	bfs_stream_hold(s);
}

void bfs_stream_drop(struct bfs_stream *s)
{
	bfs_file_unuse(s->f);
	bfs_stream_put(s);
}

void bfs_stream_free(struct bfs_stream *s)
{
	if (!s)
		return;
	/* queued jobs of this stream push nothing more, nor will a READ still holding it */
	atomic_fetch_add(&s->pw->gen, 1);
	bfs_stream_put(s);
}

struct bfs_file *bfs_stream_file(const struct bfs_stream *s)
{
	return s->f;
}

/*
 * Blocks a READ of a sequential reader served whole: the kernel's page
 * cache holds their bytes now (keep_cache), so blockfs's copy goes, and
 * its buffer is reused while still hot. (A buffer that has been sitting
 * in a big cache, or new memory, is cold: decoding into it costs more.)
 * Random readers keep them: what a block holds beyond the READ is what
 * they may want.
 */
static void behind(struct bfs_file *f, uint64_t off, uint64_t end, int advice, unsigned int run)
{
	/*
	 * A READ that served the whole file (the small files of a tree, read
	 * by cat or grep) leaves it all in the kernel's page cache: keeping
	 * it here too would fill the cache with files nobody reads from
	 * blockfs again (128 MiB of them after find | xargs cat over a tree).
	 */
	bool whole = off == 0 && end >= bfs_file_size(f);

	if (advice == BFS_ADV_SEQUENTIAL || advice == BFS_ADV_NOREUSE || run >= SEQ_RUN_MIN ||
	    whole)
		bfs_file_let_go(f, off, end, 0, 0, BFS_LET_GO_READ);
}

/* Queue [@p->from, @p->to) in chunks; the mark where queuing stopped, or @p->to. */
static uint64_t queue_plan(struct bfs_stream *s, const struct bfs_window_plan *p, unsigned int gen)
{
	struct bfs_file *f = s->f;
	const struct bfs_file_env *env = f->env;
	uint64_t chunk = bfs_push_chunk(f), pushing = env->push ? s->ino : 0;

	for (uint64_t a = p->from, b; a < p->to; a = b) {
		struct bfs_push_req req = {
			.f = f,
			.ino = pushing,
			.from = a,
			.hole = p->trip,
			.hole_to = pushing ? p->trip + BFS_PAGE : p->trip,
			.win = s->pw,
			.gen = gen,
		};
		uint64_t start, len;

		b = a + chunk < p->to ? a + chunk : p->to;
		/*
		 * A block larger than a chunk (xz -T: 24 MiB) is one job, cut at
		 * its end: two jobs in one block would have one wait for the
		 * other's decode, and a job across two would decode them in turn.
		 */
		if (bfs_file_block_at(f, a, &start, &len) && len > chunk)
			b = start + len < p->to ? start + len : p->to;
		req.to = b;
		if (!bfs_push_try(bfs_ahead_q(env), &req))
			return a;
	}
	return p->to;
}

/*
 * Big blocks are pushed whole: @p ends where its last block does, so that
 * no job decodes a block only to push part of it while the next window's
 * job for the rest waits for that decode. Under s->lock.
 */
static void whole_blocks(struct bfs_stream *s, struct bfs_window_plan *p)
{
	uint64_t start, len;

	if (!bfs_file_block_at(s->f, p->to - 1, &start, &len) || start + len <= p->to)
		return;
	p->to = start + len;
	s->win.pushed = p->to;
}

/* Queue @p; where queuing stopped short, the window goes back to there. */
static void queue_window(struct bfs_stream *s, const struct bfs_window_plan *p, unsigned int gen)
{
	uint64_t stop = queue_plan(s, p, gen);

	if (stop < p->to) {
		bfs_mutex_lock(&s->lock);
		bfs_window_retreat(&s->win, stop);
		bfs_mutex_unlock(&s->lock);
	}
}

ssize_t bfs_stream_read(struct bfs_stream *s, uint64_t off, size_t size, struct bfs_readv *rv,
			struct bfs_stream_next *next)
{
	struct bfs_file *f = s->f;
	const struct bfs_file_env *env = f->env;
	int advice = atomic_load_explicit(&f->advice, memory_order_relaxed);
	struct bfs_window_cfg cfg = { .gap = env->kernel_readahead,
				      .eof = bfs_file_size(f),
				      .run_min = SEQ_RUN_MIN };
	struct bfs_window_plan plan;
	unsigned int gen, ngen, run;
	uint64_t end = off + size;
	uint8_t page[BFS_PAGE];
	bool go, random, big, once;
	ssize_t n;

	*next = (struct bfs_stream_next){ .go = false };
	/*
	 * The kernel holds these pages locked until this READ is answered:
	 * from now on pushes skip them, instead of waiting for the reply and
	 * then copying the same bytes again.
	 */
	for (uint64_t seen = atomic_load(&s->pw->served); seen < end;)
		if (atomic_compare_exchange_weak(&s->pw->served, &seen, end))
			break;
	if (!f->codec || off >= cfg.eof)
		return bfs_file_readv(f, off, size, rv, 0);
	if (end > cfg.eof)
		end = cfg.eof;
	switch (advice) {
	case BFS_ADV_RANDOM:
		cfg.size = 0;
		break;
	case BFS_ADV_SEQUENTIAL:
	case BFS_ADV_WILLNEED:
		cfg.size = 2 * env->readahead; /* and from the first READ */
		cfg.run_min = 0;
		break;
	default:
		cfg.size = env->readahead;
	}
	/*
	 * Blocks as large as half the window (xz -T writes 24 MiB ones): ahead
	 * reaches one block per worker and the one after, so that they decode
	 * side by side rather than one at a time; at most 8 windows.
	 */
	big = cfg.size && bfs_file_block_max(f) > cfg.size / 2;
	if (big) {
		uint64_t want =
			(uint64_t)bfs_file_block_max(f) * (bfs_workq_threads(bfs_ahead_q(env)) + 1);

		cfg.size = want < 8 * cfg.size ? want : 8 * cfg.size;
		/*
		 * Independent ones are topped up a block at a time, so that
		 * every worker always has one. Not spans of one frame: a span
		 * decodes by going on from the one before, with the decoder
		 * its READ parks after its reply; a worker that took the next
		 * span first would start the frame over.
		 */
		big = !bfs_file_block_chained(f, off);
		cfg.step = big && bfs_file_block_max(f) < cfg.size / 2 ? bfs_file_block_max(f) : 0;
	}
	if (!bfs_workq_threads(bfs_ahead_q(env)))
		cfg.size = 0;
	bfs_mutex_lock(&s->lock);
	gen = s->win.gen;
	go = bfs_window_step(&s->win, &cfg, off, end, &plan);
	if (go && big)
		whole_blocks(s, &plan);
	run = s->win.run;
	ngen = s->win.gen;
	once = bfs_window_once(&s->win);
	/* for the jobs to look at as their blocks are decoded (read.c) */
	atomic_store_explicit(&s->pw->once, once, memory_order_relaxed);
	if (ngen != gen) /* a jump: the old window's jobs stop */
		atomic_store(&s->pw->gen, ngen);
	bfs_mutex_unlock(&s->lock);
	if (go)
		bfs_dbg("%s: reader at %" PRIu64 ": pushing [%" PRIu64 ", %" PRIu64
			"), tripwire %" PRIu64,
			f->name, off, plan.from, plan.to, plan.trip);
	atomic_store_explicit(&f->streaming, run >= SEQ_RUN_MIN, memory_order_relaxed);
	/*
	 * Decided as the READ arrives (the window's marks cover it), queued
	 * after the reply: waking a worker costs the waker tens of
	 * microseconds, which a READ served from the cache should not wait
	 * for. Big blocks are queued at once: this READ is likely to wait
	 * for a decode itself, and while it did, the blocks after it were
	 * not being decoded (one worker busy of two).
	 */
	if (go && big) {
		queue_window(s, &plan, ngen);
		go = false;
	}
	next->go = go;
	next->gen = ngen;
	next->plan = plan;
	/* a reader that is not (yet) sequential may want only a little of a block */
	random = advice == BFS_ADV_RANDOM ||
		 (advice != BFS_ADV_SEQUENTIAL && advice != BFS_ADV_WILLNEED && run < SEQ_RUN_MIN);
	if (end - off <= BFS_PAGE && bfs_push_window_trip(s->pw, off, (size_t)(end - off), page))
		n = bfs_file_readv_copy(f, page, (size_t)(end - off), rv);
	else
		n = bfs_file_readv(f, off, size, rv,
				   random ? BFS_READ_RANDOM :
				   once	  ? BFS_READ_ONCE :
					    0);
	if (n <= 0)
		return n;
	behind(f, off, off + (uint64_t)n, advice, run);
	/* blocks it came back to: the rest of them into the page cache */
	if (rv->again_to > rv->again_from && env->push && advice != BFS_ADV_NOREUSE) {
		next->again_from = rv->again_from;
		next->again_to = rv->again_to;
		next->rfrom = off;
		next->rto = off + (uint64_t)n;
	}
	return n;
}

void bfs_stream_ahead(struct bfs_stream *s, const struct bfs_stream_next *next)
{
	struct bfs_file *f = s->f;

	if (next->go)
		queue_window(s, &next->plan, next->gen);
	/*
	 * Blocks a reader came back to are what it asked for, as willneed is:
	 * at nice 10, not 19. Beside a CPU-bound load, with a FUSE loop that
	 * answers a random reader as fast as it asks (loop.c), nice-19 pushes
	 * starved and the reader's 4 KiB reads waited for them
	 * (doc/decisions/0013-service-priority.md).
	 */
	if (next->again_to > next->again_from)
		(void)bfs_push_block(f->env->workq, f, s->ino, next->again_from, next->again_to,
				     next->rfrom, next->rto);
}
