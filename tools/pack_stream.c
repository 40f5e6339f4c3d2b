// SPDX-License-Identifier: MIT
/*
 * The compression pipeline of blockfs-pack: one input stream in, one
 * LZ4 frame plus seek table, BGZF members plus .gzi, zstd frames plus
 * seek table, or one multi-block xz stream, out.
 *
 * The calling thread reads input into a ring of chunks, hands each chunk
 * to the workers, and writes finished chunks in order; workers compress
 * the blocks of a chunk independently. A chunk is about 1 MiB (several
 * small blocks, so that workers are not woken per 64 KiB member), and the
 * ring holds two chunks per worker: one being compressed, one waiting,
 * which bounds memory whatever the input size.
 *
 * LZ4 is written by hand with liblz4's block API rather than LZ4F,
 * because the seek table needs each block's offset and sizes: one frame,
 * independent blocks, no content size (standard input has none to give),
 * and by default block checksums and the content checksum. The content
 * checksum (XXH32 of the whole content) is serial: the writing thread
 * hashes each chunk as it writes it, and on 2 cores that time is taken
 * from the compressing threads, so packing takes longer with it
 * (doc/decisions/0010-pack-defaults.md). It is
 * there because lz4 1.9.4's -t rejects ("Stream followed by
 * undecodable data") a frame with block checksums but no content checksum
 * when a skippable frame (the seek table) follows; --no-checksum leaves
 * out both. A block that does not shrink is stored raw (size word bit
 * 31), as lz4 itself does.
 *
 * BGZF is written as bgzip writes it: members of at most 0xff00 input
 * bytes, raw deflate, the BC extra field, the 28-byte EOF member, and a
 * .gzi byte-identical to bgzip -i's. A member that does not shrink is a
 * deflate stored block, written directly. Deflate is libdeflate's when
 * the build found it (as htslib's bgzip uses it: about twice zlib's speed
 * at a slightly better ratio), else zlib's.
 *
 * zstd is written in the zstd seekable format (zstd's
 * contrib/seekable_format/zstd_seekable_compression_format.md): one
 * independent frame per block, each with its content size and content
 * checksum, compressed by the workers like LZ4 blocks, then the seek
 * table, a skippable frame:
 *
 *   | 184D2A5E | size, LE32 | entry * frames | frames, LE32 | 0x80 | 8F92EAB1 |
 *   entry := | compressed size, LE32 | decompressed size, LE32 | checksum, LE32 |
 *
 * where the checksum is the low 32 bits of XXH64 (seed 0) of the frame's
 * output, computed by the worker that compressed it. zstd -d skips the
 * table as it skips any skippable frame.
 *
 * xz goes through liblzma's own multithreaded encoder (one xz stream,
 * blocks of --block-size input, their sizes in the block headers and in
 * the index at the end), which has its own threads: the pool's workers
 * are not started for it. Each block is compressed alone, so the LZMA2
 * dictionary is cut to the block size: a bigger one cannot be used, and
 * would cost each encoder thread its memory (preset 9: 64 MiB
 * dictionary, about 670 MiB per thread).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lz4.h>
#include <lz4hc.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>
#if HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/seektable.h"
#include "blockfs/xxh32.h"
#include "pack.h"

/* lz4_Frame_format.md */
#define LZ4_MAGIC	 0x184D2204u
#define FLG_VERSION	 0x40u
#define FLG_B_INDEP	 0x20u
#define FLG_B_CSUM	 0x10u
#define FLG_C_CSUM	 0x04u
#define BD_ID_SHIFT	 4
#define LZ4_HDR_LEN	 7
#define LZ4_BLK_HDR	 4
#define LZ4_BLK_CSUM	 4
#define LZ4_STORED	 0x80000000u
#define LZ4_ENDMARK_LEN	 4
#define LZ4_CONTENT_CSUM 4

