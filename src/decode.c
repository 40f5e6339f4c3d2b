// SPDX-License-Identifier: MIT
/*
 * The decode machinery of a file version's read path (read.c takes the
 * blocks a request needs, this file fills them): the backing bytes, by
 * pread into a per-thread buffer (one pread for neighbouring blocks), from
 * the persistent mapping under the SIGBUS guard, or from the walk's kept
 * bytes; the codec's decode of them, on idle workers too for a long run;
 * chained blocks (spans of one zstd frame or xz block) decoded in order
 * from a parked decoder under the file's chain_lock; and the logging of a
 * block that fails, once per block.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/handoff.h"
#include "blockfs/log.h"
#include "blockfs/mmap.h"
#include "blockfs/stats.h"
#include "blockfs/vocab.h"
#include "blockfs/workq.h"
#include "file_i.h"
#include "read_i.h"

/* Read neighbouring blocks with one pread unless the gaps waste more than this. */
#define SPAN_SLACK	 (64u << 10)
/* Blocks this close to the end of a mapping are checked against the file's size first. */
#define NEAR_END	 (1u << 20)
/* A run of misses decoded on idle workers too: at least this many blocks and bytes. */
#define PAR_BLOCKS_MIN	 4
#define PAR_BYTES_MIN	 (256u << 10)
/* Decoding more than this first lets the FUSE loop's reader role go (handoff.h). */
#define HANDOFF_BYTES	 (128u << 10)
/* readpath=auto: a sequential stream through a file this large uses pread. */
#define AUTO_PREAD_ABOVE (64ull << 20)

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_free(void *p)
{
	struct bfs_read_tls *t = p;

	free(t->cbuf);
	free(t);
}

static void tls_init(void)
{
	if (pthread_key_create(&tls_key, tls_free) != 0)
		abort(); /* only fails when the process is out of keys at start */
}

struct bfs_read_tls *bfs_read_tls(void)
{
	struct bfs_read_tls *t;

	pthread_once(&tls_once, tls_init);
	t = pthread_getspecific(tls_key);
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (t && pthread_setspecific(tls_key, t) != 0) {
			free(t);
			t = NULL;
		}
	}
	return t;
}

/*
 * A thread's buffer of compressed bytes is kept for its next read up to
 * this size; a bigger one (a run of 4 MiB blocks) goes back after use, so
 * that every FUSE thread and worker does not keep the largest it ever
 * needed (issue: resident memory within cache_size plus 32 MiB).
 */
#define CBUF_KEEP (1u << 20)

static void shrink(struct bfs_read_tls *t)
{
	if (t->ccap > CBUF_KEEP) {
		free(t->cbuf);
		t->cbuf = NULL;
		t->ccap = 0;
	}
}

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
	uint8_t *nb;

	if (need <= *cap)
		return 0;
	nb = realloc(*buf, need);
	if (!nb)
		return -ENOMEM;
	*buf = nb;
	*cap = need;
	return 0;
}

/*
 * A read of @f's backing file failed with @rc: a descriptor opened anew
 * by name takes the old one's number (dup3), if that is still the file
 * this version was built from (bfs_file_stale()), for a network
 * filesystem's handle can die while the file lives on. A use is held.
 * Return: 0 to read again; else @rc.
 */
int bfs_read_revive(struct bfs_file *f, int rc)
{
	const struct bfs_file_env *env = f->env;
	struct stat st;
	int fd, done = -1;

	if (!bfs_io_handle_dead(rc) || !env->reopen || f->head)
		return rc;
	fd = env->reopen(env->reopen_ctx, f->name);
	if (fd < 0)
		return rc;
	if (fstat(fd, &st) == 0 && !bfs_file_stale(f, &st)) {
		bfs_mutex_lock(&f->fd_lock);
		if (f->fd >= 0)
			done = dup3(fd, f->fd, O_CLOEXEC);
		bfs_mutex_unlock(&f->fd_lock);
	}
	close(fd);
	if (done < 0)
		return rc;
	bfs_info("%s: a backing read failed (%s): opened again by name", f->name, strerror(-rc));
	return 0;
}

