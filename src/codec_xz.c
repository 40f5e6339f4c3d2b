// SPDX-License-Identifier: MIT
/*
 * xz (the .xz file format of XZ Utils, version 1.1.0 of its specification),
 * decoded with liblzma: probe, the index scan, the decoding of one xz
 * block, and the chained spans of a block too big to decode whole. Knows
 * bytes only: no paths, no cache; its one lock is the leaf lock of a
 * file's pool of parked decoders.
 *
 * A file is one or more streams, each followed by Stream Padding (a
 * multiple of 4 zero bytes):
 *
 *   Stream Header  12  magic fd 37 7a 58 5a 00, flags (2: the check ID), CRC32
 *   Block ...          header (1st byte: size / 4 - 1; filters, optional
 *                      sizes, CRC32), LZMA2 data (behind BCJ or delta
 *                      filters, which keep the length), padding to 4,
 *                      check (none 0, CRC32 4, CRC64 8, SHA-256 32 bytes)
 *   Index              00, record count, {unpadded size, uncompressed
 *                      size} per block, padding, CRC32
 *   Stream Footer  12  CRC32, Backward Size (index bytes / 4 - 1), flags, "YZ"
 *
 * The scan reads the footers from the end of the file backwards: each
 * gives its index's size, the index (checked by liblzma: CRC32, record
 * sizes) gives its stream's size, and the stream header there must agree
 * with the footer's flags. So a first stat costs three or four reads per
 * stream whatever the file's size, and needs no index cache.
 *
 * Each xz block of at most DIRECT_MAX bytes of output is one block of the
 * index (aux: the stream's check ID). Its size comes from the xz index,
 * under a CRC32 but unproven by the data: a size that differs from the
 * one most blocks share (every block but the last, for xz -T, pixz and
 * --block-size files) is measured from its LZMA2 chunk headers before a
 * read relies on where the blocks after it start (xz_measure()), and
 * decode checks the exact length against the index and the block header.
 *
 * A bigger block (xz before 5.6 and xz -T1 make one block of the whole
 * file; xz -T -9 makes blocks of 192 MiB) is served as spans of SPAN
 * bytes of its output, flagged BFS_BLK_CHAIN (include/blockfs/codec.h):
 * span k decodes only by continuing the decoder that decoded span k - 1.
 * Where each span's input starts is known only by decoding, so the scan
 * decodes such a block once (what xz -dc of it costs; no output kept) and
 * records the input position at every SPAN bytes of output. The entries
 * must be exact before the size is shown (index.h), so this cannot wait
 * for a read; the index cache keeps the result for the next mount
 * (xz_cache_load()). Readers then park decoders at span starts in a
 * small pool per file (struct xz_pool, idx->priv), within the mount's
 * budget of parked decoders, which zstd's count against too (park.h,
 * BFS_PARK_BUDGET): a span continues the decoder parked at its start and
 * parks it at the next one. A reader far
 * from any parked decoder starts again at the block's header.
 *
 * Why the recorded positions are exact for a continuation: liblzma's
 * decoders take input only on demand and stop as soon as the output is
 * full, so a decoder fed exactly the bytes [start of span k, start of
 * span k + 1) makes the same steps as the scan's did and ends with that
 * input consumed and SPAN bytes produced; decode checks both.
 *
 * The check: with -o verify (the default) liblzma verifies each block's
 * CRC32/CRC64/SHA-256 after its last byte, so a span before the last one
 * of a chain is served before its block's check is known, as xz -dc
 * writes it; a mismatch fails the last span with EILSEQ. With verify off
 * the check is skipped (ignore_check): SHA-256 costs about as much as
 * LZMA2 decoding itself.
 *
 * Damage: when the backward scan fails (a damaged or missing footer or
 * index, trailing garbage, padding that is not a multiple of 4, a
 * truncated file), the file is walked forwards from its start instead:
 * stream header, block headers (their sizes when they state them, else
 * a decode), index and footer, checked as xz -d checks them; the blocks
 * before the damage are served and the file ends there as broken. A
 * damaged block inside an intact index fails alone (EIO). Damage found
 * while decoding a chained block ends the file at its last good span.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <lzma.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/park.h"
#include "blockfs/spill.h"
#include "blockfs/index.h"
#include "blockfs/io.h"

/* The xz file format, sections 2.1 and 3.1 */
#define XZ_HDR	      LZMA_STREAM_HEADER_SIZE /* stream header and footer: 12 bytes each */
#define XZ_MAGIC_LEN  6
#define XZ_PAD	      4 /* blocks, indexes and stream padding align to 4 */
#define XZ_INDEX_MIN  8 /* indicator, count, CRC32, padded */
#define XZ_STREAM_MIN (2 * XZ_HDR + XZ_INDEX_MIN)

/* Output of one chained span; see the top of this file. */
#define SPAN	       (2u << 20)
/* Largest block decoded whole; bigger ones are chains of spans. */
#define DIRECT_MAX     (64u << 20)
/* Largest index read (a file of 16 Mi blocks has one of about 100 MiB). */
#define INDEX_MAX      (128u << 20)
/* Memory liblzma may keep for one index. */
#define INDEX_MEMLIMIT (1ull << 30)
/* Memory one block's decoder may take: xz's largest dictionary, 1.5 GiB, and its state. */
#define DEC_MEM_MAX    ((1536ull + 64) << 20)
/* Parked decoders per file (at least one is kept, whatever the budget). */
#define POOL_SLOTS     4
/* Input read at a time when a block is decoded during the scan. */
#define WALK_CHUNK     (1u << 20)
/* Output buffer of the scan's decodes, and of decoding the rest of a span after a prefix. */
#define SCRATCH	       (256u << 10)

/* aux of an index entry */
#define AUX_CHECK 0x0fu /* the stream's check ID */
#define AUX_FIRST 0x10u /* chain: the span that starts the xz block (its header) */
#define AUX_LAST  0x20u /* chain: the span that ends it (padding and check) */

/*
 * The bounds in use: DIRECT_MAX and SPAN, unless a test set smaller ones
 * (bfs_codec_xz_limits()) to reach chains with small files.
 */
static uint32_t direct_max = DIRECT_MAX;
static uint32_t span_len = SPAN;
static uint64_t dec_mem_max = DEC_MEM_MAX;

/*
 * For tests and fuzzing only, before any scan: blocks over @direct bytes
 * of output become chains of @span-byte spans, and a decoder may take 64
 * MiB (a fuzzer's malloc limit); 0, 0 restores the defaults. Declared
 * here, not in a header: nothing else may call it.
 */
void bfs_codec_xz_limits(uint32_t direct, uint32_t span);
void bfs_codec_xz_limits(uint32_t direct, uint32_t span)
{
	direct_max = direct ? direct : DIRECT_MAX;
	span_len = span ? span : SPAN;
	dec_mem_max = direct ? 64u << 20 : DEC_MEM_MAX;
}

static const uint8_t xz_magic[XZ_MAGIC_LEN] = { 0xfd, '7', 'z', 'X', 'Z', 0x00 };

/* Magic, and flags whose reserved bits are zero (section 2.1.1.2). */
static bool xz_probe(const uint8_t *head, size_t len)
{
	return len >= XZ_HDR && memcmp(head, xz_magic, XZ_MAGIC_LEN) == 0 && head[6] == 0 &&
	       (head[7] & 0xf0) == 0;
}

/* ---- one block's decoder ---- */

/* A block decoder and what it points into, which must live as long as it. */
struct dec {
	lzma_stream strm;
	lzma_block block;
	lzma_filter filters[LZMA_FILTERS_MAX + 1];
	uint64_t mem;	/* what liblzma says it uses */
	size_t at;	/* parked: the span it is ready to decode */
	uint64_t tick;	/* parked: when, for eviction */
	uint64_t in_at; /* open chains: the file offset of its next input byte */
};

static void filters_free(lzma_filter *f)
{
	for (size_t i = 0; i < LZMA_FILTERS_MAX && f[i].id != LZMA_VLI_UNKNOWN; i++) {
		free(f[i].options);
		f[i].options = NULL;
	}
}

/*
 * Parse the block header at @src (@avail bytes) into @block and @filters
 * for a stream whose check is @check. The dictionary is cut to @usize
 * when that is known (not UINT64_MAX): a block's LZMA2 data starts with
 * a dictionary reset, so it never reaches further back than its own
 * output, and a header that states 1.5 GiB for a 1 MiB block costs 1 MiB.
 * Return: 0 with *@mem; -EBADMSG with *@why (@filters freed).
 */