/* SAM/BAM spec 4.1 and RFC 1952/1951 */
#define BGZF_HDR_LEN	   18
#define BGZF_TRAILER_LEN   8
#define BGZF_MEMBER_MAX	   65536
#define DEFLATE_STORED_HDR 5 /* BFINAL/BTYPE byte, LEN, NLEN */
static const uint8_t bgzf_hdr[BGZF_HDR_LEN - 2] = {
	0x1f, 0x8b, 0x08, 0x04, 0, 0, 0, 0, 0, 0xff, 6, 0, 'B', 'C', 2, 0,
};
static const uint8_t bgzf_eof[28] = {
	0x1f, 0x8b, 0x08, 0x04, 0, 0, 0, 0, 0, 0xff, 6, 0, 'B', 'C',
	2,    0,    0x1b, 0,	3, 0, 0, 0, 0, 0,    0, 0, 0,	0,
};

/* zstd_seekable_compression_format.md */
#define ZSEEK_SKIP_MAGIC   0x184D2A5Eu
#define ZSEEK_FOOTER_MAGIC 0x8F92EAB1u
#define ZSEEK_CSUM_FLAG	   0x80u
#define ZSEEK_HDR_LEN	   8 /* magic, frame size */
#define ZSEEK_ENTRY_LEN	   12
#define ZSEEK_FOOTER_LEN   9

#define CHUNK_TARGET (1u << 20)
/* xz: input read and output written per lzma_code() round */
#define XZ_IO_CHUNK  (1u << 20)

enum { SLOT_FREE, SLOT_QUEUED, SLOT_DONE };

struct slot {
	uint8_t *in, *out;
	size_t inlen, outlen;
	uint32_t nblk, nstored;
	uint32_t *clen, *usize; /* per block of the chunk */
	uint32_t *csum;		/* zstd: XXH64's low 32 bits per block */
	int state;		/* protected by pool->lock */
	int err;
};

struct pk_pool {
	struct pk_opts o;
	uint32_t bmax;	    /* LZ4 frame block max */
	uint32_t per_chunk; /* blocks per chunk */
	size_t chunk, outcap, blkcap;
	unsigned int nslots;
	struct slot *slots;

	pthread_mutex_t lock; /* protects the queue, quit and slot states */
	pthread_cond_t work, done;
	unsigned int *queue, qhead, qlen;
	bool quit;

	pthread_t *th;
	unsigned int nth;
};

/* ---- workers ---- */

struct worker {
	void *lz4; /* LZ4 or LZ4HC state */
	ZSTD_CCtx *zc;
#if HAVE_LIBDEFLATE
	struct libdeflate_compressor *ld;
#else
	z_stream z;
	bool zinit;
#endif
};

static uint32_t lz4_block(struct pk_pool *p, struct worker *w, const uint8_t *src, uint32_t n,
			  uint8_t *dst, bool *stored)
{
	uint32_t word, dlen;
	int c = 0;

	/* Room for n - 1 bytes only: a block that does not shrink is stored. */
	if (n > 1) {
		if (p->o.codec == PK_LZ4HC || p->o.level >= 3)
			c = LZ4_compress_HC_extStateHC(w->lz4, (const char *)src,
						       (char *)dst + LZ4_BLK_HDR, (int)n,
						       (int)n - 1, p->o.level);
		else
			c = LZ4_compress_fast_extState(w->lz4, (const char *)src,
						       (char *)dst + LZ4_BLK_HDR, (int)n,
						       (int)n - 1, 1);
	}
	*stored = c <= 0;
	if (*stored) {
		memcpy(dst + LZ4_BLK_HDR, src, n);
		dlen = n;
		word = n | LZ4_STORED;
	} else {
		dlen = (uint32_t)c;
		word = dlen;
	}
	bfs_put_le32(dst, word);
	if (p->o.csum) {
		bfs_put_le32(dst + LZ4_BLK_HDR + dlen, bfs_xxh32(dst + LZ4_BLK_HDR, dlen, 0));
		dlen += LZ4_BLK_CSUM;
	}
	return LZ4_BLK_HDR + dlen;
}