static int read_backing(struct bfs_file *f, void *buf, size_t len, uint64_t off)
{
	int rc;

	if (f->head && off + len <= (uint64_t)f->st.st_size) {
		memcpy(buf, f->head + off, len); /* the bytes this version was built from */
		return 0;
	}
	BFS_COUNT(f->ctr, syscalls, 1);
	rc = bfs_io_read(&f->io, buf, len, off);
	if (rc < 0 && bfs_read_revive(f, rc) == 0) {
		BFS_COUNT(f->ctr, syscalls, 1);
		rc = bfs_io_read(&f->io, buf, len, off);
	}
	return rc;
}

/*
 * What a failed backing read met, for the log: a short read of a file now
 * shorter than this version's is one that shrank; else the error itself
 * (an EIO or ENOTCONN from a network filesystem's server, a disk's EIO).
 */
const char *bfs_read_failure(struct bfs_file *f, int rc)
{
	struct stat st;

	if (rc == -EIO && f->fd >= 0 && fstat(f->fd, &st) == 0 && st.st_size < f->st.st_size)
		return "backing file shrank";
	return strerror(-rc); /* glibc's: a static string for any errno */
}

static int block_failed(struct bfs_file *f, size_t k, int rc, const char *why)
{
	struct bfs_read_tls *t = bfs_read_tls();

	if (t && t->quiet)
		return rc;
	if (rc == -EILSEQ)
		BFS_COUNT(f->ctr, csum_failures, 1);
	if (atomic_exchange(&f->last_bad, k) != k)
		bfs_err("%s: block %zu at byte %llu: %s", f->name, k,
			(unsigned long long)f->idx.blk[k].coff, why);
	return rc;
}

