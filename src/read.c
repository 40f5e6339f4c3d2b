// SPDX-License-Identifier: MIT
/*
 * The read path of a file version: find the blocks a request touches,
 * take each from the block cache, and decode the missing ones, reading the
 * compressed bytes of neighbouring blocks with one pread(2) into a
 * per-thread buffer. The reply points into the cached blocks.
 *
 * Blocks are taken in ascending order, and a thread waits only for blocks
 * above every block it is itself decoding: that order is what keeps two
 * requests that overlap from waiting for each other.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/handoff.h"
#include "blockfs/log.h"
#include "blockfs/mmap.h"
#include "blockfs/spill.h"
#include "blockfs/stats.h"
#include "blockfs/vocab.h"
#include "blockfs/workq.h"
#include "file_i.h"

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

/*
 * Spilled units (unit_worth()): decoded blocks at least this big, per
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

/* Per thread: the compressed bytes being decoded, reused by every request. */
struct tls {
	uint8_t *cbuf;
	size_t ccap;
	bool quiet; /* decoding ahead: failures are for the reader to report */
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_free(void *p)
{
	struct tls *t = p;

	free(t->cbuf);
	free(t);
}

static void tls_init(void)
{
	if (pthread_key_create(&tls_key, tls_free) != 0)
		abort(); /* only fails when the process is out of keys at start */
}

static struct tls *tls_get(void)
{
	struct tls *t;

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

static void shrink(struct tls *t)
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
static int revive(struct bfs_file *f, int rc)
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
	if (rc < 0 && revive(f, rc) == 0) {
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
static const char *read_failure(struct bfs_file *f, int rc)
{
	struct stat st;

	if (rc == -EIO && f->fd >= 0 && fstat(f->fd, &st) == 0 && st.st_size < f->st.st_size)
		return "backing file shrank";
	return strerror(-rc); /* glibc's: a static string for any errno */
}

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
		if (n < 0 && !revived && revive(f, (int)n) == 0) {
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

static int block_failed(struct bfs_file *f, size_t k, int rc, const char *why)
{
	struct tls *t = tls_get();

	if (t && t->quiet)
		return rc;
	if (rc == -EILSEQ)
		BFS_COUNT(f->ctr, csum_failures, 1);
	if (atomic_exchange(&f->last_bad, k) != k)
		bfs_err("%s: block %zu at byte %llu: %s", f->name, k,
			(unsigned long long)f->idx.blk[k].coff, why);
	return rc;
}

static int poisoned(struct bfs_file *f, size_t k)
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

/* The codec's decode, or its decode_prefix when only the first @n bytes are wanted. */
static int codec_decode(const struct bfs_file *f, size_t k, const uint8_t *src, uint8_t *dst,
			uint32_t n, const char **why)
{
	if (n < f->idx.blk[k].usize)
		return bfs_codec_decode_prefix(f->codec, &f->idx, k, src, dst, n, f->env->verify,
					       why);
	return bfs_codec_decode(f->codec, &f->idx, k, src, dst, f->env->verify, why);
}

/* Decode the first @n bytes of block @k (all: its usize) from @src into @dst. */
static int decode_into(struct bfs_file *f, size_t k, const uint8_t *src, uint8_t *dst, uint32_t n)
{
	const char *why = "corrupt block";
	uint64_t t0 = now_ns();
	int rc = codec_decode(f, k, src, dst, n, &why);

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
	rc = codec_decode(f, k, base + blk->coff, dst, n, &why);
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
	atomic_int rc; /* the first failure, or 0 */
};

static void decode_item(void *arg, size_t i)
{
	struct par_decode *p = arg;
	size_t k = p->d0 + i;
	struct tls *t = tls_get();
	bool was = t ? t->quiet : false;
	int rc, zero = 0;

	if (t)
		t->quiet = p->quiet; /* a worker reports as the thread it helps */
	if (p->mapped)
		rc = decode_mapped(p->f, k, p->src, p->out[i]->data, p->out[i]->len);
	else
		rc = decode_into(p->f, k, p->src + (p->f->idx.blk[k].coff - p->off0),
				 p->out[i]->data, p->out[i]->len);
	if (t)
		t->quiet = was;
	if (rc < 0)
		atomic_compare_exchange_strong(&p->rc, &zero, rc);
}

/*
 * Decode them: on idle workers too when the run is long enough to pay for
 * waking one, so that a READ waits for less than the decode of all of its
 * blocks. (The workers only decode here: a READ never waits for a push.)
 */
static int decode_all(struct bfs_file *f, size_t d0, size_t d1, struct bfs_block **out,
		      const uint8_t *src, uint64_t off0, bool mapped, bool quiet)
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
	if (n >= PAR_BLOCKS_MIN && bytes >= PAR_BYTES_MIN) {
		bfs_workq_for(f->env->workq, n, decode_item, &p);
	} else {
		for (size_t i = 0; i < n && atomic_load(&p.rc) == 0; i++)
			decode_item(&p, i);
	}
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
	struct tls *t = tls_get();
	uint64_t t0;
	int rc;

	if (!t)
		return -ENOMEM;
	if (b->flags & BFS_BLK_BAD)
		return poisoned(f, k);
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
			return block_failed(f, k, rc, read_failure(f, rc));
		t0 = now_ns();
		rc = bfs_codec_decode(f->codec, &f->idx, k, t->cbuf, dst, f->env->verify, &why);
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
static bool chained(const struct bfs_file *f, size_t d0, size_t d1)
{
	if (!f->codec->resume)
		return false;
	for (size_t k = d0; k <= d1; k++)
		if (f->idx.blk[k].flags & BFS_BLK_CHAIN)
			return true;
	return false;
}

/* decode_run() of a run with chained blocks: in order, in this thread. */
static int chain_run(struct bfs_file *f, struct tls *t, size_t d0, size_t d1,
		     struct bfs_block **out)
{
	int rc = 0;

	for (size_t k = d0; k <= d1 && rc == 0; k++) {
		const struct bfs_blk *b = &f->idx.blk[k];

		if (b->flags & BFS_BLK_CHAIN) {
			rc = chain_decode(f, k, out[k - d0]->data);
			continue;
		}
		rc = grow(&t->cbuf, &t->ccap, b->clen);
		if (rc == 0)
			rc = read_backing(f, t->cbuf, b->clen, b->coff);
		if (rc < 0)
			rc = block_failed(f, k, rc, read_failure(f, rc));
		else
			rc = decode_into(f, k, t->cbuf, out[k - d0]->data, b->usize);
	}
	shrink(t);
	return rc;
}

/*
 * Decode blocks [d0, d1] of @f into @out[0..]: from the mapping when the
 * mmap path serves @f; else the compressed bytes of the whole run with one
 * pread when they lie close together, or one each.
 */
static int decode_backing(struct bfs_file *f, struct tls *t, size_t d0, size_t d1,
			  struct bfs_block **out)
{
	const struct bfs_blk *a = &f->idx.blk[d0], *b = &f->idx.blk[d1];
	bool chain = chained(f, d0, d1);
	const uint8_t *base = use_map(f) && !chain ? bfs_file_map_enter(f, true) : NULL;
	uint64_t need = 0, span = 0;
	int rc = 0;

	if (b->uoff + b->usize - a->uoff > HANDOFF_BYTES)
		bfs_handoff();
	if (chain)
		return chain_run(f, t, d0, d1, out);
	if (base) {
		rc = decode_all(f, d0, d1, out, base, 0, true, t->quiet);
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
			rc = decode_all(f, d0, d1, out, t->cbuf, a->coff, false, t->quiet);
		else
			rc = block_failed(f, d0, rc, read_failure(f, rc));
		shrink(t);
		return rc;
	}
	for (size_t k = d0; k <= d1; k++) {
		const struct bfs_blk *blk = &f->idx.blk[k];

		rc = grow(&t->cbuf, &t->ccap, blk->clen);
		if (rc == 0)
			rc = read_backing(f, t->cbuf, blk->clen, blk->coff);
		if (rc < 0) {
			rc = block_failed(f, k, rc, read_failure(f, rc));
			break;
		}
		/* after grow(): realloc may have moved the buffer */
		rc = decode_into(f, k, t->cbuf, out[k - d0]->data, blk->usize);
		if (rc < 0)
			break;
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
static int decode_run(struct bfs_file *f, struct tls *t, size_t d0, size_t d1,
		      struct bfs_block **out)
{
	if (!f->idx.kept)
		return decode_backing(f, t, d0, d1, out);
	for (size_t k = d0, e; k <= d1; k = e + 1) {
		int rc;

		e = k;
		if (bfs_index_kept_read(&f->idx, k, out[k - d0]->data, out[k - d0]->len))
			continue;
		while (e < d1 && !bfs_index_kept(&f->idx, e + 1))
			e++;
		rc = decode_backing(f, t, k, e, &out[k - d0]);
		if (rc < 0)
			return rc;
	}
	return 0;
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
 * Spilled units. A block whose decode costs much (an xz -T block of 24
 * MiB takes a quarter of a second; a bzip2 block tens of milliseconds) is
 * decoded whole, with its check, at a random reader's first touch, and
 * kept in the spill (spill.h, bfs_spill_put()): later reads of any part
 * of it cost a pread instead of decoding it again, which the block cache
 * cannot offer for blocks that big. Only a block that decoded whole and
 * passed its check is spilled; a read the spill cannot serve decodes as
 * before. The sizes from which a block is worth it come from measuring
 * each codec's decode against a pread (doc/design.md, "The spill").
 */
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
static bool unit_worth(const struct bfs_file *f, size_t k)
{
	const struct bfs_blk *b = &f->idx.blk[k];

	return !(b->flags & (BFS_BLK_BAD | BFS_BLK_CHAIN)) && b->usize >= unit_min(f->codec) &&
	       bfs_spill_on();
}

/*
 * Block @k of @f is decoded whole (it passed its check): is it ours to
 * spill (unit_put())? Then it is marked as being spilled, and readers of
 * it wait for that (unit_take()) rather than decode it again.
 */
static bool unit_claim(struct bfs_file *f, size_t k)
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

/* Spill block @k's @len decoded bytes at @data, as unit_claim() let us; wake its waiters. */
static void unit_put(struct bfs_file *f, size_t k, const uint8_t *data, uint32_t len)
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
static int unit_fill(struct bfs_file *f, size_t k, uint8_t *dst, uint32_t len)
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
static ssize_t unit_serve(struct bfs_file *f, size_t k, uint64_t off, size_t size,
			  struct bfs_readv *rv)
{
	struct bfs_block *hit;

	if (bfs_cache_lookup(f->env->cache, f->id, k, &hit) == 0) {
		bfs_block_put(hit);
		return 0; /* cached: the common path takes it from there */
	}
	return unit_read(f, k, off, size, rv);
}

/*
 * Take blocks [k0, k1] into rv->blk; decode those that are ours to fill,
 * run by run. Every block we were given to fill is finished (done) on
 * every path, or its waiters would wait forever.
 */
static int take_blocks(struct bfs_file *f, size_t k0, size_t k1, struct bfs_readv *rv, bool quiet)
{
	struct bfs_cache *cache = f->env->cache;
	size_t n = k1 - k0 + 1, run = SIZE_MAX;
	uint8_t fill_inline[BFS_READV_INLINE], *fill = fill_inline;
	struct tls *t = tls_get();
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
			rc = poisoned(f, k0 + i);
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
		if (rc == 1 && unit_worth(f, k0 + i) &&
		    unit_fill(f, k0 + i, rv->blk[i]->data, rv->blk[i]->len) == 0) {
			bfs_cache_done(cache, rv->blk[i], 0);
			fill[i] = 0;
		}
	}
	/*
	 * Decode each run of blocks to fill, even when the request has
	 * failed already (a later block's cached failure): other readers may
	 * wait for these. A run of independent blocks that failed is decoded
	 * again block by block, so that the good ones in it are not failed
	 * with the bad one; fill[] of the run says which blocks are good from
	 * then on. Both are quiet: the failure the request met was logged.
	 */
	for (size_t i = 0; i <= rv->nblk; i++) {
		bool filling = i < rv->nblk && fill[i];
		int rr = 0;

		if (filling && run == SIZE_MAX)
			run = i;
		if (filling || run == SIZE_MAX)
			continue;
		t->quiet = quiet || rc < 0;
		rr = decode_run(f, t, k0 + run, k0 + i - 1, &rv->blk[run]);
		if (rr < 0 && rc >= 0)
			rc = rr;
		for (size_t j = run; j < i; j++)
			fill[j] = rr >= 0;
		t->quiet = true;
		if (rr < 0 && i - run > 1 && !chained(f, k0 + run, k0 + i - 1))
			for (size_t j = run; j < i; j++)
				fill[j] = !(f->idx.blk[k0 + j].flags & BFS_BLK_BAD) &&
					  decode_run(f, t, k0 + j, k0 + j, &rv->blk[j]) >= 0;
		/*
		 * Good blocks to spill are claimed before done, so that no
		 * reader decodes them again meanwhile (bit 1 of fill[])
		 */
		for (size_t j = run; j < i; j++)
			if (fill[j] && unit_worth(f, k0 + j) && unit_claim(f, k0 + j))
				fill[j] |= 2;
		for (size_t j = run; j < i; j++)
			bfs_cache_done(cache, rv->blk[j], fill[j] ? 0 : rr);
		/* after done: the block's waiters need not wait for the spill's write */
		for (size_t j = run; j < i; j++)
			if (fill[j] & 2)
				unit_put(f, k0 + j, rv->blk[j]->data, rv->blk[j]->len);
		run = SIZE_MAX;
	}
	t->quiet = false;
	if (fill != fill_inline)
		free(fill);
	return rc < 0 ? rc : 0;
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

/* bfs_file_readv(); @reader: a reader's request (counted, drives read-ahead). */
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

/* Decode the first @n bytes of block @k into @dst: from the mapping, or one pread. */
static int decode_prefix(struct bfs_file *f, size_t k, uint32_t n, uint8_t *dst)
{
	const struct bfs_blk *blk = &f->idx.blk[k];
	const uint8_t *base;
	struct tls *t;
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
	t = tls_get();
	if (!t)
		return -ENOMEM;
	rc = grow(&t->cbuf, &t->ccap, blk->clen);
	if (rc == 0)
		rc = read_backing(f, t->cbuf, blk->clen, blk->coff);
	if (rc == 0)
		rc = decode_into(f, k, t->cbuf, dst, n);
	else
		rc = block_failed(f, k, rc, read_failure(f, rc));
	shrink(t);
	return rc;
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
	if (k0 == k1 && unit_worth(f, k1))
		return unit_serve(f, k1, off, size, rv); /* else decoded whole, for the spill */
	if (again || k0 != k1 || !bfs_codec_has_prefix(f->codec) ||
	    (b->flags & (BFS_BLK_BAD | BFS_BLK_CHAIN)) || need >= b->usize)
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
	rc = decode_prefix(f, k1, (uint32_t)need, rv->own);
	if (rc < 0)
		return rc;
	BFS_COUNT(f->ctr, misses, 1);
	rv->iov[0] =
		(struct iovec){ .iov_base = (uint8_t *)rv->own + (off - b->uoff), .iov_len = size };
	rv->cnt = 1;
	return (ssize_t)size;
}

static ssize_t readv_as(struct bfs_file *f, uint64_t off, size_t size, struct bfs_readv *rv,
			bool reader, unsigned int flags)
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
	rc = bfs_index_settle(idx, &f->io, f->codec, off + size - 1);
	if (rc < 0 && revive(f, rc) == 0)
		rc = bfs_index_settle(idx, &f->io, f->codec, off + size - 1);
	if (rc < 0) {
		/* one line per version: the blocks' own lines follow on later reads */
		if (atomic_exchange(&f->last_bad, BFS_SETTLE_FAILED) != BFS_SETTLE_FAILED)
			bfs_err("%s: cannot measure block sizes: %s", f->name,
				rc == -EIO ? read_failure(f, rc) : strerror(-rc));
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
	} else if (k0 == k1 && unit_worth(f, k0)) {
		/* a spilled block is read from its spill by any reader, and pushed from there */
		ssize_t n = unit_serve(f, k0, off, size, rv);

		if (n > 0) {
			if (reader)
				BFS_COUNT(f->ctr, bytes, (uint64_t)n);
			return n;
		}
	}
	rc = readv_reserve(rv, k1 - k0 + 1);
	if (rc == 0)
		rc = take_blocks(f, k0, k1, rv, !reader);
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
	return readv_as(f, off, size, rv, true, flags);
}

ssize_t bfs_file_peekv(struct bfs_file *f, uint64_t off, size_t size, struct bfs_readv *rv)
{
	return readv_as(f, off, size, rv, false, 0);
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