/* One BGZF member for @n (<= 0xff00) bytes at @src. */
static int bgzf_member(struct pk_pool *p, struct worker *w, const uint8_t *src, uint32_t n,
		       uint8_t *dst, bool *stored, uint32_t *len)
{
	uint8_t *data = dst + BGZF_HDR_LEN;
	uint32_t dlen = 0;

	*stored = true;
	/* Room for one byte less than the stored form: anything longer is stored. */
#if HAVE_LIBDEFLATE
	if (p->o.level > 0) {
		dlen = (uint32_t)libdeflate_deflate_compress(w->ld, src, n, data,
							     n + DEFLATE_STORED_HDR - 1);
		*stored = dlen == 0;
	}
#else
	if (p->o.level > 0) {
		int rc;

		if (deflateReset(&w->z) != Z_OK)
			return -ENOMEM;
		w->z.next_in = (Bytef *)src;
		w->z.avail_in = n;
		w->z.next_out = data;
		w->z.avail_out = n + DEFLATE_STORED_HDR - 1;
		rc = deflate(&w->z, Z_FINISH);
		if (rc == Z_STREAM_END) {
			dlen = (uint32_t)w->z.total_out;
			*stored = false;
		} else if (rc != Z_OK && rc != Z_BUF_ERROR) {
			return -ENOMEM;
		}
	}
#endif
	if (*stored) {
		/* RFC 1951 3.2.4: BFINAL=1 BTYPE=00, LEN, NLEN, bytes */
		data[0] = 1;
		data[1] = (uint8_t)n;
		data[2] = (uint8_t)(n >> 8);
		data[3] = (uint8_t)~n;
		data[4] = (uint8_t)(~n >> 8);
		memcpy(data + DEFLATE_STORED_HDR, src, n);
		dlen = n + DEFLATE_STORED_HDR;
	}
	memcpy(dst, bgzf_hdr, sizeof(bgzf_hdr));
	*len = BGZF_HDR_LEN + dlen + BGZF_TRAILER_LEN;
	dst[16] = (uint8_t)(*len - 1); /* BSIZE: member bytes - 1 */
	dst[17] = (uint8_t)((*len - 1) >> 8);
#if HAVE_LIBDEFLATE
	bfs_put_le32(data + dlen, libdeflate_crc32(0, src, n));
#else
	bfs_put_le32(data + dlen, (uint32_t)crc32(0, src, n));
#endif
	bfs_put_le32(data + dlen + 4, n);
	return 0;
}

/* One zstd frame, with content size and checksum, for @n bytes at @src. */
static int zstd_frame(struct pk_pool *p, struct worker *w, const uint8_t *src, uint32_t n,
		      uint8_t *dst, uint32_t *len)
{
	size_t c = ZSTD_compress2(w->zc, dst, p->blkcap, src, n);

	if (ZSTD_isError(c))
		return ZSTD_getErrorCode(c) == ZSTD_error_memory_allocation ? -ENOMEM : -EIO;
	*len = (uint32_t)c; /* at most ZSTD_compressBound(32 MiB) */
	return 0;
}

static void compress_slot(struct pk_pool *p, struct worker *w, struct slot *s)
{
	size_t pos = 0;

	s->nblk = 0;
	s->nstored = 0;
	s->err = 0;
	for (size_t at = 0; at < s->inlen; at += p->o.block) {
		uint32_t n = s->inlen - at < p->o.block ? (uint32_t)(s->inlen - at) : p->o.block;
		uint32_t len;
		bool stored;

		if (p->o.codec == PK_GZIP) {
			s->err = bgzf_member(p, w, s->in + at, n, s->out + pos, &stored, &len);
			if (s->err)
				return;
		} else if (p->o.codec == PK_ZSTD) {
			s->err = zstd_frame(p, w, s->in + at, n, s->out + pos, &len);
			if (s->err)
				return;
			s->csum[s->nblk] = bfs_zstd_xxh64_low(s->in + at, n);
			stored = false; /* zstd stores raw blocks itself */
		} else {
			len = lz4_block(p, w, s->in + at, n, s->out + pos, &stored);
		}
		s->clen[s->nblk] = len;
		s->usize[s->nblk] = n;
		s->nblk++;
		s->nstored += stored;
		pos += len;
	}
	s->outlen = pos;
}

