// SPDX-License-Identifier: MIT
/*
 * File versions and the read path: find the blocks a request touches,
 * read their compressed bytes with one pread(2) into a per-thread buffer,
 * decode them straight into the reply where a block is wanted whole.
 *
 * A block wanted only in part (the ends of a request) is decoded into a
 * small per-thread memo, because the kernel asks for 128 KiB at a time
 * while LZ4 blocks reach 4 MiB: without it a sequential reader would
 * decode each block up to 32 times. The shared block cache will replace
 * the memo; until then the memo costs no locks at all.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/log.h"

/* Read neighbouring blocks with one pread unless the gaps waste more than this. */
#define SPAN_SLACK (64u << 10)
#define MEMO_SLOTS 2

struct memo {
	uint64_t fid;		/* bfs_file.id, 0 = empty */
	size_t blkno;
	uint8_t *data;
	size_t cap;
};

struct tls {
	uint8_t *cbuf;		/* compressed bytes of the blocks being read */
	size_t ccap;
	struct memo m[MEMO_SLOTS];
	unsigned int victim;	/* round robin: the two ends of a request alternate */
};

static atomic_uint_fast64_t next_id = 1;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_free(void *p)
{
	struct tls *t = p;

	for (int i = 0; i < MEMO_SLOTS; i++)
		free(t->m[i].data);
	free(t->cbuf);
	free(t);
}