int bfs_decode_poisoned(struct bfs_file *f, size_t k)
{
	char reason[sizeof(f->idx.why)];

	bfs_mutex_lock(&f->idx.settle_lock); /* settling writes it */
	memcpy(reason, f->idx.why, sizeof(reason));
	bfs_mutex_unlock(&f->idx.settle_lock);
	return block_failed(f, k, -EBADMSG, reason);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Decode the first @n bytes of block @k (all: its usize) from @src into @dst. */
static int decode_into(struct bfs_file *f, size_t k, const uint8_t *src, uint8_t *dst, uint32_t n)
{
	const char *why = "corrupt block";
	uint64_t t0 = now_ns();
	int rc = f->codec->decode(&f->idx, k, src, dst, n, f->env->verify, &why);

	BFS_COUNT(f->ctr, decode_ns, now_ns() - t0);
	if (rc < 0)
		return block_failed(f, k, rc, why);
	BFS_COUNT(f->ctr, decoded, 1);
	return 0;
}

/* Does the mmap path serve this read? */
static bool use_map(const struct bfs_file *f)
{
	if (f->head)
		return false; /* the backing bytes are in memory already */
	switch (atomic_load_explicit(&f->readpath, memory_order_relaxed)) {
	case BFS_READPATH_MMAP:
		return true;
	case BFS_READPATH_AUTO:
		/*
		 * Small or randomly read files are mapped; big streams take
		 * pread, and so does everything on a network SOURCE.
		 */
		return !f->env->remote &&
		       ((uint64_t)f->st.st_size <= AUTO_PREAD_ABOVE ||
			!atomic_load_explicit(&f->streaming, memory_order_relaxed));
	default:
		return false;
	}
}

/*
 * Decode block @k straight from the mapping at @base, under the SIGBUS
 * guard: a page lost to truncation jumps back here instead of killing the
 * daemon. Nothing between sigsetjmp() and a jump changes a local that is
 * read afterwards.
 */
static int decode_mapped(struct bfs_file *f, size_t k, const uint8_t *base, uint8_t *dst,
			 uint32_t n)
{
	const struct bfs_blk *blk = &f->idx.blk[k];
	struct bfs_guard *g = bfs_guard_get();
	const char *why = "corrupt block";
	struct stat st;
	uint64_t t0;
	int rc;

	/* The common case of a shrunk file: see it before touching a lost page. */
	if (blk->coff + blk->clen + NEAR_END > (uint64_t)f->st.st_size &&
	    (fstat(f->fd, &st) < 0 || (uint64_t)st.st_size < blk->coff + blk->clen))
		return block_failed(f, k, -EIO, "backing file shrank");
	if (sigsetjmp(g->env, 0)) {
		bfs_file_map_failed(f);
		return block_failed(f, k, -EIO, "SIGBUS: backing file shrank under its mapping");
	}
	t0 = now_ns();
	g->lo = base + blk->coff;
	g->hi = base + blk->coff + blk->clen;
	g->armed = 1;
	rc = f->codec->decode(&f->idx, k, base + blk->coff, dst, n, f->env->verify, &why);
	g->armed = 0;
	BFS_COUNT(f->ctr, decode_ns, now_ns() - t0);
	if (rc < 0)
		return block_failed(f, k, rc, why);
	BFS_COUNT(f->ctr, decoded, 1);
	return 0;
}

/* Blocks [d0, d0 + n) decoded in parallel, each from its bytes at src + (coff - off0). */
struct par_decode {
	struct bfs_file *f;
	size_t d0;
	struct bfs_block **out;
	const uint8_t *src; /* the mapping (off0 0), or a buffer of the run */
	uint64_t off0;
	bool mapped, quiet;
	atomic_int rc;	   /* the first failure, or 0 */
	atomic_size_t bad; /* the lowest item that failed; n when none did */
};

static void decode_item(void *arg, size_t i)
{
	struct par_decode *p = arg;
	size_t k = p->d0 + i;
	struct bfs_read_tls *t = bfs_read_tls();
	bool was = t ? t->quiet : false;
	int rc, zero = 0;

	if (i > atomic_load(&p->bad))
		return; /* past a failed block: its caller decodes on from there */
	if (t)
		t->quiet = p->quiet; /* a worker reports as the thread it helps */
	if (p->mapped)
		rc = decode_mapped(p->f, k, p->src, p->out[i]->data, p->out[i]->len);
	else
		rc = decode_into(p->f, k, p->src + (p->f->idx.blk[k].coff - p->off0),
				 p->out[i]->data, p->out[i]->len);
	if (t)
		t->quiet = was;
	if (rc < 0) {
		size_t low = atomic_load(&p->bad);

		atomic_compare_exchange_strong(&p->rc, &zero, rc);
		while (i < low && !atomic_compare_exchange_weak(&p->bad, &low, i))
			;
	}
}

/*
 * Decode them: on idle workers too when the run is long enough to pay for
 * waking one, so that a READ waits for less than the decode of all of its
 * blocks. (The workers only decode here: a READ never waits for a push.)
 * *@done: how many blocks from @d0 on decoded, all of them unless one failed.
 */
static int decode_all(struct bfs_file *f, size_t d0, size_t d1, struct bfs_block **out,
		      const uint8_t *src, uint64_t off0, bool mapped, bool quiet, size_t *done)
{
	struct par_decode p = { .f = f,
				.d0 = d0,
				.out = out,
				.src = src,
				.off0 = off0,
				.mapped = mapped,
				.quiet = quiet };
	size_t n = d1 - d0 + 1;
	uint64_t bytes = f->idx.blk[d1].uoff + f->idx.blk[d1].usize - f->idx.blk[d0].uoff;

	atomic_init(&p.rc, 0);
	atomic_init(&p.bad, n);
	if (n >= PAR_BLOCKS_MIN && bytes >= PAR_BYTES_MIN) {
		bfs_workq_for(f->env->workq, n, decode_item, &p);
	} else {
		for (size_t i = 0; i < n && atomic_load(&p.rc) == 0; i++)
			decode_item(&p, i);
	}
	*done = atomic_load(&p.bad);
	return atomic_load(&p.rc);
}

/*
 * Chained blocks (BFS_BLK_CHAIN, codec->resume: spans of one zstd frame):
 * block k decodes only by continuing the decoder that decoded k - 1, which
 * the codec parks at k. So a chained block is reached by decoding, in
 * order, every block from where a decoder can resume (resume()) up to it,
 * one step per hold of the file's chain_lock. Under the lock nothing else
 * decodes the file's chains, so every decoder is parked and resume() is
 * exact; steps of different readers interleave, each advancing whichever
 * decoder is nearest below its block. Holding it across the I/O and the
 * decode is the point: a second decoder started from a chain's first block
 * for every reader or decode-ahead job would cost as much as the file
 * again, each time (a sequential reader would go quadratic).
 *
 * Blocks passed on the way go into the block cache when no one has them,
 * so a sequential reader finds them there; one that another thread is
 * loading cannot be waited for (that thread may be waiting for a block this
 * one is loading: this file's rule is to wait only for blocks above those one
 * loads), so its bytes are kept in the stash for that thread.
 */
#define CHAIN_RETRIES 16

/* What an open chained block's decoder reads through: @f's backing file, counted. */
struct chain_io {
	struct bfs_io io; /* first member */
	struct bfs_file *f;
};

static ssize_t chain_io_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	struct chain_io *c = (struct chain_io *)io;
	int rc = read_backing(c->f, buf, len, off);

	return rc < 0 ? rc : (ssize_t)len;
}