static int parse_block_header(const uint8_t *src, size_t avail, unsigned int check, uint64_t usize,
			      lzma_block *block, lzma_filter *filters, uint64_t *mem,
			      const char **why)
{
	memset(block, 0, sizeof(*block));
	filters[0].id = LZMA_VLI_UNKNOWN;
	if (avail < 1 || src[0] == 0x00) {
		*why = "no block header where the index puts a block";
		return -EBADMSG;
	}
	block->version = 1;
	block->check = (lzma_check)check;
	block->header_size = lzma_block_header_size_decode(src[0]);
	block->filters = filters;
	if (block->header_size > avail) {
		*why = "block header runs past the block";
		return -EBADMSG;
	}
	if (!lzma_check_is_supported(block->check)) {
		*why = "unsupported integrity check type";
		return -EBADMSG;
	}
	if (lzma_block_header_decode(block, NULL, src) != LZMA_OK) {
		*why = "corrupt or unsupported block header";
		return -EBADMSG;
	}
	for (size_t i = 0; i < LZMA_FILTERS_MAX && filters[i].id != LZMA_VLI_UNKNOWN; i++) {
		if (filters[i].id == LZMA_FILTER_LZMA2 && usize != UINT64_MAX) {
			lzma_options_lzma *o = filters[i].options;
			uint64_t want = usize < LZMA_DICT_SIZE_MIN ? LZMA_DICT_SIZE_MIN : usize;

			if (o->dict_size > want)
				o->dict_size = (uint32_t)want;
		}
	}
	*mem = lzma_raw_decoder_memusage(filters);
	if (*mem == UINT64_MAX || *mem > dec_mem_max) {
		filters_free(filters);
		*why = "block needs more memory to decode than blockfs allows (1.6 GiB)";
		return -EBADMSG;
	}
	return 0;
}

static void dec_free(struct dec *d)
{
	if (!d)
		return;
	lzma_end(&d->strm);
	filters_free(d->filters);
	free(d);
}

/* liblzma's memory: its dictionaries (8 MiB at xz's default level) are big buffers. */
static void *xz_alloc(void *opaque, size_t nmemb, size_t size)
{
	(void)opaque;
	return size && nmemb > SIZE_MAX / size ? NULL : bfs_big_malloc(nmemb * size);
}

static void xz_free(void *opaque, void *p)
{
	(void)opaque;
	free(p);
}

static const lzma_allocator xz_allocator = { .alloc = xz_alloc, .free = xz_free };

/*
 * A decoder for the block whose header is at @src, ready for the bytes
 * after its header. @usize: the block's output if known, else UINT64_MAX
 * (it then decodes to what its data holds).
 * Return: 0 with *@out; -EBADMSG (with *@why) or -ENOMEM.
 */