static void tls_init(void)
{
	if (pthread_key_create(&tls_key, tls_free) != 0)
		abort();	/* only fails when the process is out of keys at start */
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

int bfs_file_open(struct bfs_file **out, int fd, int side, const struct bfs_codec *codec,
		  const char *name, bool verify)
{
	struct bfs_io side_io, *sidep = NULL;
	struct stat sst;
	struct bfs_file *f;
	int rc;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->name = strdup(name);
	if (!f->name) {
		rc = -ENOMEM;
		goto out_free;
	}
	if (fstat(fd, &f->st) < 0) {
		rc = -errno;
		goto out_free;
	}
	atomic_init(&f->refs, 1);
	atomic_init(&f->last_bad, SIZE_MAX);
	f->id = atomic_fetch_add(&next_id, 1);
	f->fd = fd;
	f->codec = codec;
	f->verify = verify;
	bfs_io_init_fd(&f->io, fd, (uint64_t)f->st.st_size);
	bfs_index_init(&f->idx, (uint64_t)f->st.st_size);
	if (codec) {
		if (side >= 0 && fstat(side, &sst) == 0 && S_ISREG(sst.st_mode)) {
			bfs_io_init_fd(&side_io, side, (uint64_t)sst.st_size);
			sidep = &side_io;
		}
		rc = codec->scan(&f->io, sidep, &f->idx);
		if (rc < 0)
			goto out_destroy;
		if (f->idx.broken)
			bfs_warn("%s: %s", name, f->idx.why);
	}
	*out = f;
	return 0;

out_destroy:
	bfs_index_destroy(&f->idx);
out_free:
	free(f->name);
	free(f);
	return rc;
}

void bfs_file_put(struct bfs_file *f)
{
	if (!f || atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1)
		return;
	close(f->fd);
	bfs_index_destroy(&f->idx);
	free(f->name);
	free(f);
}

uint64_t bfs_file_size(const struct bfs_file *f)
{
	return f->codec ? atomic_load(&f->idx.usize) : (uint64_t)f->st.st_size;
}

bool bfs_file_stale(const struct bfs_file *f, const struct stat *now)
{
	return now->st_ino != f->st.st_ino || now->st_dev != f->st.st_dev ||
	       now->st_size != f->st.st_size ||
	       now->st_mtim.tv_sec != f->st.st_mtim.tv_sec ||
	       now->st_mtim.tv_nsec != f->st.st_mtim.tv_nsec ||
	       now->st_ctim.tv_sec != f->st.st_ctim.tv_sec ||
	       now->st_ctim.tv_nsec != f->st.st_ctim.tv_nsec;
}

static ssize_t read_raw(struct bfs_file *f, void *buf, size_t size, uint64_t off)
{
	size_t done = 0;

	while (done < size) {
		ssize_t n = f->io.ops->read(&f->io, (uint8_t *)buf + done, size - done, off + done);

		if (n < 0)
			return n;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int block_failed(struct bfs_file *f, size_t k, int rc, const char *why)
{
	if (atomic_exchange(&f->last_bad, k) != k)
		bfs_err("%s: block %zu at byte %llu: %s", f->name, k,
			(unsigned long long)f->idx.blk[k].coff, why);
	return rc;
}

static struct memo *memo_find(struct tls *t, const struct bfs_file *f, size_t k)
{
	for (int i = 0; i < MEMO_SLOTS; i++)
		if (t->m[i].fid == f->id && t->m[i].blkno == k)
			return &t->m[i];
	return NULL;
}

/* Compressed bytes of blocks [d0, d1]: one pread when they lie close together. */
static int load_span(struct bfs_file *f, struct tls *t, size_t d0, size_t d1)
{
	const struct bfs_blk *a = &f->idx.blk[d0], *b = &f->idx.blk[d1];
	uint64_t need = 0, span;

	for (size_t k = d0; k <= d1; k++)
		need += f->idx.blk[k].clen;
	if (b->coff < a->coff || b->coff + b->clen - a->coff > need + SPAN_SLACK)
		return 1;		/* far apart: read block by block */
	span = b->coff + b->clen - a->coff;
	if (grow(&t->cbuf, &t->ccap, span) < 0)
		return -ENOMEM;
	return bfs_io_read(&f->io, t->cbuf, span, a->coff);
}

static int decode_one(struct bfs_file *f, struct tls *t, size_t k, const uint8_t *src,
		      uint8_t *dst)
{
	const struct bfs_blk *b = &f->idx.blk[k];
	const char *why = "corrupt block";
	int rc;

	if (b->flags & BFS_BLK_BAD) {
		char reason[sizeof(f->idx.why)];

		pthread_mutex_lock(&f->idx.settle_lock);	/* settling writes it */
		memcpy(reason, f->idx.why, sizeof(reason));
		pthread_mutex_unlock(&f->idx.settle_lock);
		return block_failed(f, k, -EBADMSG, reason);
	}
	if (!src) {
		rc = grow(&t->cbuf, &t->ccap, b->clen);
		if (rc == 0)
			rc = bfs_io_read(&f->io, t->cbuf, b->clen, b->coff);
		if (rc < 0)
			return block_failed(f, k, rc, rc == -EIO ? "backing file shrank" : "read failed");
		src = t->cbuf;
	}
	rc = f->codec->decode(b, src, dst, f->verify, &why);
	return rc < 0 ? block_failed(f, k, rc, why) : 0;
}

ssize_t bfs_file_read(struct bfs_file *f, void *buf, size_t size, uint64_t off)
{
	struct bfs_index *idx = &f->idx;
	size_t k0, k1, d0, d1, done = 0;
	bool spanned = false;
	struct tls *t;
	uint64_t usize;
	int rc;

	if (!f->codec)
		return read_raw(f, buf, size, off);
	if (size == 0 || off >= atomic_load(&idx->usize))
		return 0;
	rc = bfs_index_settle(idx, &f->io, f->codec, off + size - 1);
	if (rc < 0)
		return rc;
	usize = atomic_load(&idx->usize);
	if (off >= usize)
		return 0;
	if (size > usize - off)
		size = (size_t)(usize - off);
	if (bfs_index_find(idx, off, &k0) < 0 || bfs_index_find(idx, off + size - 1, &k1) < 0)
		return -EIO;		/* cannot happen once settled; never serve a guess */
	t = tls_get();
	if (!t)
		return -ENOMEM;

	/* Blocks the memo cannot serve: all but possibly the two ends. */
	d0 = k0;
	d1 = k1;
	if (memo_find(t, f, k0))
		d0++;
	if (k1 > k0 && memo_find(t, f, k1))
		d1--;
	if (d0 <= d1 && d0 <= k1) {
		rc = load_span(f, t, d0, d1);
		if (rc < 0)
			return block_failed(f, d0, rc, "read failed");
		spanned = rc == 0;
	}

	for (size_t k = k0; k <= k1; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		uint64_t pos = off + done;
		size_t within = (size_t)(pos - b->uoff);
		size_t take = b->usize - within;
		const uint8_t *src = spanned && k >= d0 && k <= d1 ?
				     t->cbuf + (b->coff - idx->blk[d0].coff) : NULL;
		struct memo *m;

		if (take > size - done)
			take = size - done;
		if (within == 0 && take == b->usize) {
			rc = decode_one(f, t, k, src, (uint8_t *)buf + done);
			if (rc < 0)
				return rc;
		} else {
			m = memo_find(t, f, k);
			if (!m) {
				m = &t->m[t->victim++ % MEMO_SLOTS];
				m->fid = 0;
				if (grow(&m->data, &m->cap, b->usize) < 0)
					return -ENOMEM;
				rc = decode_one(f, t, k, src, m->data);
				if (rc < 0)
					return rc;
				m->fid = f->id;
				m->blkno = k;
			}
			memcpy((uint8_t *)buf + done, m->data + within, take);
		}
		done += take;
	}
	return (ssize_t)done;
}