static const struct bfs_io_ops chain_io_ops = { .name = "chain", .read = chain_io_read };

/* Decode chained block @k into @dst (usize bytes): one step, under chain_lock. */
static int chain_step(struct bfs_file *f, size_t k, uint8_t *dst)
{
	const struct bfs_blk *b = &f->idx.blk[k];
	const char *why = "corrupt block";
	struct bfs_read_tls *t = bfs_read_tls();
	uint64_t t0;
	int rc;

	if (!t)
		return -ENOMEM;
	if (b->flags & BFS_BLK_BAD)
		return bfs_decode_poisoned(f, k);
	if (b->flags & BFS_BLK_OPEN) {
		/* its input is found as it decodes: the codec reads it (decode_ns counts those reads) */
		struct chain_io cio = {
			.io = { .ops = &chain_io_ops, .fd = f->io.fd, .size = f->io.size },
			.f = f
		};

		t0 = now_ns();
		rc = f->codec->decode_open(&f->idx, k, &cio.io, dst, f->env->verify, &why);
		BFS_COUNT(f->ctr, decode_ns, now_ns() - t0);
	} else {
		rc = grow(&t->cbuf, &t->ccap, b->clen);
		if (rc == 0)
			rc = read_backing(f, t->cbuf, b->clen, b->coff);
		if (rc < 0)
			return block_failed(f, k, rc, bfs_read_failure(f, rc));
		t0 = now_ns();
		rc = f->codec->decode(&f->idx, k, t->cbuf, dst, b->usize, f->env->verify, &why);
		BFS_COUNT(f->ctr, decode_ns, now_ns() - t0);
	}
	if (rc == -EAGAIN)
		return rc; /* the decoder went (another file's parked evicted it): again */
	if (rc < 0)
		return block_failed(f, k, rc, why);
	BFS_COUNT(f->ctr, decoded, 1);
	return 0;
}