static int dec_start(const uint8_t *src, size_t avail, unsigned int check, uint64_t usize,
		     bool verify, struct dec **out, const char **why)
{
	struct dec *d = calloc(1, sizeof(*d));
	lzma_ret lr;
	int rc;

	if (!d) {
		*why = "no memory for a decoder";
		return -ENOMEM;
	}
	rc = parse_block_header(src, avail, check, usize, &d->block, d->filters, &d->mem, why);
	if (rc < 0) {
		free(d);
		return rc;
	}
	d->block.ignore_check = !verify;
	if (usize != UINT64_MAX) {
		if (d->block.uncompressed_size != LZMA_VLI_UNKNOWN &&
		    d->block.uncompressed_size != usize) {
			*why = "block header and index disagree on the block's size";
			dec_free(d);
			return -EBADMSG;
		}
		d->block.uncompressed_size = usize;
	}
	d->strm = (lzma_stream)LZMA_STREAM_INIT;
	d->strm.allocator = &xz_allocator;
	lr = lzma_block_decoder(&d->strm, &d->block);
	if (lr != LZMA_OK) {
		*why = lr == LZMA_MEM_ERROR ? "no memory for a decoder" :
					      "unsupported block filters";
		rc = lr == LZMA_MEM_ERROR ? -ENOMEM : -EBADMSG;
		dec_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

/*
 * Decode into [@out, @out + @n) from @d's next input (strm.next_in /
 * avail_in set by the caller). Return: the last lzma_ret; *@got bytes.
 */
static lzma_ret dec_run(struct dec *d, uint8_t *out, size_t n, size_t *got)
{
	lzma_ret lr = LZMA_OK;

	d->strm.next_out = out;
	d->strm.avail_out = n;
	while (d->strm.avail_out > 0) {
		size_t before_in = d->strm.avail_in, before_out = d->strm.avail_out;

		lr = lzma_code(&d->strm, LZMA_RUN);
		if (lr != LZMA_OK)
			break;
		if (d->strm.avail_in == before_in && d->strm.avail_out == before_out)
			break; /* no progress: the input is exhausted */
	}
	*got = n - d->strm.avail_out;
	return lr;
}

/* ---- the pool of parked decoders: idx->priv ---- */

struct xz_pool {
	pthread_mutex_t lock;	      /* a leaf lock: nothing is taken under it */
	struct dec *slot[POOL_SLOTS]; /* protected by lock */
	uint64_t tick;		      /* protected by lock */
	int *proof;		      /* open chains: per block, at a chain's first span: 0
					 * unknown, 1 proven, else the -errno it failed with;
					 * NULL without open chains; protected by lock */
	size_t n;		      /* entries of proof and spill */
	struct bfs_spill **spill;     /* per block, at a proven open chain's first span: its
					 * output (spill.h), or NULL; set once, under lock;
					 * freed with the pool */
};

static void pool_free(void *p)
{
	struct xz_pool *pool = p;

	for (size_t i = 0; i < POOL_SLOTS; i++) {
		if (pool->slot[i])
			bfs_park_release(pool->slot[i]->mem);
		dec_free(pool->slot[i]);
	}
	pthread_mutex_destroy(&pool->lock);
	if (pool->spill)
		for (size_t k = 0; k < pool->n; k++)
			bfs_spill_drop(pool->spill[k]);
	free(pool->spill);
	free(pool->proof);
	free(pool);
}

static int pool_attach(struct bfs_index *idx)
{
	struct xz_pool *pool = calloc(1, sizeof(*pool));
	bool open = false;

	for (size_t k = 0; k < idx->n && !open; k++)
		open = idx->blk[k].flags & BFS_BLK_OPEN;
	if (!pool || (open && (!(pool->proof = calloc(idx->n, sizeof(*pool->proof))) ||
			       !(pool->spill = calloc(idx->n, sizeof(*pool->spill)))))) {
		if (pool)
			free(pool->proof);
		free(pool);
		return -ENOMEM;
	}
	pool->n = open ? idx->n : 0;
	bfs_mutex_init(&pool->lock);
	idx->priv = pool;
	idx->priv_free = pool_free;
	idx->priv_bytes =
		sizeof(*pool) + (open ? idx->n * (sizeof(*pool->proof) + sizeof(*pool->spill)) : 0);
	return 0;
}

/* The decoder parked at span @k, taken out of the pool; NULL if none. */
static struct dec *pool_take(struct xz_pool *pool, size_t k)
{
	struct dec *d = NULL;

	bfs_mutex_lock(&pool->lock);
	for (size_t i = 0; i < POOL_SLOTS; i++) {
		if (pool->slot[i] && pool->slot[i]->at == k) {
			d = pool->slot[i];
			pool->slot[i] = NULL;
			bfs_park_release(d->mem);
			break;
		}
	}
	bfs_mutex_unlock(&pool->lock);
	return d;
}

/*
 * Park @d at span @k: in a free slot, else in place of the decoder
 * parked longest ago; and while the mount's parked decoders would be
 * over its budget, the oldest others of this file go too.
 */
static void pool_park(struct xz_pool *pool, struct dec *d, size_t k)
{
	struct dec *gone[POOL_SLOTS + 1];
	size_t ngone = 0;

	d->at = k;
	bfs_mutex_lock(&pool->lock);
	d->tick = ++pool->tick;
	for (size_t i = 0; i < POOL_SLOTS; i++) {
		if (pool->slot[i] && pool->slot[i]->at == k) {
			gone[ngone++] = d; /* another reader parked one there already */
			d = NULL;
			break;
		}
	}
	for (;;) {
		size_t oldest = POOL_SLOTS, used = 0, free_slot = POOL_SLOTS;

		for (size_t i = 0; i < POOL_SLOTS; i++) {
			if (!pool->slot[i]) {
				free_slot = i;
				continue;
			}
			used++;
			if (oldest == POOL_SLOTS || pool->slot[i]->tick < pool->slot[oldest]->tick)
				oldest = i;
		}
		if (!d ||
		    (free_slot < POOL_SLOTS && (!bfs_park_over((size_t)d->mem) || used == 0))) {
			if (d) {
				pool->slot[free_slot] = d;
				bfs_park_charge((size_t)d->mem);
			}
			break;
		}
		bfs_park_release((size_t)pool->slot[oldest]->mem);
		gone[ngone++] = pool->slot[oldest];
		pool->slot[oldest] = NULL;
	}
	bfs_mutex_unlock(&pool->lock);
	for (size_t i = 0; i < ngone; i++)
		dec_free(gone[i]);
}

/* The first span of the chain that holds span @k. */
static size_t chain_first(const struct bfs_index *idx, size_t k)
{
	while (k > 0 && !(idx->blk[k].aux & AUX_FIRST))
		k--;
	return k;
}

/* The spill of the proven open chain whose first span is @k0, or NULL. */
static struct bfs_spill *spill_of(struct xz_pool *pool, size_t k0)
{
	struct bfs_spill *s;

	if (!pool->spill)
		return NULL;
	bfs_mutex_lock(&pool->lock);
	s = pool->spill[k0];
	bfs_mutex_unlock(&pool->lock);
	return s;
}

static bool xz_chain_head(const struct bfs_blk *b)
{
	return b->aux & AUX_FIRST;
}

static size_t xz_resume(const struct bfs_index *idx, size_t k)
{
	struct xz_pool *pool = idx->priv;
	struct bfs_spill *s;
	size_t best;

	if (!(idx->blk[k].flags & BFS_BLK_CHAIN) || !pool)
		return k;
	best = chain_first(idx, k);
	/* a spilled chain is read where it is wanted: no decoder needed */
	s = idx->blk[k].flags & BFS_BLK_OPEN ? spill_of(pool, best) : NULL;
	if (s && bfs_spill_live(s))
		return k;
	bfs_mutex_lock(&pool->lock);
	for (size_t i = 0; i < POOL_SLOTS; i++) {
		const struct dec *d = pool->slot[i];

		if (d && d->at <= k && d->at > best)
			best = d->at;
	}
	bfs_mutex_unlock(&pool->lock);
	return best;
}

/* ---- decode ---- */

/*
 * Decode the first @n bytes of block @b (one whole xz block) from @src.
 * With @n < usize the data is not finished, so no check is verified.
 */
static int direct_decode(const struct bfs_blk *b, const uint8_t *src, uint8_t *dst, uint32_t n,
			 bool verify, const char **why)
{
	struct dec *d;
	size_t got;
	lzma_ret lr;
	int rc;

	rc = dec_start(src, b->clen, b->aux & AUX_CHECK, b->usize, verify, &d, why);
	if (rc < 0)
		return rc;
	if (d->block.compressed_size != LZMA_VLI_UNKNOWN &&
	    lzma_block_total_size(&d->block) != b->clen) {
		*why = "block header and index disagree on the block's length";
		dec_free(d);
		return -EBADMSG;
	}
	d->strm.next_in = src + d->block.header_size;
	d->strm.avail_in = b->clen - d->block.header_size;
	lr = dec_run(d, dst, n, &got);
	if (n < b->usize) {
		rc = lr == LZMA_OK && got == n ? 0 : -EBADMSG;
		*why = "corrupt or truncated xz block";
		dec_free(d);
		return rc;
	}
	if (lr == LZMA_OK && got == n) {
		/* all output is there: the rest is the end marker, padding and check */
		uint8_t none;

		lr = dec_run(d, &none, 1, &got);
		if (lr == LZMA_OK && got == 0)
			lr = LZMA_BUF_ERROR;
	}
	rc = 0;
	if (lr == LZMA_STREAM_END && d->strm.total_out != b->usize)
		lr = LZMA_DATA_ERROR;
	if (lr != LZMA_STREAM_END) {
		rc = -EBADMSG;
		*why = lr == LZMA_DATA_ERROR ? "corrupt xz block" :
		       got < n		     ? "xz block shorter than its index says" :
					       "truncated xz block";
		/* the check is read last, and whole: a mismatch leaves no input */
		if (verify && lr == LZMA_DATA_ERROR && d->strm.avail_in == 0 &&
		    d->strm.total_out == b->usize && d->block.check != LZMA_CHECK_NONE) {
			rc = -EILSEQ;
			*why = "xz block check mismatch";
		}
	} else if (d->strm.avail_in != 0) {
		rc = -EBADMSG;
		*why = "bytes after the xz block's check";
	}
	dec_free(d);
	return rc;
}

/*
 * Output of the chain that starts at span @first: the sum of its spans;
 * UINT64_MAX for the good spans of a damaged block, which have no last.
 */
static uint64_t chain_usize(const struct bfs_index *idx, size_t first)
{
	uint64_t sum = 0;

	for (size_t k = first; k < idx->n && (idx->blk[k].flags & BFS_BLK_CHAIN); k++) {
		if (k > first && (idx->blk[k].aux & AUX_FIRST))
			break;
		sum += idx->blk[k].usize;
		if (idx->blk[k].aux & AUX_LAST)
			return sum;
	}
	return UINT64_MAX;
}

/*
 * Span @k of a chain: continue the decoder parked at its start (or start
 * one at the block's header), decode its usize bytes (the first @n into
 * @dst, the rest into a scratch buffer), and park it at the next span.
 */
static int chain_decode(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
			uint32_t n, bool verify, const char **why)
{
	const struct bfs_blk *b = &idx->blk[k];
	struct xz_pool *pool = idx->priv;
	uint8_t *scratch = NULL;
	size_t got, done;
	struct dec *d;
	lzma_ret lr;
	int rc;

	if (!pool) {
		*why = "chained block without its decoder pool";
		return -EBADMSG;
	}
	d = pool_take(pool, k);
	if (d) {
		d->strm.next_in = src;
		d->strm.avail_in = b->clen;
	} else if (b->aux & AUX_FIRST) {
		rc = dec_start(src, b->clen, b->aux & AUX_CHECK, chain_usize(idx, k), verify, &d,
			       why);
		if (rc < 0)
			return rc;
		d->strm.next_in = src + d->block.header_size;
		d->strm.avail_in = b->clen - d->block.header_size;
	} else {
		*why = "no decoder parked at this span";
		return -EAGAIN;
	}
	lr = dec_run(d, dst, n, &got);
	done = got;
	if (lr == LZMA_OK && got == n && n < b->usize) {
		scratch = malloc(SCRATCH);
		if (!scratch) {
			dec_free(d);
			*why = "no memory to finish a span";
			return -ENOMEM;
		}
		while (lr == LZMA_OK && done < b->usize) {
			size_t want = b->usize - done < SCRATCH ? b->usize - done : SCRATCH;

			lr = dec_run(d, scratch, want, &got);
			done += got;
			if (got < want)
				break;
		}
		free(scratch);
	}
	rc = 0;
	if (b->aux & AUX_LAST) {
		if (lr == LZMA_OK && done == b->usize) {
			uint8_t none;

			lr = dec_run(d, &none, 1, &got);
			if (lr == LZMA_OK)
				lr = LZMA_BUF_ERROR;
		}
		if (lr != LZMA_STREAM_END) {
			rc = -EBADMSG;
			*why = lr == LZMA_DATA_ERROR ? "corrupt xz block" : "truncated xz block";
			if (verify && lr == LZMA_DATA_ERROR && d->strm.avail_in == 0 &&
			    done == b->usize && d->block.check != LZMA_CHECK_NONE) {
				rc = -EILSEQ;
				*why = "xz block check mismatch";
			}
		} else if (done != b->usize || d->strm.avail_in != 0) {
			rc = -EBADMSG;
			*why = "xz block ends elsewhere than its last span";
		}
		dec_free(d);
		return rc;
	}
	if (lr != LZMA_OK || done != b->usize || d->strm.avail_in != 0) {
		*why = lr == LZMA_DATA_ERROR ? "corrupt xz block" :
		       lr == LZMA_STREAM_END ? "xz block ends inside a span" :
					       "span's input does not match its output";
		dec_free(d);
		return lr == LZMA_MEM_ERROR ? -ENOMEM : -EBADMSG;
	}
	pool_park(pool, d, k + 1);
	return 0;
}

/* ---- open chains ---- */

/*
 * With -o verify an open chain is decoded whole once, its check and sizes
 * checked, before the first of its bytes is served (prove()); its output
 * goes to the spill (spill.h, -o spill_size) when that has room, and the
 * spans are then read from there instead of being decoded again. A chain
 * the spill cannot take, or whose spill is dropped, is decoded span by
 * span from parked decoders, as without one.
 */

/*
 * The input of an open chain (BFS_BLK_OPEN: its block's sizes came from
 * the xz index, and no walk said where each span's input starts): the
 * whole block from @src, or through @io in pieces of WALK_CHUNK.
 */
struct feed {
	const uint8_t *src; /* the block's bytes, or NULL */
	struct bfs_io *io;
	uint8_t *buf;	    /* WALK_CHUNK bytes, with @io */
	uint64_t coff, end; /* the block: [coff, end) of the file */
	uint64_t at;	    /* the file offset of buf's (or src's) first byte in use */
};

/* Give @d input from file offset @pos on. Return: 0; -EBADMSG past the block's end; -errno. */
static int feed_at(struct feed *f, struct dec *d, uint64_t pos, const char **why)
{
	size_t n;
	int rc;

	if (pos >= f->end) {
		*why = "truncated xz block";
		return -EBADMSG;
	}
	f->at = pos;
	if (f->src) {
		d->strm.next_in = f->src + (pos - f->coff);
		d->strm.avail_in = f->end - pos;
		return 0;
	}
	n = f->end - pos < WALK_CHUNK ? (size_t)(f->end - pos) : WALK_CHUNK;
	rc = bfs_io_read(f->io, f->buf, n, pos);
	if (rc < 0) {
		*why = "read failed";
		return rc;
	}
	d->strm.next_in = f->buf;
	d->strm.avail_in = n;
	return 0;
}

/* Where @d's next input byte lies in the file. */
static uint64_t fed_to(const struct feed *f, const struct dec *d)
{
	const uint8_t *base = f->src ? f->src + (f->at - f->coff) : f->buf;

	return f->at + (uint64_t)(d->strm.next_in - base);
}

/* Point @d at file offset @pos with no input yet: feed_run() refills when it needs to. */
static void feed_none(struct feed *f, struct dec *d, uint64_t pos)
{
	f->at = pos;
	d->strm.next_in = f->src ? f->src + (pos - f->coff) : f->buf;
	d->strm.avail_in = 0;
}

/*
 * Decode @n bytes into @out, or drop them (@out NULL), refilling the input
 * when the decoder has used it up. Return: the last lzma_ret (LZMA_OK
 * when all @n came), with *@done bytes; *@err the -errno of a refill that
 * failed, else 0.
 */
static lzma_ret feed_run(struct feed *f, struct dec *d, uint8_t *out, uint64_t n, uint64_t *done,
			 int *err, const char **why)
{
	uint8_t scratch[4096];
	lzma_ret lr = LZMA_OK;

	*done = 0;
	*err = 0;
	while (*done < n) {
		uint64_t left = n - *done;
		size_t want = out ? (left > SIZE_MAX ? SIZE_MAX : (size_t)left) :
				    (left < sizeof(scratch) ? (size_t)left : sizeof(scratch)),
		       got;

		lr = dec_run(d, out ? out + *done : scratch, want, &got);
		*done += got;
		if (lr != LZMA_OK)
			break;
		if (got < want && (*err = feed_at(f, d, fed_to(f, d), why)) < 0)
			return LZMA_BUF_ERROR; /* (the input was used up) */
	}
	return lr;
}

/*
 * After all of the block's output: its end marker, padding and check.
 * Return: LZMA_STREAM_END when they are all there and right; another
 * lzma_ret when not (LZMA_DATA_ERROR also for output past the size).
 */
static lzma_ret feed_end(struct feed *f, struct dec *d, int *err, const char **why)
{
	lzma_ret lr;
	uint8_t none;
	size_t got;

	*err = 0;
	for (;;) {
		lr = dec_run(d, &none, 1, &got);
		if (got > 0)
			return LZMA_DATA_ERROR;
		if (lr != LZMA_OK)
			return lr;
		if ((*err = feed_at(f, d, fed_to(f, d), why)) < 0)
			return LZMA_BUF_ERROR;
	}
}

/* A decoder for the block @f holds, whose output is @usize, fed from after its header. */
static int feed_start(struct feed *f, unsigned int check, uint64_t usize, bool verify,
		      struct dec **out, const char **why)
{
	uint8_t hdr[LZMA_BLOCK_HEADER_SIZE_MAX];
	size_t hn = f->end - f->coff < sizeof(hdr) ? (size_t)(f->end - f->coff) : sizeof(hdr);
	int rc = 0;

	if (f->src)
		memcpy(hdr, f->src, hn);
	else
		rc = bfs_io_read(f->io, hdr, hn, f->coff);
	if (rc < 0) {
		*why = "read failed";
		return rc;
	}
	rc = dec_start(hdr, hn, check, usize, verify, out, why);
	if (rc < 0)
		return rc;
	(*out)->in_at = f->coff + (*out)->block.header_size;
	return 0;
}

/*
 * Decode the open chain that starts at span @k0 whole, with its check:
 * what the walk of a block does at the first stat. The output goes into
 * *@spill when there is one (spill.h), else is dropped; a spill that
 * fails to write is dropped (*@spill NULL) and the proof goes on.
 * Return: 0, -EBADMSG or -EILSEQ (with *@why), -errno.
 */
static int prove(const struct bfs_index *idx, size_t k0, struct feed *f, struct bfs_spill **spill,
		 const char **why)
{
	uint64_t usize = chain_usize(idx, k0), done, left;
	struct dec *d;
	lzma_ret lr = LZMA_OK;
	int rc, err = 0;

	if (usize == UINT64_MAX) {
		*why = "open xz chain without its last span";
		return -EBADMSG;
	}
	rc = feed_start(f, idx->blk[k0].aux & AUX_CHECK, usize, true, &d, why);
	if (rc < 0)
		return rc;
	feed_none(f, d, d->in_at);
	for (left = usize; left > 0 && lr == LZMA_OK && err == 0; left -= done) {
		size_t cap = 0;
		uint8_t *out = *spill ? bfs_spill_next(*spill, &cap) : NULL;
		uint64_t n = out && left > cap ? cap : left;

		if (*spill && !out) {
			bfs_spill_drop(*spill); /* the proof goes on without it */
			*spill = NULL;
		}
		/* straight into the spill's buffer, handed over as it fills; else dropped */
		lr = feed_run(f, d, out, n, &done, &err, why);
		if (*spill && bfs_spill_add(*spill, (size_t)done) < 0) {
			bfs_spill_drop(*spill);
			*spill = NULL;
		}
	}
	if (err == 0 && lr == LZMA_OK)
		lr = feed_end(f, d, &err, why);
	rc = err;
	if (rc == 0 && (lr != LZMA_STREAM_END || fed_to(f, d) != f->end)) {
		rc = -EBADMSG;
		*why = lr == LZMA_STREAM_END ? "xz block ends elsewhere than its index says" :
		       lr == LZMA_DATA_ERROR ? "corrupt xz block" :
					       "truncated xz block";
		if (lr == LZMA_DATA_ERROR && d->strm.total_out == usize &&
		    d->block.check != LZMA_CHECK_NONE) {
			rc = -EILSEQ;
			*why = "xz block check mismatch";
		}
	}
	dec_free(d);
	return rc;
}

/*
 * Has the open chain at @k0 been proven (prove())? Prove it now if not;
 * the answer is kept, and so is the proof's output when the spill takes
 * it (pool->spill).
 */
static int proven(const struct bfs_index *idx, struct xz_pool *pool, size_t k0, struct feed *f,
		  const char **why)
{
	struct bfs_spill *s;
	int known, rc;

	bfs_mutex_lock(&pool->lock);
	known = pool->proof ? pool->proof[k0] : 1;
	bfs_mutex_unlock(&pool->lock);
	if (known == 1)
		return 0;
	if (known < 0) {
		*why = known == -EILSEQ ? "xz block check mismatch" :
					  "xz block failed to decode when first read";
		return known;
	}
	s = bfs_spill_begin(chain_usize(idx, k0));
	rc = prove(idx, k0, f, &s, why);
	if (s && (rc < 0 || bfs_spill_seal(s) < 0)) {
		bfs_spill_drop(s); /* never a byte of a block that failed its proof */
		s = NULL;
	}
	if (rc == 0 || rc == -EBADMSG || rc == -EILSEQ) {
		bfs_mutex_lock(&pool->lock);
		pool->proof[k0] = rc == 0 ? 1 : rc;
		if (s && !pool->spill[k0]) {
			pool->spill[k0] = s;
			s = NULL;
		}
		bfs_mutex_unlock(&pool->lock);
	}
	bfs_spill_drop(s); /* another reader proved it too, or the proof could not finish */
	return rc;
}

/*
 * Open span @k into @dst (room for @n of its usize bytes; the rest is
 * decoded and dropped): with @verify its block proven first; continue the
 * decoder parked at it (or start one at the block's header), feeding it
 * from where it stands; park it at the next span.
 */
static int open_decode(const struct bfs_index *idx, size_t k, struct feed *f, uint8_t *dst,
		       uint32_t n, bool verify, const char **why)
{
	const struct bfs_blk *b = &idx->blk[k];
	struct xz_pool *pool = idx->priv;
	size_t k0 = chain_first(idx, k);
	uint64_t done, rest;
	struct dec *d;
	lzma_ret lr;
	int rc, err;

	if (!pool) {
		*why = "chained block without its decoder pool";
		return -EBADMSG;
	}
	if (verify) {
		struct bfs_spill *s;

		rc = proven(idx, pool, k0, f, why);
		if (rc < 0)
			return rc;
		/* proven whole: its bytes from the spill when they are there, else decoded again */
		s = spill_of(pool, k0);
		if (s && bfs_spill_read(s, dst, n, b->uoff - idx->blk[k0].uoff) == 0)
			return 0;
	}
	d = pool_take(pool, k);
	if (!d && !(b->aux & AUX_FIRST)) {
		*why = "no decoder parked at this span";
		return -EAGAIN;
	}
	if (!d) {
		rc = feed_start(f, b->aux & AUX_CHECK, chain_usize(idx, k), verify, &d, why);
		if (rc < 0)
			return rc;
	}
	feed_none(f, d, d->in_at);
	lr = feed_run(f, d, dst, n, &done, &err, why);
	if (err == 0 && lr == LZMA_OK && n < b->usize) {
		lr = feed_run(f, d, NULL, b->usize - n, &rest, &err, why);
		done += rest;
	}
	if (err == 0 && lr == LZMA_OK && (b->aux & AUX_LAST))
		lr = feed_end(f, d, &err, why);
	rc = err;
	if (rc < 0)
		goto out;
	if (b->aux & AUX_LAST) {
		if (lr != LZMA_STREAM_END || done != b->usize || fed_to(f, d) != f->end) {
			rc = -EBADMSG;
			*why = lr == LZMA_DATA_ERROR ?
				       "corrupt xz block" :
			       lr == LZMA_STREAM_END ?
				       "xz block ends elsewhere than its index says" :
				       "truncated xz block";
			if (verify && lr == LZMA_DATA_ERROR && done == b->usize &&
			    d->block.check != LZMA_CHECK_NONE) {
				rc = -EILSEQ;
				*why = "xz block check mismatch";
			}
		}
		goto out;
	}
	if (lr != LZMA_OK || done != b->usize) {
		*why = lr == LZMA_DATA_ERROR ? "corrupt xz block" :
		       lr == LZMA_STREAM_END ? "xz block ends inside a span" :
					       "truncated xz block";
		rc = lr == LZMA_MEM_ERROR ? -ENOMEM : -EBADMSG;
		goto out;
	}
	d->in_at = fed_to(f, d);
	pool_park(pool, d, k + 1);
	return 0;
out:
	dec_free(d);
	return rc;
}

static int xz_decode_open(const struct bfs_index *idx, size_t k, struct bfs_io *io, uint8_t *dst,
			  bool verify, const char **why)
{
	const struct bfs_blk *b = &idx->blk[k];
	struct feed f = { .io = io, .coff = b->coff, .end = b->coff + b->clen };
	int rc;

	if (!(b->flags & BFS_BLK_OPEN)) {
		*why = "xz span is not open";
		return -EINVAL;
	}
	f.buf = malloc(WALK_CHUNK);
	if (!f.buf) {
		*why = "no memory for xz input";
		return -ENOMEM;
	}
	rc = open_decode(idx, k, &f, dst, b->usize, verify, why);
	free(f.buf);
	return rc;
}

static int xz_decode(const struct bfs_index *idx, size_t k, const uint8_t *src, uint8_t *dst,
		     uint32_t n, bool verify, const char **why)
{
	const struct bfs_blk *b = &idx->blk[k];

	if (b->flags & BFS_BLK_OPEN) {
		struct feed f = { .src = src, .coff = b->coff, .end = b->coff + b->clen };

		return open_decode(idx, k, &f, dst, n, verify, why);
	}
	if (b->flags & BFS_BLK_CHAIN)
		return chain_decode(idx, k, src, dst, n, verify, why);
	return direct_decode(b, src, dst, n, verify, why);
}

/*
 * What a direct block's LZMA2 chunk headers say it holds, for a size only
 * the index states (see the top of this file): a walk over the chunks'
 * headers, no decoding. BCJ and delta filters keep the length. Decode
 * still checks every byte of it.
 */
static int xz_measure(const struct bfs_blk *b, const uint8_t *src, uint32_t *usize,
		      const char **why)
{
	lzma_filter filters[LZMA_FILTERS_MAX + 1];
	lzma_block block;
	uint64_t mem, sum = 0;
	size_t pos, end, last = 0;
	int rc;

	rc = parse_block_header(src, b->clen, b->aux & AUX_CHECK, UINT64_MAX, &block, filters, &mem,
				why);
	if (rc < 0)
		return rc;
	while (last + 1 < LZMA_FILTERS_MAX && filters[last + 1].id != LZMA_VLI_UNKNOWN)
		last++;
	rc = filters[last].id == LZMA_FILTER_LZMA2 ? 0 : -EBADMSG;
	filters_free(filters);
	if (rc < 0) {
		*why = "xz block whose last filter is not LZMA2";
		return rc;
	}
	if (block.uncompressed_size != LZMA_VLI_UNKNOWN) {
		if (block.uncompressed_size == 0 || block.uncompressed_size > direct_max) {
			*why = "block header states an impossible size";
			return -EBADMSG;
		}
		*usize = (uint32_t)block.uncompressed_size;
		return 0;
	}
	pos = block.header_size;
	end = b->clen;
	for (;;) {
		uint8_t c;

		if (pos >= end)
			goto truncated;
		c = src[pos];
		if (c == 0x00)
			break;		      /* end of LZMA2 data */
		if (c == 0x01 || c == 0x02) { /* uncompressed chunk */
			size_t len;

			if (end - pos < 3)
				goto truncated;
			len = ((size_t)src[pos + 1] << 8 | src[pos + 2]) + 1;
			sum += len;
			pos += 3 + len;
		} else if (c >= 0x80) { /* LZMA chunk */
			size_t hdr = c >= 0xc0 ? 6 : 5, clen;

			if (end - pos < hdr)
				goto truncated;
			sum += ((uint64_t)(c & 0x1f) << 16 | (uint64_t)src[pos + 1] << 8 |
				src[pos + 2]) +
			       1;
			clen = ((size_t)src[pos + 3] << 8 | src[pos + 4]) + 1;
			pos += hdr + clen;
		} else {
			*why = "invalid LZMA2 chunk";
			return -EBADMSG;
		}
		if (sum > direct_max) {
			*why = "xz block's chunks hold more than the index says";
			return -EBADMSG;
		}
	}
	if (sum == 0) {
		*why = "xz block holds no data";
		return -EBADMSG;
	}
	*usize = (uint32_t)sum;
	return 0;

truncated:
	*why = "LZMA2 chunk runs past the block";
	return -EBADMSG;
}

/* ---- scan ---- */

struct scan {
	struct bfs_io *io;
	struct bfs_index *idx;
	uint8_t *buf;	  /* WALK_CHUNK bytes */
	uint64_t *starts; /* a chained block's span starts, during its walk */
	size_t nstarts, cap;
};

/* The damage that ends the file at @off: the blocks before it stay. */
static int broken(struct scan *s, uint64_t off, const char *why)
{
	bfs_index_mark_broken(s->idx, off, "xz: %s at offset %" PRIu64, why, off);
	return 1;
}

static int push_start(struct scan *s, uint64_t off)
{
	if (s->nstarts == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		uint64_t *n = realloc(s->starts, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		s->starts = n;
		s->cap = cap;
	}
	s->starts[s->nstarts++] = off;
	return 0;
}

/* What walk_block() found. */
struct walked {
	uint64_t end;	   /* first byte after the block (its check) */
	uint64_t usize;	   /* its output */
	lzma_vli unpadded; /* its unpadded size, for the stream's index */
};

/*
 * Decode the block at @off (its header, then its data up to at most
 * @limit) without keeping the output, recording in s->starts where the
 * input stands every SPAN bytes of output (the first start is @off).
 * @usize: what the index says it holds, or UINT64_MAX.
 * Return: 0 with *@w; 1 with *@why when the block is damaged (s->starts
 * then ends with the start of the span that failed); -errno.
 */
static int walk_block(struct scan *s, uint64_t off, uint64_t limit, unsigned int check,
		      uint64_t usize, struct walked *w, const char **why)
{
	uint8_t hdr[LZMA_BLOCK_HEADER_SIZE_MAX];
	uint64_t rd, produced = 0, started_at = 0;
	size_t hlen;
	uint8_t *out;
	struct dec *d;
	lzma_ret lr;
	int rc;

	s->nstarts = 0;
	rc = push_start(s, off);
	if (rc < 0)
		return rc;
	if (off >= limit) {
		*why = "truncated block header";
		return 1;
	}
	rc = bfs_io_read(s->io, hdr, 1, off);
	if (rc < 0)
		return rc;
	hlen = lzma_block_header_size_decode(hdr[0]);
	if (hlen > limit - off) {
		*why = "truncated block header";
		return 1;
	}
	rc = bfs_io_read(s->io, hdr, hlen, off);
	if (rc < 0)
		return rc;
	rc = dec_start(hdr, hlen, check, usize, false, &d, why);
	if (rc == -EBADMSG)
		return 1;
	if (rc < 0)
		return rc;
	/* the block's own sizes bound the walk too */
	if (d->block.compressed_size != LZMA_VLI_UNKNOWN) {
		lzma_vli total = lzma_block_total_size(&d->block);

		if (total == 0 || total > limit - off) {
			*why = "block runs past the end of its stream";
			dec_free(d);
			return 1;
		}
		limit = off + total;
	}
	out = malloc(SCRATCH);
	if (!out) {
		dec_free(d);
		return -ENOMEM;
	}
	rd = off + hlen;
	rc = 1;
	*why = "truncated xz block";
	for (;;) {
		uint64_t boundary = (produced / span_len + 1) * span_len;
		size_t got, want = boundary - produced < SCRATCH ? (size_t)(boundary - produced) :
								   SCRATCH;

		if (d->strm.avail_in == 0 && rd < limit) {
			size_t len = limit - rd < WALK_CHUNK ? (size_t)(limit - rd) : WALK_CHUNK;
			int rrc = bfs_io_read(s->io, s->buf, len, rd);

			if (rrc < 0) {
				rc = rrc;
				break;
			}
			d->strm.next_in = s->buf;
			d->strm.avail_in = len;
			rd += len;
		}
		uint64_t in_before = d->strm.total_in;

		lr = dec_run(d, out, want, &got);
		produced += got;
		if (lr == LZMA_OK && got == 0 && d->strm.total_in == in_before &&
		    d->strm.avail_in != 0) {
			*why = "xz decoder stalled";
			break;
		}
		if (lr == LZMA_STREAM_END) {
			w->end = off + hlen + d->strm.total_in;
			w->usize = produced;
			w->unpadded = lzma_block_unpadded_size(&d->block);
			if (produced == 0) {
				*why = "empty xz block";
				break;
			}
			if (usize != UINT64_MAX && produced != usize) {
				*why = "xz block holds another size than its index says";
				break;
			}
			/* a start recorded at the very end has nothing after it */
			if (s->nstarts > 1 && started_at == produced)
				s->nstarts--;
			rc = 0;
			break;
		}
		if (lr != LZMA_OK) {
			*why = lr == LZMA_MEM_ERROR ? "no memory to decode" : "corrupt xz block";
			rc = lr == LZMA_MEM_ERROR ? -ENOMEM : 1;
			break;
		}
		if (got < want && d->strm.avail_in == 0 && rd >= limit)
			break; /* truncated */
		if (produced == boundary) {
			started_at = produced;
			rc = push_start(s, off + hlen + d->strm.total_in);
			if (rc < 0)
				break;
			rc = 1;
		}
	}
	free(out);
	dec_free(d);
	return rc;
}

/*
 * Add the first @nspans spans recorded in s->starts, each ending where
 * the next starts (the last at @end). @usize: the block's output, whose
 * last span then ends the chain (AUX_LAST); UINT64_MAX for the good
 * spans of a damaged block, each SPAN bytes and none last.
 * Return: 0; 1 with *@why for a span no reader could be given; -errno.
 */
static int add_spans(struct scan *s, size_t nspans, uint64_t end, uint64_t usize,
		     unsigned int check, const char **why)
{
	for (size_t i = 0; i < nspans; i++) {
		uint64_t a = s->starts[i], z = i + 1 < nspans ? s->starts[i + 1] : end;
		bool last = i + 1 == nspans && usize != UINT64_MAX;
		uint64_t u = last ? usize - (uint64_t)i * span_len : span_len;
		int rc;

		if (z <= a || z - a > UINT32_MAX) {
			*why = z <= a ? "span of a block that takes no input" :
					"span of a block that takes over 4 GiB of input";
			return 1;
		}
		rc = bfs_index_add(s->idx, a, (uint32_t)(z - a), (uint32_t)u, BFS_BLK_CHAIN);
		if (rc < 0)
			return rc;
		s->idx->blk[s->idx->n - 1].aux =
			check | (i == 0 ? AUX_FIRST : 0) | (last ? AUX_LAST : 0);
	}
	return 0;
}

/*
 * The block at @off, @total bytes that the xz index says hold @usize, as
 * open spans (BFS_BLK_OPEN): each states the whole block, and a decoder
 * finds its input as it goes (open_decode()). Return: 0 or -errno.
 */
static int open_spans(struct scan *s, uint64_t off, uint64_t total, uint64_t usize,
		      unsigned int check)
{
	uint64_t n = (usize + span_len - 1) / span_len;

	if (s->idx->n + n > s->idx->max_blocks)
		return -EFBIG;
	for (uint64_t i = 0; i < n; i++) {
		bool last = i + 1 == n;
		int rc = bfs_index_add(s->idx, off, (uint32_t)total,
				       (uint32_t)(last ? usize - i * span_len : span_len),
				       BFS_BLK_CHAIN | BFS_BLK_OPEN);

		if (rc < 0)
			return rc;
		s->idx->blk[s->idx->n - 1].aux =
			check | (i == 0 ? AUX_FIRST : 0) | (last ? AUX_LAST : 0);
	}
	return 0;
}

/*
 * Index the block at @off: a direct entry when its output is known and at
 * most DIRECT_MAX; open spans when the index states a bigger one; else a
 * walk, and spans if it holds more. @total and
 * @usize: from the index or the block header, 0 / UINT64_MAX if unknown.
 * Return: 0 with *@w (when walked: its end, size and unpadded size); 1
 * when the file is broken at this block (marked); -errno.
 */
static int add_block(struct scan *s, uint64_t off, uint64_t limit, unsigned int check,
		     uint64_t total, uint64_t usize, struct walked *w)
{
	const char *why = "corrupt xz block";
	size_t good;
	int rc;

	if (total && usize != UINT64_MAX && usize > direct_max && total <= UINT32_MAX &&
	    total <= limit - off)
		return open_spans(s, off, total, usize, check);
	if (total && usize != UINT64_MAX && usize <= direct_max) {
		if (usize == 0)
			return 0; /* an empty block carries nothing */
		if (total > UINT32_MAX || total > limit - off)
			return broken(s, off, "block larger than the file allows");
		rc = bfs_index_add(s->idx, off, (uint32_t)total, (uint32_t)usize, 0);
		if (rc < 0)
			return rc;
		s->idx->blk[s->idx->n - 1].aux = check;
		return 0;
	}
	rc = walk_block(s, off, total ? off + total : limit, check, usize, w, &why);
	if (rc < 0)
		return rc;
	if (rc == 0 && total && w->end != off + total) {
		why = "xz block ends elsewhere than its index says";
		rc = 1;
	}
	if (rc == 0 && w->usize <= direct_max) {
		rc = bfs_index_add(s->idx, off, (uint32_t)(w->end - off), (uint32_t)w->usize, 0);
		if (rc == 0)
			s->idx->blk[s->idx->n - 1].aux = check;
		return rc;
	}
	if (rc == 0) {
		rc = add_spans(s, s->nstarts, w->end, w->usize, check, &why);
		return rc <= 0 ? rc : broken(s, off, why);
	}
	/*
	 * Damaged: the spans decoded whole before the one that failed are
	 * good (a block small enough to decode whole is lost whole).
	 */
	good = s->nstarts - 1;
	if (good > 0 && (usize == UINT64_MAX || usize > direct_max)) {
		uint64_t at = s->starts[good];
		const char *why2;

		rc = add_spans(s, good, at, UINT64_MAX, check, &why2);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return broken(s, at, why);
	}
	return broken(s, off, why);
}

/* ---- scan: backwards, by the indexes ---- */

/*
 * Read the streams from the end of the file back to its start.
 * Return: 0 with *@out (every stream's index, concatenated); 1 when the
 * file is not laid out as xz says (then walk it forwards); -errno.
 */
static int read_indexes(struct scan *s, lzma_index **out)
{
	struct bfs_io *io = s->io;
	uint64_t pos = io->size, padding = 0;
	lzma_index *all = NULL;
	int rc = 1;

	*out = NULL;
	if (io->size % XZ_PAD != 0 || io->size < XZ_STREAM_MIN)
		return 1;
	while (pos > 0) {
		uint8_t foot[XZ_HDR], head[XZ_HDR];
		lzma_stream_flags ff, hf;
		uint64_t memlimit = INDEX_MEMLIMIT;
		lzma_index *i = NULL;
		size_t in_pos = 0;
		uint8_t *ib;
		lzma_vli ssize;

		/* stream padding: zero words before pos */
		if (pos < XZ_HDR)
			goto bad;
		rc = bfs_io_read(io, foot, XZ_PAD, pos - XZ_PAD);
		if (rc < 0)
			goto out;
		if (bfs_le32(foot) == 0) {
			size_t len = pos < WALK_CHUNK ? (size_t)pos : WALK_CHUNK;
			size_t k;

			rc = bfs_io_read(io, s->buf, len, pos - len);
			if (rc < 0)
				goto out;
			for (k = len; k >= XZ_PAD && bfs_le32(s->buf + k - XZ_PAD) == 0;
			     k -= XZ_PAD)
				;
			padding += len - k;
			pos -= len - k;
			continue;
		}
		if (pos < XZ_STREAM_MIN)
			goto bad;
		rc = bfs_io_read(io, foot, XZ_HDR, pos - XZ_HDR);
		if (rc < 0)
			goto out;
		if (lzma_stream_footer_decode(&ff, foot) != LZMA_OK)
			goto bad;
		if (ff.backward_size > pos - 2 * XZ_HDR || ff.backward_size > INDEX_MAX)
			goto bad;
		ib = malloc((size_t)ff.backward_size);
		if (!ib) {
			rc = -ENOMEM;
			goto out;
		}
		rc = bfs_io_read(io, ib, (size_t)ff.backward_size, pos - XZ_HDR - ff.backward_size);
		if (rc == 0 && (lzma_index_buffer_decode(&i, &memlimit, NULL, ib, &in_pos,
							 (size_t)ff.backward_size) != LZMA_OK ||
				in_pos != ff.backward_size))
			rc = 1;
		free(ib);
		if (rc != 0) {
			if (i)
				lzma_index_end(i, NULL);
			goto out_rc;
		}
		ssize = lzma_index_stream_size(i);
		if (ssize > pos || ssize < XZ_STREAM_MIN) {
			lzma_index_end(i, NULL);
			goto bad;
		}
		rc = bfs_io_read(io, head, XZ_HDR, pos - ssize);
		if (rc == 0 && (lzma_stream_header_decode(&hf, head) != LZMA_OK ||
				lzma_stream_flags_compare(&hf, &ff) != LZMA_OK ||
				!lzma_check_is_supported(hf.check)))
			rc = 1;
		if (rc == 0 && (lzma_index_stream_flags(i, &ff) != LZMA_OK ||
				lzma_index_stream_padding(i, padding) != LZMA_OK))
			rc = 1;
		if (rc == 0 && all && lzma_index_cat(i, all, NULL) != LZMA_OK)
			rc = 1;
		if (rc != 0) {
			lzma_index_end(i, NULL);
			goto out_rc;
		}
		all = i; /* lzma_index_cat() took the old one */
		padding = 0;
		pos -= ssize;
	}
	if (!all || padding != 0)
		goto bad; /* the file starts with padding, not a stream */
	*out = all;
	return 0;

bad:
	rc = 1;
out_rc:
out:
	if (all)
		lzma_index_end(all, NULL);
	return rc;
}

static int scan_by_index(struct scan *s, lzma_index *all)
{
	lzma_index_iter it;
	struct walked w;

	lzma_index_iter_init(&it, all);
	while (!lzma_index_iter_next(&it, LZMA_INDEX_ITER_NONEMPTY_BLOCK)) {
		uint64_t off = it.block.compressed_file_offset;
		int rc;

		/* the index's sizes add up to its stream's, inside the file (read_indexes()) */
		rc = add_block(s, off, s->io->size, it.stream.flags->check, it.block.total_size,
			       it.block.uncompressed_size, &w);
		if (rc != 0)
			return rc < 0 ? rc : 0;
	}
	return 0;
}

/* ---- scan: forwards, when the end of the file is damaged ---- */

/* Feed the index at @off to @h. Return: 0 with *@len its bytes; 1 damaged; -errno. */
static int check_index(struct scan *s, lzma_index_hash *h, uint64_t off, uint64_t *len)
{
	uint64_t pos = off;
	lzma_ret lr = LZMA_OK;

	while (lr == LZMA_OK && pos < s->io->size) {
		size_t n = s->io->size - pos < 4096 ? (size_t)(s->io->size - pos) : 4096;
		size_t in_pos = 0;
		int rc = bfs_io_read(s->io, s->buf, n, pos);

		if (rc < 0)
			return rc;
		lr = lzma_index_hash_decode(h, s->buf, &in_pos, n);
		pos += in_pos;
	}
	if (lr != LZMA_STREAM_END)
		return 1;
	*len = pos - off;
	return 0;
}

static int walk_forward(struct scan *s)
{
	uint64_t off = 0, size = s->io->size;
	bool first = true;

	while (off < size) {
		uint8_t head[XZ_HDR], foot[XZ_HDR];
		lzma_stream_flags hf, ff;
		lzma_index_hash *h;
		uint64_t pos, ilen = 0;
		int rc;

		if (!first) {
			/* stream padding, one word at a time */
			if (size - off < XZ_PAD)
				return broken(s, off, "stream padding not a multiple of 4 bytes");
			rc = bfs_io_read(s->io, head, XZ_PAD, off);
			if (rc < 0)
				return rc;
			if (bfs_le32(head) == 0) {
				off += XZ_PAD;
				continue;
			}
		}
		if (size - off < XZ_HDR)
			return broken(s, off, first ? "file too short for xz" : "trailing garbage");
		rc = bfs_io_read(s->io, head, XZ_HDR, off);
		if (rc < 0)
			return rc;
		if (lzma_stream_header_decode(&hf, head) != LZMA_OK ||
		    !lzma_check_is_supported(hf.check))
			return broken(s, off, first ? "bad stream header" : "trailing garbage");
		first = false;
		h = lzma_index_hash_init(NULL, NULL);
		if (!h)
			return -ENOMEM;
		pos = off + XZ_HDR;
		for (;;) {
			uint8_t hb[LZMA_BLOCK_HEADER_SIZE_MAX];
			lzma_filter filters[LZMA_FILTERS_MAX + 1];
			lzma_block block;
			struct walked w;
			uint64_t total = 0, usize = UINT64_MAX, mem;
			size_t hlen;
			const char *why;

			if (pos >= size) {
				rc = broken(s, pos, "truncated stream");
				goto done;
			}
			rc = bfs_io_read(s->io, hb, 1, pos);
			if (rc < 0)
				goto done;
			if (hb[0] == 0x00)
				break; /* the index */
			hlen = lzma_block_header_size_decode(hb[0]);
			if (hlen > size - pos) {
				rc = broken(s, pos, "truncated block header");
				goto done;
			}
			rc = bfs_io_read(s->io, hb, hlen, pos);
			if (rc < 0)
				goto done;
			rc = parse_block_header(hb, hlen, hf.check, UINT64_MAX, &block, filters,
						&mem, &why);
			if (rc < 0) {
				rc = broken(s, pos, why);
				goto done;
			}
			filters_free(filters);
			if (block.compressed_size != LZMA_VLI_UNKNOWN) {
				total = lzma_block_total_size(&block);
				if (total == 0 || total > size - pos) {
					rc = broken(s, pos, "block runs past the end of the file");
					goto done;
				}
				if (block.uncompressed_size != LZMA_VLI_UNKNOWN)
					usize = block.uncompressed_size;
			}
			w.end = pos + total;
			w.usize = usize;
			w.unpadded = total ? lzma_block_unpadded_size(&block) : 0;
			rc = add_block(s, pos, size, hf.check, total, usize, &w);
			if (rc != 0)
				goto done;
			if (lzma_index_hash_append(h, w.unpadded, w.usize) != LZMA_OK) {
				rc = broken(s, pos, "index too large");
				goto done;
			}
			pos = (w.end + XZ_PAD - 1) / XZ_PAD * XZ_PAD;
			if (pos != w.end) {
				rc = broken(s, pos, "block padding"); /* total sizes are padded */
				goto done;
			}
		}
		rc = check_index(s, h, pos, &ilen);
		if (rc != 0) {
			if (rc > 0)
				rc = broken(s, pos, "index damaged or not matching the blocks");
			goto done;
		}
		pos += ilen;
		if (size - pos < XZ_HDR) {
			rc = broken(s, pos, "truncated stream footer");
			goto done;
		}
		rc = bfs_io_read(s->io, foot, XZ_HDR, pos);
		if (rc < 0)
			goto done;
		if (lzma_stream_footer_decode(&ff, foot) != LZMA_OK ||
		    lzma_stream_flags_compare(&hf, &ff) != LZMA_OK ||
		    ff.backward_size != lzma_index_hash_size(h)) {
			rc = broken(s, pos, "damaged stream footer");
			goto done;
		}
		rc = 0;
done:
		lzma_index_hash_end(h, NULL);
		if (rc != 0)
			return rc;
		off = pos + XZ_HDR;
	}
	return 0;
}

/*
 * Sizes only the index states (direct blocks) and that differ from the
 * one most of them share are measured before a read relies on where
 * later blocks start (bfs_index_guess_irregular()'s rule, which chained
 * spans, exact from their walk, do not take part in).
 */
static void guess_irregular(struct bfs_index *idx)
{
	size_t last = SIZE_MAX, votes = 0, others = 0, k;
	uint32_t nominal = 0;

	for (k = 0; k < idx->n; k++)
		if (!(idx->blk[k].flags & BFS_BLK_BAD))
			last = k;
	if (last == SIZE_MAX)
		return;
	for (k = 0; k < last; k++) {
		const struct bfs_blk *b = &idx->blk[k];

		if (b->flags & (BFS_BLK_BAD | BFS_BLK_CHAIN))
			continue;
		others++;
		if (votes == 0)
			nominal = b->usize;
		votes += b->usize == nominal ? 1 : (size_t)-1;
	}
	votes = 0;
	for (k = 0; k < last; k++)
		if (!(idx->blk[k].flags & (BFS_BLK_BAD | BFS_BLK_CHAIN)) &&
		    idx->blk[k].usize == nominal)
			votes++;
	if (votes * 2 <= others)
		nominal = 0;
	for (k = 0; k < last; k++) {
		struct bfs_blk *b = &idx->blk[k];

		if (!(b->flags & (BFS_BLK_BAD | BFS_BLK_CHAIN)) && b->usize != nominal)
			b->flags |= BFS_BLK_GUESS | BFS_BLK_CLAIMED;
	}
	for (k = 0; k < idx->n && !(idx->blk[k].flags & BFS_BLK_GUESS); k++)
		;
	atomic_store(&idx->nexact, k);
}

static int xz_scan(struct bfs_io *io, struct bfs_io *side, struct bfs_index *idx)
{
	struct scan s = { .io = io, .idx = idx };
	lzma_index *all = NULL;
	int rc;

	(void)side;
	s.buf = malloc(WALK_CHUNK);
	if (!s.buf)
		return -ENOMEM;
	rc = read_indexes(&s, &all);
	if (rc == 0) {
		rc = scan_by_index(&s, all);
		lzma_index_end(all, NULL);
	} else if (rc > 0) {
		rc = walk_forward(&s);
		if (rc > 0)
			rc = 0; /* marked broken */
	}
	free(s.starts);
	free(s.buf);
	if (rc == 0) {
		for (size_t k = 0; k < idx->n; k++) {
			if (idx->blk[k].flags & BFS_BLK_CHAIN) {
				rc = pool_attach(idx);
				break;
			}
		}
	}
	if (rc == 0)
		guess_irregular(idx);
	idx->block_size = span_len;
	return rc;
}

/* --- the index cache ------------------------------------------------------ */

/*
 * Only a file with a chain is walked at length (its big block decoded
 * whole), so only such indexes reach the cache (index_cache.h saves what
 * took many reads); a file read from its xz index is read so again.
 */

/* An entry a scan could have made: a block or a span, with a check ID xz defines. */
static bool xz_check_entry(const struct bfs_blk *b)
{
	if (!lzma_check_is_supported((lzma_check)(b->aux & AUX_CHECK)))
		return false;
	if (b->flags & BFS_BLK_CHAIN)
		return (b->flags & ~BFS_BLK_OPEN) == BFS_BLK_CHAIN &&
		       !(b->aux & ~(AUX_CHECK | AUX_FIRST | AUX_LAST)) && b->usize > 0 &&
		       b->usize <= span_len;
	return !(b->flags & ~(BFS_BLK_GUESS | BFS_BLK_CLAIMED)) && !(b->aux & ~AUX_CHECK) &&
	       b->usize > 0 && b->usize <= direct_max;
}

/*
 * Spans must chain as add_spans() and open_spans() make them: a chain
 * opens with AUX_FIRST, each span starts where the one before ended (open
 * spans: each states the same block) with the same check, every span but its last holds span_len bytes, and AUX_LAST
 * closes it before anything else follows. Then the pool and the
 * distrust of odd block sizes, as a scan ends.
 */
static int xz_cache_load(struct bfs_index *idx, const uint8_t *priv, size_t len)
{
	bool open = false, chains = false;

	(void)priv;
	if (len != 0)
		return 1;
	for (size_t k = 0; k < idx->n; k++) {
		const struct bfs_blk *b = &idx->blk[k], *p = k ? &idx->blk[k - 1] : NULL;

		if (!(b->flags & BFS_BLK_CHAIN)) {
			if (open)
				return 1;
			continue;
		}
		chains = true;
		if ((b->aux & AUX_FIRST) ?
			    open :
			    !open || (b->flags ^ p->flags) & BFS_BLK_OPEN ||
				    ((b->flags & BFS_BLK_OPEN) ?
					     b->coff != p->coff || b->clen != p->clen :
					     b->coff != p->coff + p->clen) ||
				    (b->aux & AUX_CHECK) != (p->aux & AUX_CHECK) ||
				    p->usize != span_len)
			return 1;
		open = !(b->aux & AUX_LAST);
	}
	if (open)
		return 1; /* an entry is never written for a broken index */
	if (chains && pool_attach(idx) < 0)
		return -ENOMEM;
	guess_irregular(idx);
	idx->block_size = span_len;
	return 0;
}

static const struct bfs_suffix xz_suffixes[] = {
	{ ".xz", "" },
	{ ".txz", ".tar" },
	{ NULL, NULL },
};

const struct bfs_codec bfs_codec_xz = {
	.name = "xz",
	.suffixes = xz_suffixes,
	.probe = xz_probe,
	.scan = xz_scan,
	.decode = xz_decode,
	.prefix = true,
	.measure = xz_measure,
	.resume = xz_resume,
	.decode_open = xz_decode_open,
	.chain_head = xz_chain_head,
	.check_entry = xz_check_entry,
	.cache_load = xz_cache_load,
};