static void *worker_main(void *arg)
{
	struct pk_pool *p = arg;
	struct worker w = { 0 };
	int err = 0;

	if (p->o.codec == PK_GZIP) {
		if (p->o.level > 0) {
#if HAVE_LIBDEFLATE
			w.ld = libdeflate_alloc_compressor(p->o.level);
			err = w.ld ? 0 : -ENOMEM;
#else
			/* raw deflate, 32 KiB window, bgzip's parameters */
			err = deflateInit2(&w.z, p->o.level, Z_DEFLATED, -15, 8,
					   Z_DEFAULT_STRATEGY) == Z_OK ?
				      0 :
				      -ENOMEM;
			w.zinit = err == 0;
#endif
		}
	} else if (p->o.codec == PK_ZSTD) {
		w.zc = ZSTD_createCCtx();
		if (!w.zc ||
		    ZSTD_isError(
			    ZSTD_CCtx_setParameter(w.zc, ZSTD_c_compressionLevel, p->o.level)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(w.zc, ZSTD_c_checksumFlag, 1)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(w.zc, ZSTD_c_contentSizeFlag, 1)))
			err = -ENOMEM;
	} else {
		bool hc = p->o.codec == PK_LZ4HC || p->o.level >= 3;

		w.lz4 = malloc(hc ? (size_t)LZ4_sizeofStateHC() : (size_t)LZ4_sizeofState());
		if (!w.lz4)
			err = -ENOMEM;
	}

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct slot *s;

		while (!p->quit && p->qlen == 0)
			pthread_cond_wait(&p->work, &p->lock);
		if (p->quit)
			break;
		s = &p->slots[p->queue[p->qhead]];
		p->qhead = (p->qhead + 1) % p->nslots;
		p->qlen--;
		pthread_mutex_unlock(&p->lock);
		if (err)
			s->err = err;
		else
			compress_slot(p, &w, s);
		pthread_mutex_lock(&p->lock);
		s->state = SLOT_DONE;
		pthread_cond_broadcast(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
#if HAVE_LIBDEFLATE
	libdeflate_free_compressor(w.ld);
#else
	if (w.zinit)
		deflateEnd(&w.z);
#endif
	free(w.lz4);
	ZSTD_freeCCtx(w.zc);
	return NULL;
}

/* ---- the pool ---- */

static uint32_t lz4_bmax(uint32_t block)
{
	uint32_t bmax = 64u << 10;

	while (bmax < block)
		bmax <<= 2;
	return bmax; /* block <= 4 MiB: checked by the caller */
}

int pk_pool_new(struct pk_pool **out, const struct pk_opts *o)
{
	struct pk_pool *p = calloc(1, sizeof(*p));
	sigset_t all, old;
	int rc = -ENOMEM;

	if (!p)
		return -ENOMEM;
	p->o = *o;
	if (p->o.threads == 0)
		p->o.threads = 1;
	if (o->codec == PK_XZ) {
		*out = p; /* liblzma's encoder brings its own threads */
		return 0;
	}
	p->per_chunk = CHUNK_TARGET / o->block ? CHUNK_TARGET / o->block : 1;
	p->chunk = (size_t)p->per_chunk * o->block;
	if (o->codec == PK_GZIP) {
		p->blkcap = BGZF_MEMBER_MAX;
	} else if (o->codec == PK_ZSTD) {
		p->blkcap = ZSTD_compressBound(o->block);
	} else {
		p->bmax = lz4_bmax(o->block);
		p->blkcap = LZ4_BLK_HDR + o->block + LZ4_BLK_CSUM;
	}
	p->outcap = p->blkcap * p->per_chunk;
	p->nslots = 2 * p->o.threads;
	p->slots = calloc(p->nslots, sizeof(*p->slots));
	p->queue = calloc(p->nslots, sizeof(*p->queue));
	p->th = calloc(p->o.threads, sizeof(*p->th));
	if (!p->slots || !p->queue || !p->th)
		goto out_free;
	for (unsigned int i = 0; i < p->nslots; i++) {
		struct slot *s = &p->slots[i];

		s->in = malloc(p->chunk);
		s->out = malloc(p->outcap);
		s->clen = calloc(p->per_chunk, sizeof(*s->clen));
		s->usize = calloc(p->per_chunk, sizeof(*s->usize));
		s->csum = calloc(p->per_chunk, sizeof(*s->csum));
		if (!s->in || !s->out || !s->clen || !s->usize || !s->csum)
			goto out_free;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);

	/* Workers take no signals: the main thread's handler cleans up. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (p->nth = 0; p->nth < p->o.threads; p->nth++) {
		rc = -pthread_create(&p->th[p->nth], NULL, worker_main, p);
		if (rc < 0)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (p->nth == 0)
		goto out_free;
	*out = p;
	return 0;

out_free:
	pk_pool_free(p);
	return rc;
}

void pk_pool_free(struct pk_pool *p)
{
	if (!p)
		return;
	if (p->nth) {
		pthread_mutex_lock(&p->lock);
		p->quit = true;
		pthread_cond_broadcast(&p->work);
		pthread_mutex_unlock(&p->lock);
		for (unsigned int i = 0; i < p->nth; i++)
			pthread_join(p->th[i], NULL);
		pthread_mutex_destroy(&p->lock);
		pthread_cond_destroy(&p->work);
		pthread_cond_destroy(&p->done);
	}
	for (unsigned int i = 0; p->slots && i < p->nslots; i++) {
		free(p->slots[i].in);
		free(p->slots[i].out);
		free(p->slots[i].clen);
		free(p->slots[i].usize);
		free(p->slots[i].csum);
	}
	free(p->slots);
	free(p->queue);
	free(p->th);
	free(p);
}

/* ---- the writing side ---- */

static int read_full(int fd, uint8_t *buf, size_t len, size_t *got)
{
	*got = 0;
	while (*got < len) {
		ssize_t n = read(fd, buf + *got, len - *got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		*got += (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *b = buf;

	while (len > 0) {
		ssize_t n = write(fd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * A growing table of fixed-size records after a header of @hdr bytes that
 * is filled in at the end: the .gzi (count, then (compressed,
 * uncompressed) offset pairs), or the zstd seek table (skippable frame
 * header, then entries; the footer is added at the end).
 */
struct table {
	uint8_t *buf;
	size_t len, cap;
	uint64_t n;
	bool overflow;
};

/* Room for @len more bytes; false (and sticky overflow) when out of memory. */
static bool table_room(struct table *t, size_t hdr, size_t len)
{
	if (t->overflow)
		return false;
	if (t->len == 0)
		t->len = hdr;
	if (t->len + len > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		uint8_t *nb;

		while (cap < t->len + len)
			cap *= 2;
		nb = realloc(t->buf, cap);
		if (!nb) {
			t->overflow = true;
			return false;
		}
		t->buf = nb;
		t->cap = cap;
	}
	return true;
}

static void gzi_add(struct table *g, uint64_t coff, uint64_t uoff)
{
	if (!table_room(g, 8, 16))
		return;
	bfs_put_le64(g->buf + g->len, coff);
	bfs_put_le64(g->buf + g->len + 8, uoff);
	g->len += 16;
	g->n++;
}

static void zseek_add(struct table *t, uint32_t clen, uint32_t usize, uint32_t csum)
{
	if (!table_room(t, ZSEEK_HDR_LEN, ZSEEK_ENTRY_LEN))
		return;
	bfs_put_le32(t->buf + t->len, clen);
	bfs_put_le32(t->buf + t->len + 4, usize);
	bfs_put_le32(t->buf + t->len + 8, csum);
	t->len += ZSEEK_ENTRY_LEN;
	t->n++;
}

struct run {
	struct pk_pool *p;
	int out;
	uint64_t coff, uoff;
	struct bfs_seektable_writer st;
	struct bfs_xxh32 content; /* LZ4 with checksums: XXH32 of every input byte */
	struct table gzi;	  /* BGZF: the .gzi; zstd: the seek table */
	struct pk_result *res;
};

/* Write a finished slot and record its blocks in the index being built. */
static int emit(struct run *r, struct slot *s)
{
	struct pk_pool *p = r->p;
	int rc = write_full(r->out, s->out, s->outlen);

	if (rc < 0)
		return rc;
	if ((p->o.codec == PK_LZ4 || p->o.codec == PK_LZ4HC) && p->o.csum)
		bfs_xxh32_update(&r->content, s->in, s->inlen);
	for (uint32_t i = 0; i < s->nblk; i++) {
		if (p->o.codec == PK_GZIP) {
			if (r->res->blocks > 0)
				gzi_add(&r->gzi, r->coff, r->uoff);
		} else if (p->o.codec == PK_ZSTD) {
			zseek_add(&r->gzi, s->clen[i], s->usize[i], s->csum[i]);
		} else if (r->res->blocks < BFS_INDEX_MAX_BLOCKS) {
			struct bfs_seektable_entry e = { .coff = r->coff,
							 .clen = s->clen[i],
							 .usize = s->usize[i],
							 .bmax = p->bmax,
							 .csum = p->o.csum };

			/* sticky; checked at the end */
			(void)bfs_seektable_writer_add(&r->st, &e);
		}
		r->coff += s->clen[i];
		r->uoff += s->usize[i];
		r->res->blocks++;
	}
	r->res->stored += s->nstored;
	r->res->out_bytes = r->coff;
	return 0;
}

static int lz4_head(struct run *r)
{
	uint8_t h[LZ4_HDR_LEN];
	unsigned int id = 4;

	while ((1u << (8 + 2 * id)) < r->p->bmax)
		id++;
	bfs_put_le32(h, LZ4_MAGIC);
	h[4] = (uint8_t)(FLG_VERSION | FLG_B_INDEP | (r->p->o.csum ? FLG_B_CSUM | FLG_C_CSUM : 0));
	h[5] = (uint8_t)(id << BD_ID_SHIFT);
	h[6] = (uint8_t)(bfs_xxh32(h + 4, 2, 0) >> 8);
	r->coff = sizeof(h);
	return write_full(r->out, h, sizeof(h));
}

static int lz4_tail(struct run *r)
{
	uint8_t end[LZ4_ENDMARK_LEN + LZ4_CONTENT_CSUM] = { 0 }; /* EndMark: 0 */
	size_t endlen = LZ4_ENDMARK_LEN;
	const uint8_t *tab;
	size_t len;
	int rc;

	if (r->p->o.csum) {
		bfs_put_le32(end + LZ4_ENDMARK_LEN, bfs_xxh32_digest(&r->content));
		endlen += LZ4_CONTENT_CSUM;
	}
	rc = write_full(r->out, end, endlen);
	if (rc < 0)
		return rc;
	r->coff += endlen;
	/* Past the index's limit blockfs would refuse the table: write none. */
	if (r->res->blocks > BFS_INDEX_MAX_BLOCKS ||
	    bfs_seektable_writer_finish(&r->st, r->coff, r->p->o.block, &tab, &len) < 0) {
		r->res->out_bytes = r->coff;
		return 0;
	}
	rc = write_full(r->out, tab, len);
	if (rc < 0)
		return rc;
	r->coff += len;
	r->res->out_bytes = r->coff;
	r->res->indexed = true;
	return 0;
}

/*
 * After the last frame, the seek table; for an empty input first one
 * empty frame, so that the file is a zstd file to every reader (a file
 * of skippable frames only is not one to blockfs's probe).
 */
static int zstd_tail(struct run *r)
{
	struct table *t = &r->gzi;
	int rc;

	if (r->res->blocks == 0) {
		uint8_t f[32];
		size_t c = ZSTD_compress(f, sizeof(f), "", 0, r->p->o.level);

		if (ZSTD_isError(c))
			return -EIO;
		rc = write_full(r->out, f, c);
		if (rc < 0)
			return rc;
		zseek_add(t, (uint32_t)c, 0, bfs_zstd_xxh64_low("", 0));
		r->coff += c;
		r->res->blocks = 1;
		r->res->out_bytes = r->coff;
	}
	/* Past the index's limit blockfs would refuse the table: write none. */
	if (r->res->blocks > BFS_INDEX_MAX_BLOCKS ||
	    !table_room(t, ZSEEK_HDR_LEN, ZSEEK_FOOTER_LEN))
		return 0;
	bfs_put_le32(t->buf + t->len, (uint32_t)t->n);
	t->buf[t->len + 4] = ZSEEK_CSUM_FLAG;
	bfs_put_le32(t->buf + t->len + 5, ZSEEK_FOOTER_MAGIC);
	t->len += ZSEEK_FOOTER_LEN;
	bfs_put_le32(t->buf, ZSEEK_SKIP_MAGIC);
	bfs_put_le32(t->buf + 4, (uint32_t)(t->len - ZSEEK_HDR_LEN));
	rc = write_full(r->out, t->buf, t->len);
	if (rc < 0)
		return rc;
	r->coff += t->len;
	r->res->out_bytes = r->coff;
	r->res->indexed = true;
	return 0;
}

static int bgzf_tail(struct run *r, int gzi)
{
	int rc = write_full(r->out, bgzf_eof, sizeof(bgzf_eof));

	if (rc < 0)
		return rc;
	r->coff += sizeof(bgzf_eof);
	r->res->out_bytes = r->coff;
	if (gzi < 0 || r->gzi.overflow || r->gzi.n >= BFS_INDEX_MAX_BLOCKS)
		return 0;
	if (r->gzi.len == 0) {
		/* no pairs: just the count, 0 */
		uint8_t zero[8] = { 0 };

		rc = write_full(gzi, zero, sizeof(zero));
	} else {
		bfs_put_le64(r->gzi.buf, r->gzi.n);
		rc = write_full(gzi, r->gzi.buf, r->gzi.len);
	}
	if (rc < 0)
		return rc;
	r->res->indexed = true;
	return 0;
}

/* ---- xz ---- */

static int xz_errno(lzma_ret ret)
{
	return ret == LZMA_MEM_ERROR || ret == LZMA_MEMLIMIT_ERROR ? -ENOMEM : -EIO;
}

/* All of @in through liblzma's multithreaded encoder into @out. */
static int xz_run(struct pk_pool *p, int in, int out, struct pk_result *res, pk_tick_fn *tick,
		  void *ctx, const char **side)
{
	lzma_options_lzma lz;
	lzma_filter filters[] = {
		{ .id = LZMA_FILTER_LZMA2, .options = &lz },
		{ .id = LZMA_VLI_UNKNOWN, .options = NULL },
	};
	lzma_mt mt = {
		.threads = p->o.threads,
		.block_size = p->o.block,
		.filters = filters,
		.check = LZMA_CHECK_CRC64,
	};
	lzma_stream z = LZMA_STREAM_INIT;
	uint8_t *ibuf = malloc(XZ_IO_CHUNK), *obuf = malloc(XZ_IO_CHUNK);
	lzma_action action = LZMA_RUN;
	lzma_ret ret;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	*side = "write";
	if (!ibuf || !obuf || lzma_lzma_preset(&lz, (uint32_t)p->o.level)) {
		rc = -ENOMEM;
		goto out;
	}
	if (lz.dict_size > p->o.block)
		lz.dict_size = p->o.block < LZMA_DICT_SIZE_MIN ? LZMA_DICT_SIZE_MIN : p->o.block;
	ret = lzma_stream_encoder_mt(&z, &mt);
	if (ret != LZMA_OK) {
		rc = xz_errno(ret);
		goto out;
	}
	z.next_out = obuf;
	z.avail_out = XZ_IO_CHUNK;
	for (;;) {
		if (z.avail_in == 0 && action == LZMA_RUN) {
			size_t got;

			rc = read_full(in, ibuf, XZ_IO_CHUNK, &got);
			if (rc < 0) {
				*side = "read";
				goto out_end;
			}
			if (got < XZ_IO_CHUNK)
				action = LZMA_FINISH;
			z.next_in = ibuf;
			z.avail_in = got;
			res->in_bytes += got;
		}
		ret = lzma_code(&z, action);
		if (ret != LZMA_OK && ret != LZMA_STREAM_END) {
			rc = xz_errno(ret);
			goto out_end;
		}
		if (z.avail_out == 0 || ret == LZMA_STREAM_END) {
			rc = write_full(out, obuf, XZ_IO_CHUNK - z.avail_out);
			if (rc < 0)
				goto out_end;
			z.next_out = obuf;
			z.avail_out = XZ_IO_CHUNK;
			if (tick)
				tick(ctx, z.total_in);
		}
		if (ret == LZMA_STREAM_END)
			break;
	}
	res->out_bytes = z.total_out;
	/* the encoder cuts a block every block_size bytes of input, exactly */
	res->blocks = (res->in_bytes + p->o.block - 1) / p->o.block;
	res->indexed = true;
out_end:
	lzma_end(&z);
out:
	free(ibuf);
	free(obuf);
	return rc;
}

/* Wait until slot number @n (counting from the run's start) is done, and free it. */
static struct slot *take_done(struct pk_pool *p, uint64_t n)
{
	struct slot *s = &p->slots[n % p->nslots];

	pthread_mutex_lock(&p->lock);
	while (s->state != SLOT_DONE)
		pthread_cond_wait(&p->done, &p->lock);
	s->state = SLOT_FREE;
	pthread_mutex_unlock(&p->lock);
	return s;
}

int pk_pool_run(struct pk_pool *p, int in, int out, int gzi, struct pk_result *res,
		pk_tick_fn *tick, void *ctx, const char **side)
{
	struct run r = { .p = p, .out = out, .res = res };
	uint64_t submitted = 0, written = 0;
	bool eof = false;
	int rc = 0;

	if (p->o.codec == PK_XZ)
		return xz_run(p, in, out, res, tick, ctx, side);
	memset(res, 0, sizeof(*res));
	bfs_xxh32_init(&r.content, 0);
	*side = "write";
	if (p->o.codec == PK_LZ4 || p->o.codec == PK_LZ4HC) {
		rc = lz4_head(&r);
		if (rc < 0)
			goto out;
	}
	for (;;) {
		struct slot *s;

		/* Fill every free slot of the ring, in order. */
		while (!eof && submitted - written < p->nslots) {
			size_t got;

			s = &p->slots[submitted % p->nslots];
			rc = read_full(in, s->in, p->chunk, &got);
			if (rc < 0) {
				*side = "read";
				goto drain;
			}
			if (got < p->chunk)
				eof = true;
			if (got == 0)
				break;
			s->inlen = got;
			res->in_bytes += got;
			pthread_mutex_lock(&p->lock);
			s->state = SLOT_QUEUED;
			p->queue[(p->qhead + p->qlen) % p->nslots] =
				(unsigned int)(submitted % p->nslots);
			p->qlen++;
			pthread_cond_signal(&p->work);
			pthread_mutex_unlock(&p->lock);
			submitted++;
		}
		if (written == submitted)
			break;
		/* Then write the oldest one as soon as it is done. */
		s = take_done(p, written++);
		rc = s->err;
		if (rc == 0)
			rc = emit(&r, s);
		if (rc < 0)
			goto drain;
		if (tick)
			tick(ctx, r.uoff);
	}
	if (p->o.codec == PK_GZIP)
		rc = bgzf_tail(&r, gzi);
	else if (p->o.codec == PK_ZSTD)
		rc = zstd_tail(&r);
	else
		rc = lz4_tail(&r);
	goto out;

drain:
	/* Let the workers finish what they hold, so the ring is clean for the next run. */
	while (written < submitted)
		(void)take_done(p, written++);
out:
	bfs_seektable_writer_release(&r.st);
	free(r.gzi.buf);
	return rc;
}