/* Decode chained block @r on the way to a later one. Under chain_lock. */
static int chain_pass(struct bfs_file *f, size_t r)
{
	struct bfs_cache *cache = f->env->cache;
	uint32_t len = f->idx.blk[r].usize;
	uint8_t *buf = malloc(len);
	struct bfs_block *b = NULL;
	int rc;

	if (!buf)
		return -ENOMEM;
	/* decoded first, filled after: a failed step must not fail a cached block */
	rc = chain_step(f, r, buf);
	if (rc == 0 && bfs_cache_try_new(cache, f->id, r, len, f->ctr, &b) == 1) {
		memcpy(b->data, buf, len);
		bfs_cache_done(cache, b, 0);
		bfs_block_put(b);
	} else if (rc == 0 && !bfs_cache_contains(cache, f->id, r) &&
		   bfs_file_stash_put(f, r, buf, len)) {
		buf = NULL; /* loading elsewhere (or no room): for its loader */
	}
	free(buf);
	return rc;
}

/* Chained block @k into @dst: the steps from where a decoder can resume up to it. */
static int chain_decode(struct bfs_file *f, size_t k, uint8_t *dst)
{
	const struct bfs_blk *b = &f->idx.blk[k];

	for (int again = 0;;) {
		size_t r;
		int rc;

		bfs_mutex_lock(&f->chain_lock);
		if (bfs_file_stash_take(f, k, dst, b->usize)) {
			bfs_mutex_unlock(&f->chain_lock);
			return 0; /* decoded (and counted) by the step that passed it */
		}
		r = f->codec->resume(&f->idx, k);
		rc = r < k ? chain_pass(f, r) : chain_step(f, k, dst);
		bfs_mutex_unlock(&f->chain_lock);
		if (rc == -EAGAIN && ++again < CHAIN_RETRIES)
			continue;
		if (rc == -EAGAIN)
			return block_failed(f, k, -EIO, "no decoder could be resumed for it");
		if (rc < 0 || r >= k)
			return rc;
	}
}

/* Does a block of [d0, d1] of @f decode only after the one before it? */
bool bfs_decode_chained(const struct bfs_file *f, size_t d0, size_t d1)
{
	if (!f->codec->resume)
		return false;
	for (size_t k = d0; k <= d1; k++)
		if (f->idx.blk[k].flags & BFS_BLK_CHAIN)
			return true;
	return false;
}

/* bfs_decode_run() of a run with chained blocks: in order, in this thread. */
static int chain_run(struct bfs_file *f, struct bfs_read_tls *t, size_t d0, size_t d1,
		     struct bfs_block **out, size_t *done)
{
	size_t k;
	int rc = 0;

	for (k = d0; k <= d1; k++) {
		const struct bfs_blk *b = &f->idx.blk[k];

		if (b->flags & BFS_BLK_CHAIN) {
			rc = chain_decode(f, k, out[k - d0]->data);
		} else {
			rc = grow(&t->cbuf, &t->ccap, b->clen);
			if (rc == 0)
				rc = read_backing(f, t->cbuf, b->clen, b->coff);
			if (rc < 0)
				rc = block_failed(f, k, rc, bfs_read_failure(f, rc));
			else
				rc = decode_into(f, k, t->cbuf, out[k - d0]->data, b->usize);
		}
		if (rc < 0)
			break;
	}
	*done = k - d0;
	shrink(t);
	return rc;
}

/*
 * Decode blocks [d0, d1] of @f into @out[0..]: from the mapping when the
 * mmap path serves @f; else the compressed bytes of the whole run with one
 * pread when they lie close together, or one each.
 */
static int decode_backing(struct bfs_file *f, struct bfs_read_tls *t, size_t d0, size_t d1,
			  struct bfs_block **out, size_t *done)
{
	const struct bfs_blk *a = &f->idx.blk[d0], *b = &f->idx.blk[d1];
	bool chain = bfs_decode_chained(f, d0, d1);
	const uint8_t *base = use_map(f) && !chain ? bfs_file_map_enter(f, true) : NULL;
	uint64_t need = 0, span = 0;
	int rc = 0;

	if (b->uoff + b->usize - a->uoff > HANDOFF_BYTES)
		bfs_handoff();
	*done = 0;
	if (chain)
		return chain_run(f, t, d0, d1, out, done);
	if (base) {
		rc = decode_all(f, d0, d1, out, base, 0, true, t->quiet, done);
		bfs_file_map_exit(f);
		return rc;
	}

	for (size_t k = d0; k <= d1; k++)
		need += f->idx.blk[k].clen;
	if (b->coff >= a->coff && (span = b->coff + b->clen - a->coff) <= need + SPAN_SLACK) {
		rc = grow(&t->cbuf, &t->ccap, span);
		if (rc == 0)
			rc = read_backing(f, t->cbuf, span, a->coff);
		if (rc == 0)
			rc = decode_all(f, d0, d1, out, t->cbuf, a->coff, false, t->quiet, done);
		else
			rc = block_failed(f, d0, rc, bfs_read_failure(f, rc));
		shrink(t);
		return rc;
	}
	for (size_t k = d0; k <= d1; k++) {
		const struct bfs_blk *blk = &f->idx.blk[k];

		rc = grow(&t->cbuf, &t->ccap, blk->clen);
		if (rc == 0)
			rc = read_backing(f, t->cbuf, blk->clen, blk->coff);
		if (rc < 0) {
			rc = block_failed(f, k, rc, bfs_read_failure(f, rc));
			break;
		}
		/* after grow(): realloc may have moved the buffer */
		rc = decode_into(f, k, t->cbuf, out[k - d0]->data, blk->usize);
		if (rc < 0)
			break;
		++*done;
	}
	shrink(t);
	return rc;
}

/*
 * Blocks [d0, d1] of @f into @out[0..]: those the walk's spill holds
 * (index.h, kept: a walk that decoded them to learn their sizes) by
 * pread from it, the runs between them decoded (decode_backing()); so is
 * a block whose kept bytes cannot be read (the spill dropped or failing).
 */
int bfs_decode_run(struct bfs_file *f, struct bfs_read_tls *t, size_t d0, size_t d1,
		   struct bfs_block **out, size_t *done)
{
	if (!f->idx.kept)
		return decode_backing(f, t, d0, d1, out, done);
	*done = 0;
	for (size_t k = d0, e; k <= d1; k = e + 1) {
		size_t n = 0;
		int rc;

		e = k;
		if (bfs_index_kept_read(&f->idx, k, out[k - d0]->data, out[k - d0]->len)) {
			++*done;
			continue;
		}
		while (e < d1 && !bfs_index_kept(&f->idx, e + 1))
			e++;
		rc = decode_backing(f, t, k, e, &out[k - d0], &n);
		*done += n;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Decode the first @n bytes of block @k into @dst: from the mapping, or one pread. */
int bfs_decode_prefix(struct bfs_file *f, size_t k, uint32_t n, uint8_t *dst)
{
	const struct bfs_blk *blk = &f->idx.blk[k];
	const uint8_t *base;
	struct bfs_read_tls *t;
	int rc;

	if (bfs_index_kept_read(&f->idx, k, dst, n))
		return 0; /* what the walk decoded: index.h, kept */
	base = use_map(f) ? bfs_file_map_enter(f, true) : NULL;
	if (n > HANDOFF_BYTES)
		bfs_handoff();
	if (base) {
		rc = decode_mapped(f, k, base, dst, n);
		bfs_file_map_exit(f);
		return rc;
	}
	t = bfs_read_tls();
	if (!t)
		return -ENOMEM;
	rc = grow(&t->cbuf, &t->ccap, blk->clen);
	if (rc == 0)
		rc = read_backing(f, t->cbuf, blk->clen, blk->coff);
	if (rc == 0)
		rc = decode_into(f, k, t->cbuf, dst, n);
	else
		rc = block_failed(f, k, rc, bfs_read_failure(f, rc));
	shrink(t);
	return rc;
}
