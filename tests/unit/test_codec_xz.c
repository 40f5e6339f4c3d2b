// SPDX-License-Identifier: MIT
/*
 * xz codec: probe, the backward index scan (one and several blocks, block
 * headers with and without sizes, several streams with padding, every
 * check type), the forward walk that damage at the end falls back to
 * (footer, index, truncation, garbage, odd padding), damaged block
 * headers and data, a lying index, and chained spans of a big block:
 * resume(), decode() in order, -EAGAIN, the pool of parked
 * decoders, prefixes, the check of the last span, damage inside a chain.
 * Files are made in memory with liblzma.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/park.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/index_cache.h"
#include "blockfs/io.h"
#include "blockfs/spill.h"
#include "blockfs/xxh32.h"

/* codec_xz.c: the test knob, declared there and here only */
void bfs_codec_xz_limits(uint32_t direct, uint32_t span);

#define C	 (&bfs_codec_xz)
/* Small bounds, so that chains need only a few hundred KiB: set per test. */
#define T_DIRECT (256u << 10)
#define T_SPAN	 (64u << 10)

/* ---- files in memory ---- */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *p, size_t len)
{
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
}

static void zeros(struct buf *b, size_t n)
{
	uint8_t z[64] = { 0 };

	while (n) {
		size_t k = n < sizeof(z) ? n : sizeof(z);

		put(b, z, k);
		n -= k;
	}
}

/* Text that compresses about 4:1: words drawn by an LCG, with numbers. */
static uint8_t *gen_text(size_t len, uint32_t seed)
{
	static const char *const words[] = { "stream ",	 "block ", "index ", "footer ",
					     "padding ", "span\n", "check ", "lzma2 " };
	uint8_t *p = malloc(len ? len : 1);
	size_t i = 0;

	assert_non_null(p);
	while (i < len) {
		char w[32];
		int n;

		seed = seed * 1103515245u + 12345u;
		n = snprintf(w, sizeof(w), "%s%u ", words[(seed >> 16) % 8], (seed >> 8) % 1000);
		for (int j = 0; j < n && i < len; j++)
			p[i++] = (uint8_t)w[j];
	}
	return p;
}

/* One stream being built: its check and the records of its index. */
struct xs {
	lzma_check check;
	size_t nrec;
	lzma_vli unpadded[64], usize[64];
};

static void stream_begin(struct buf *b, struct xs *x, lzma_check check)
{
	lzma_stream_flags f = { .version = 0, .check = check };
	uint8_t h[LZMA_STREAM_HEADER_SIZE];

	memset(x, 0, sizeof(*x));
	x->check = check;
	assert_int_equal(lzma_stream_header_encode(&f, h), LZMA_OK);
	put(b, h, sizeof(h));
}

/*
 * One block of @len bytes at preset @preset; @sizes: its header states its
 * compressed and uncompressed sizes (as xz -T writes them), else neither
 * (as xz -T1 does).
 */
static void add_block(struct buf *b, struct xs *x, const uint8_t *data, size_t len, uint32_t preset,
		      bool sizes)
{
	lzma_options_lzma opt;
	lzma_filter filters[2] = { { .id = LZMA_FILTER_LZMA2, .options = &opt },
				   { .id = LZMA_VLI_UNKNOWN } };
	lzma_block blk = { .version = 1,
			   .check = x->check,
			   .filters = filters,
			   .compressed_size = LZMA_VLI_UNKNOWN,
			   .uncompressed_size = LZMA_VLI_UNKNOWN };
	size_t cap = lzma_block_buffer_bound(len) + 64, pos = 0;
	uint8_t *out = malloc(cap);

	assert_non_null(out);
	assert_false(lzma_lzma_preset(&opt, preset));
	if (sizes) {
		assert_int_equal(lzma_block_buffer_encode(&blk, NULL, data, len, out, &pos, cap),
				 LZMA_OK);
	} else {
		lzma_stream s = LZMA_STREAM_INIT;

		assert_int_equal(lzma_block_header_size(&blk), LZMA_OK);
		assert_int_equal(lzma_block_header_encode(&blk, out), LZMA_OK);
		pos = blk.header_size;
		assert_int_equal(lzma_block_encoder(&s, &blk), LZMA_OK);
		s.next_in = data;
		s.avail_in = len;
		s.next_out = out + pos;
		s.avail_out = cap - pos;
		assert_int_equal(lzma_code(&s, LZMA_FINISH), LZMA_STREAM_END);
		pos = cap - s.avail_out;
		lzma_end(&s);
	}
	put(b, out, pos);
	free(out);
	assert_true(x->nrec < 64);
	x->unpadded[x->nrec] = lzma_block_unpadded_size(&blk);
	x->usize[x->nrec++] = len;
}

/* The index (as recorded, or with record @lie's size changed by @by) and the footer. */
static void stream_end_lie(struct buf *b, struct xs *x, size_t lie, int64_t by)
{
	lzma_index *i = lzma_index_init(NULL);
	lzma_stream_flags f = { .version = 0, .check = x->check };
	uint8_t tmp[4096], foot[LZMA_STREAM_HEADER_SIZE];
	size_t pos = 0;

	assert_non_null(i);
	for (size_t k = 0; k < x->nrec; k++)
		assert_int_equal(lzma_index_append(i, NULL, x->unpadded[k],
						   x->usize[k] + (k == lie ? by : 0)),
				 LZMA_OK);
	assert_int_equal(lzma_index_buffer_encode(i, tmp, &pos, sizeof(tmp)), LZMA_OK);
	put(b, tmp, pos);
	f.backward_size = pos;
	assert_int_equal(lzma_stream_footer_encode(&f, foot), LZMA_OK);
	put(b, foot, sizeof(foot));
	lzma_index_end(i, NULL);
}

static void stream_end(struct buf *b, struct xs *x)
{
	stream_end_lie(b, x, SIZE_MAX, 0);
}

/* The whole @data in one stream, in blocks of @bs bytes (0: one block). */
static void make_xz(struct buf *b, const uint8_t *data, size_t len, size_t bs, lzma_check check,
		    bool sizes)
{
	struct xs x;

	stream_begin(b, &x, check);
	for (size_t off = 0; off < len; off += bs ? bs : len)
		add_block(b, &x, data + off, bs && len - off > bs ? bs : len - off, 1, sizes);
	stream_end(b, &x);
}

/* ---- reading back ---- */

struct idx_fix {
	struct bfs_index idx;
	struct bfs_io io;
};

static int scan(struct idx_fix *f, const struct buf *b)
{
	int rc;

	bfs_io_init_mem(&f->io, b->p, b->len);
	bfs_index_init(&f->idx, b->len);
	rc = C->scan(&f->io, NULL, &f->idx);
	if (rc == 0)
		rc = bfs_measure(&f->idx, &f->io, C, NULL);
	if (rc == 0)
		rc = bfs_settle(&f->idx, &f->io, C, UINT64_MAX);
	return rc;
}

/* Decode block @k from its own bytes (a copy of exactly clen). */
static int dec(struct idx_fix *f, size_t k, uint8_t *dst, uint32_t n, bool verify)
{
	const struct bfs_blk *b = &f->idx.blk[k];
	uint8_t *src = malloc(b->clen ? b->clen : 1);
	const char *why = NULL;
	int rc;

	assert_non_null(src);
	memcpy(src, f->io.mem + b->coff, b->clen);
	if (n == b->usize)
		rc = C->decode(&f->idx, k, src, dst, f->idx.blk[k].usize, verify, &why);
	else
		rc = C->decode(&f->idx, k, src, dst, n, verify, &why);
	free(src);
	if (rc < 0)
		assert_non_null(why);
	return rc;
}

/*
 * Every block in order, as the read path does (a chain continues); the
 * bytes must equal @want where they decode. Return: blocks that failed.
 */
static size_t read_all(struct idx_fix *f, const uint8_t *want, size_t want_len, bool verify)
{
	size_t bad = 0;

	for (size_t k = 0; k < f->idx.n; k++) {
		const struct bfs_blk *b = &f->idx.blk[k];
		uint8_t *dst = malloc(b->usize);

		assert_non_null(dst);
		if (b->flags & BFS_BLK_BAD) {
			bad++;
		} else if (dec(f, k, dst, b->usize, verify) == 0) {
			assert_true(b->uoff + b->usize <= want_len);
			assert_memory_equal(dst, want + b->uoff, b->usize);
		} else {
			bad++;
		}
		free(dst);
	}
	return bad;
}

static void done(struct idx_fix *f)
{
	bfs_index_destroy(&f->idx);
}

/* Scan @b, expect no damage, all of @data back in order. */
static void round_trip(const struct buf *b, const uint8_t *data, size_t len)
{
	struct idx_fix f;

	assert_int_equal(scan(&f, b), 0);
	assert_false(f.idx.broken);
	assert_int_equal(atomic_load(&f.idx.usize), len);
	assert_int_equal(read_all(&f, data, len, true), 0);
	assert_int_equal(read_all(&f, data, len, false), 0);
	done(&f);
}

static int setup(void **state)
{
	(void)state;
	bfs_codec_xz_limits(0, 0);
	return 0;
}

/* ---- tests ---- */

static void test_probe(void **state)
{
	uint8_t *d = gen_text(1000, 1);
	struct buf b = { 0 };

	(void)state;
	make_xz(&b, d, 1000, 0, LZMA_CHECK_CRC64, false);
	assert_true(C->probe(b.p, BFS_PROBE_LEN));
	assert_false(C->probe(b.p, 11));
	b.p[0] ^= 1;
	assert_false(C->probe(b.p, BFS_PROBE_LEN));
	b.p[0] ^= 1;
	b.p[7] |= 0x10; /* reserved flag bits */
	assert_false(C->probe(b.p, BFS_PROBE_LEN));
	assert_ptr_equal(bfs_codec_probe(NULL,
					 (const uint8_t *)"\xfd"
							  "7zXZ\0\0\x04\xe6\xd6\xb4\x46",
					 12),
			 C);
	free(b.p);
	free(d);
}

static void test_one_and_many_blocks(void **state)
{
	size_t len = 300000;
	uint8_t *d = gen_text(len, 2);
	static const size_t sizes[] = { 0, 65536, 100000, 299999, 300000 };

	(void)state;
	for (size_t i = 0; i < BFS_ARRAY_SIZE(sizes); i++) {
		for (int hs = 0; hs < 2; hs++) {
			struct buf b = { 0 };
			struct idx_fix f;

			make_xz(&b, d, len, sizes[i], LZMA_CHECK_CRC64, hs);
			round_trip(&b, d, len);
			assert_int_equal(scan(&f, &b), 0);
			assert_int_equal(f.idx.n, sizes[i] ? (len + sizes[i] - 1) / sizes[i] : 1);
			/* a first stat reads footer, index and header: no walk */
			assert_true(atomic_load(&f.io.nread) <= 5);
			done(&f);
			free(b.p);
		}
	}
	free(d);
}

static void test_every_check(void **state)
{
	static const lzma_check checks[] = { LZMA_CHECK_NONE, LZMA_CHECK_CRC32, LZMA_CHECK_CRC64,
					     LZMA_CHECK_SHA256 };
	size_t len = 200000;
	uint8_t *d = gen_text(len, 3);

	(void)state;
	for (size_t i = 0; i < BFS_ARRAY_SIZE(checks); i++) {
		struct buf b = { 0 };
		struct idx_fix f;

		make_xz(&b, d, len, 50000, checks[i], true);
		round_trip(&b, d, len);
		assert_int_equal(scan(&f, &b), 0);
		assert_int_equal(f.idx.blk[0].aux & 0xf, checks[i]);
		done(&f);
		/* a flipped byte in the last block's check: EILSEQ with verify only */
		if (checks[i] != LZMA_CHECK_NONE) {
			uint8_t *dst = malloc(50000);
			const struct bfs_blk *lb;

			assert_int_equal(scan(&f, &b), 0);
			lb = &f.idx.blk[f.idx.n - 1];
			b.p[lb->coff + lb->clen - 1] ^= 0x40;
			assert_int_equal(dec(&f, f.idx.n - 1, dst, lb->usize, true), -EILSEQ);
			assert_int_equal(dec(&f, f.idx.n - 1, dst, lb->usize, false), 0);
			assert_memory_equal(dst, d + lb->uoff, lb->usize);
			done(&f);
			free(dst);
		}
		free(b.p);
	}
	free(d);
}

static void test_streams_and_padding(void **state)
{
	size_t len = 120000;
	uint8_t *d = gen_text(len, 4), *all = malloc(3 * len);
	static const size_t pads[] = { 0, 4, 8, 1024, 4u << 20 };

	(void)state;
	memcpy(all, d, len);
	memcpy(all + len, d, len);
	memcpy(all + 2 * len, d, len);
	for (size_t i = 0; i < BFS_ARRAY_SIZE(pads); i++) {
		struct buf b = { 0 };
		struct idx_fix f;

		make_xz(&b, d, len, 0, LZMA_CHECK_CRC32, false);
		zeros(&b, pads[i]);
		make_xz(&b, d, len, 40000, LZMA_CHECK_SHA256, true);
		zeros(&b, pads[i]);
		make_xz(&b, d, len, 0, LZMA_CHECK_NONE, false);
		zeros(&b, pads[i]); /* padding after the last stream is allowed too */
		round_trip(&b, all, 3 * len);
		assert_int_equal(scan(&f, &b), 0);
		assert_int_equal(f.idx.n, 5);
		done(&f);
		free(b.p);
	}
	free(all);
	free(d);
}

/* Damage at the end: the forward walk serves every block before it. */
static void expect_prefix(const struct buf *b, const uint8_t *d, size_t len, size_t min_good)
{
	struct idx_fix f;
	size_t good = 0;

	assert_int_equal(scan(&f, b), 0);
	assert_true(f.idx.broken);
	assert_true(f.idx.blk[f.idx.n - 1].flags & BFS_BLK_BAD);
	assert_int_equal(read_all(&f, d, len, true), 1);
	for (size_t k = 0; k + 1 < f.idx.n; k++)
		good += f.idx.blk[k].usize;
	assert_true(good >= min_good);
	done(&f);
}

static void test_damaged_end(void **state)
{
	size_t len = 200000;
	uint8_t *d = gen_text(len, 5);
	struct buf b = { 0 };

	(void)state;
	for (int hs = 0; hs < 2; hs++) {
		make_xz(&b, d, len, 50000, LZMA_CHECK_CRC64, hs);
		size_t flen = b.len;

		/* each byte of the footer */
		for (size_t i = flen - 12; i < flen; i++) {
			b.p[i] ^= 0x01;
			expect_prefix(&b, d, len, len);
			b.p[i] ^= 0x01;
		}
		/* the index: its indicator, a size, its CRC32 */
		for (size_t i = flen - 12 - 8; i < flen - 12; i++) {
			b.p[i] ^= 0x10;
			expect_prefix(&b, d, len, len);
			b.p[i] ^= 0x10;
		}
		/* trailing garbage, a padding of 2 and of 6 bytes */
		put(&b, "garbage!", 8);
		expect_prefix(&b, d, len, len);
		b.len = flen;
		zeros(&b, 2);
		expect_prefix(&b, d, len, len);
		zeros(&b, 4);
		expect_prefix(&b, d, len, len);
		b.len = flen;
		/* truncated at every 997th byte: never a crash, only good blocks */
		for (size_t cut = 1; cut < flen; cut += 997) {
			struct buf t = { .p = b.p, .len = cut };
			struct idx_fix f;

			assert_int_equal(scan(&f, &t), 0);
			assert_true(f.idx.broken || f.idx.n == 0);
			(void)read_all(&f, d, len, true);
			done(&f);
		}
		free(b.p);
		b = (struct buf){ 0 };
	}
	free(d);
}

static void test_damaged_blocks(void **state)
{
	size_t len = 200000;
	uint8_t *d = gen_text(len, 6);
	struct buf b = { 0 };
	struct idx_fix f;
	size_t at;

	(void)state;
	make_xz(&b, d, len, 50000, LZMA_CHECK_CRC64, true);
	assert_int_equal(scan(&f, &b), 0);
	/* block 1's header (its CRC32 catches it), block 2's data */
	b.p[f.idx.blk[1].coff + 2] ^= 0x20;
	at = f.idx.blk[2].coff + f.idx.blk[2].clen / 2;
	b.p[at] ^= 0x55;
	done(&f);
	assert_int_equal(scan(&f, &b), 0);
	assert_false(f.idx.broken);
	assert_int_equal(read_all(&f, d, len, true), 2);
	assert_int_equal(read_all(&f, d, len, false), 2);
	done(&f);
	free(b.p);
	free(d);
}

/*
 * An index whose CRC32 is right but whose size for block 1 is not: the
 * size differs from the others', so it is measured before a read relies
 * on it, and block 1 fails alone; the blocks after it stay where their
 * data puts them. Headers with and without sizes.
 */
static void test_lying_index(void **state)
{
	size_t len = 200000;
	uint8_t *d = gen_text(len, 7);

	(void)state;
	for (int hs = 0; hs < 2; hs++) {
		for (int by = -1000; by <= 1000; by += 2000) {
			struct buf b = { 0 };
			struct idx_fix f;
			struct xs x;

			stream_begin(&b, &x, LZMA_CHECK_CRC32);
			for (size_t off = 0; off < len; off += 50000)
				add_block(&b, &x, d + off, 50000, 1, hs);
			stream_end_lie(&b, &x, 1, by);
			assert_int_equal(scan(&f, &b), 0);
			assert_true(f.idx.blk[1].flags & BFS_BLK_BAD);
			assert_int_equal(f.idx.blk[2].uoff, 100000);
			/* the size shown stays what the index said; the end reads as damage */
			assert_int_equal(atomic_load(&f.idx.usize), len + by);
			assert_true(f.idx.blk[f.idx.n - 1].flags & BFS_BLK_BAD);
			{
				uint8_t *dst = malloc(50000);

				assert_int_equal(dec(&f, 0, dst, 50000, true), 0);
				assert_memory_equal(dst, d, 50000);
				assert_int_equal(dec(&f, 2, dst, 50000, true), 0);
				assert_memory_equal(dst, d + 100000, 50000);
				free(dst);
			}
			done(&f);
			free(b.p);
		}
	}
	free(d);
}

static void test_prefix(void **state)
{
	size_t len = 100000;
	uint8_t *d = gen_text(len, 8), *dst = malloc(len);
	struct buf b = { 0 };
	struct idx_fix f;

	(void)state;
	make_xz(&b, d, len, 0, LZMA_CHECK_SHA256, false);
	assert_int_equal(scan(&f, &b), 0);
	for (uint32_t n = 1; n < len; n = n * 3 + 7) {
		assert_int_equal(dec(&f, 0, dst, n, true), 0);
		assert_memory_equal(dst, d, n);
	}
	done(&f);
	free(b.p);
	free(dst);
	free(d);
}

/* ---- chains ---- */

/* Decode span @k of a chain after resume() says where to start, as the read path does. */
static void read_span(struct idx_fix *f, size_t k, const uint8_t *want)
{
	size_t r = C->resume(&f->idx, k);

	assert_true(r <= k);
	for (size_t j = r; j <= k; j++) {
		uint8_t *dst = malloc(f->idx.blk[j].usize);

		assert_int_equal(dec(f, j, dst, f->idx.blk[j].usize, true), 0);
		assert_memory_equal(dst, want + f->idx.blk[j].uoff, f->idx.blk[j].usize);
		free(dst);
	}
}

static void test_chain(void **state)
{
	size_t len = 1000000;
	uint8_t *d = gen_text(len, 9), *dst = malloc(T_SPAN);
	struct buf b = { 0 };
	struct idx_fix f;

	(void)state;
	bfs_codec_xz_limits(T_DIRECT, T_SPAN);
	for (int hs = 0; hs < 2; hs++) {
		b.len = 0;
		make_xz(&b, d, len, 0, LZMA_CHECK_CRC64, hs);
		round_trip(&b, d, len);
		assert_int_equal(scan(&f, &b), 0);
		assert_int_equal(f.idx.n, (len + T_SPAN - 1) / T_SPAN);
		for (size_t k = 0; k < f.idx.n; k++) {
			assert_true(f.idx.blk[k].flags & BFS_BLK_CHAIN);
			assert_int_equal(!!(f.idx.blk[k].aux & 0x10), k == 0);
			assert_int_equal(!!(f.idx.blk[k].aux & 0x20), k == f.idx.n - 1);
		}
		/* nothing parked: span 5 cannot start, and resume says so */
		assert_int_equal(dec(&f, 5, dst, T_SPAN, true), -EAGAIN);
		assert_int_equal(C->resume(&f.idx, 5), 0);
		read_span(&f, 5, d);
		assert_int_equal(C->resume(&f.idx, 6), 6);
		assert_int_equal(C->resume(&f.idx, 9), 6);
		/* a prefix of span 6 still parks its decoder at span 7 */
		assert_int_equal(dec(&f, 6, dst, 100, true), 0);
		assert_memory_equal(dst, d + 6 * T_SPAN, 100);
		assert_int_equal(C->resume(&f.idx, 7), 7);
		assert_int_equal(C->resume(&f.idx, 6), 0);
		/* far spans, more than the pool holds: each read still exact */
		read_span(&f, 12, d);
		read_span(&f, 3, d);
		read_span(&f, 14, d);
		read_span(&f, 1, d);
		read_span(&f, 9, d);
		read_span(&f, f.idx.n - 1, d);
		read_span(&f, 10, d);
		done(&f);
	}
	free(b.p);
	free(dst);
	free(d);
	bfs_codec_xz_limits(0, 0);
}

/*
 * The mount's budget of parked decoders (codec.h): over it, a file's
 * oldest parked decoders go, never the one being parked; freeing the
 * index gives their bytes back.
 */
static void test_park_budget(void **state)
{
	size_t len = 1000000, one, old;
	uint8_t *d = gen_text(len, 21);
	struct buf b = { 0 };
	struct idx_fix f;

	(void)state;
	bfs_codec_xz_limits(T_DIRECT, T_SPAN);
	make_xz(&b, d, len, 0, LZMA_CHECK_CRC64, 0);
	assert_int_equal(scan(&f, &b), 0);
	assert_int_equal(bfs_parked_bytes(), 0);
	old = bfs_park_set_budget(0);
	read_span(&f, 5, d); /* parks one at 6 */
	one = bfs_parked_bytes();
	assert_true(one > 0);
	assert_int_equal(C->resume(&f.idx, 6), 6);
	read_span(&f, 2, d); /* from the start, parks at 3: 6's goes */
	assert_int_equal(C->resume(&f.idx, 6), 3);
	assert_int_equal(bfs_parked_bytes(), one);
	bfs_park_set_budget(2 * one);
	read_span(&f, 7, d); /* on from 3, parks at 8 */
	read_span(&f, 1, d); /* from the start, parks at 2: both stay */
	assert_int_equal(C->resume(&f.idx, 9), 8);
	assert_int_equal(C->resume(&f.idx, 3), 2);
	assert_int_equal(bfs_parked_bytes(), 2 * one);
	read_span(&f, 11, d); /* takes 8's, parks at 12 */
	read_span(&f, 0, d);  /* a third: parks at 1, the oldest (2's) goes */
	assert_int_equal(C->resume(&f.idx, 3), 1);
	assert_int_equal(C->resume(&f.idx, 13), 12);
	assert_int_equal(bfs_parked_bytes(), 2 * one);
	done(&f);
	assert_int_equal(bfs_parked_bytes(), 0);
	assert_int_equal(bfs_park_set_budget(old), 2 * one);
	free(b.p);
	free(d);
	bfs_codec_xz_limits(0, 0);
}

/* A block of exactly 12 spans: no empty span at its end. */
static void test_chain_exact(void **state)
{
	size_t len = 12 * T_SPAN;
	uint8_t *d = gen_text(len, 13);
	struct buf b = { 0 };
	struct idx_fix f;

	(void)state;
	bfs_codec_xz_limits(T_DIRECT, T_SPAN);
	make_xz(&b, d, len, 0, LZMA_CHECK_CRC32, false);
	round_trip(&b, d, len);
	assert_int_equal(scan(&f, &b), 0);
	assert_int_equal(f.idx.n, 12);
	assert_int_equal(f.idx.blk[11].usize, T_SPAN);
	assert_true(f.idx.blk[11].aux & 0x20);
	done(&f);
	free(b.p);
	free(d);
	bfs_codec_xz_limits(0, 0);
}

/* Big blocks among small ones, several streams: spans and direct blocks mixed. */
static void test_chain_mixed(void **state)
{
	size_t len = 600000;
	uint8_t *d = gen_text(len, 10), *all = malloc(2 * len);
	struct buf b = { 0 };
	struct idx_fix f;
	struct xs x;
	size_t chained = 0, direct = 0;

	(void)state;
	bfs_codec_xz_limits(T_DIRECT, T_SPAN);
	memcpy(all, d, len);
	memcpy(all + len, d, len);
	stream_begin(&b, &x, LZMA_CHECK_CRC32);
	add_block(&b, &x, d, 100000, 1, true);
	add_block(&b, &x, d + 100000, 400000, 1, true); /* chain */
	add_block(&b, &x, d + 500000, 100000, 1, false);
	stream_end(&b, &x);
	zeros(&b, 8);
	make_xz(&b, d, len, 0, LZMA_CHECK_SHA256, false); /* chain */
	round_trip(&b, all, 2 * len);
	assert_int_equal(scan(&f, &b), 0);
	for (size_t k = 0; k < f.idx.n; k++)
		(f.idx.blk[k].flags & BFS_BLK_CHAIN) ? chained++ : direct++;
	assert_int_equal(direct, 2);
	assert_int_equal(chained, (400000 + T_SPAN - 1) / T_SPAN + (len + T_SPAN - 1) / T_SPAN);
	done(&f);
	free(b.p);
	free(all);
	free(d);
	bfs_codec_xz_limits(0, 0);
}

/*
 * A chained index comes back from the index cache whole and reads exact;
 * entries whose chain does not hold together are refused.
 */
static void test_chain_cache(void **state)
{
	size_t len = 600000;
	uint8_t *d = gen_text(len, 12), *e;
	struct bfs_icache_key k = { .dev = 1, .ino = 2, .mtime_sec = 3 };
	struct buf b = { 0 };
	struct idx_fix f, g;
	const char *why;
	size_t elen, chained = 0;

	(void)state;
	bfs_codec_xz_limits(T_DIRECT, T_SPAN);
	b.len = 0;
	make_xz(&b, d, 100000, 0, LZMA_CHECK_CRC32, true);		   /* one direct block */
	make_xz(&b, d + 100000, len - 100000, 0, LZMA_CHECK_CRC64, false); /* a chain */
	assert_int_equal(scan(&f, &b), 0);
	for (size_t j = 0; j < f.idx.n; j++)
		chained += !!(f.idx.blk[j].flags & BFS_BLK_CHAIN);
	assert_int_equal(chained, (len - 100000 + T_SPAN - 1) / T_SPAN);
	k.size = b.len;
	assert_int_equal(bfs_icache_encode(&k, C, &f.idx, &e, &elen), 0);
	g.io = f.io;
	bfs_index_init(&g.idx, b.len);
	assert_int_equal(bfs_icache_decode(e, elen, &k, C, &g.idx, &why), 0);
	assert_int_equal(g.idx.n, f.idx.n);
	assert_non_null(g.idx.priv);
	assert_int_equal(read_all(&g, d, len, true), 0);
	done(&g);
	for (int c = 0; c < 4; c++) {
		uint8_t *blk = e + BFS_ICACHE_HDR_LEN +
			       (c == 0 ? 1 :
				c == 1 ? 2 :
					 f.idx.n - 1) *
				       BFS_ICACHE_ENTRY_LEN;
		uint8_t save[BFS_ICACHE_ENTRY_LEN];

		memcpy(save, blk, sizeof(save));
		if (c == 0)
			bfs_put_le32(blk + 20, 4); /* the chain's start unmarked */
		else if (c == 1)
			bfs_put_le64(blk, bfs_le64(blk) + 1); /* a gap in the chain */
		else if (c == 2)
			bfs_put_le32(blk + 20, 4); /* its end unmarked */
		else
			bfs_put_le32(blk + 20, 0x20 | 3); /* a check xz does not define */
		/* (the entry's checksum is redone so that only the codec's checks speak) */
		bfs_put_le32(e + elen - 4, bfs_xxh32(e, elen - 4, 0));
		bfs_index_init(&g.idx, b.len);
		assert_int_not_equal(bfs_icache_decode(e, elen, &k, C, &g.idx, &why), 0);
		done(&g);
		memcpy(blk, save, sizeof(save));
	}
	free(e);
	done(&f);
	free(b.p);
	free(d);
	bfs_codec_xz_limits(0, 0);
}

/*
 * The check of a chained block, which the xz index states (open spans):
 * with verify the block is decoded whole when first read and every span
 * fails; without, every span reads.
 */
static void test_chain_check(void **state)
{
	size_t len = 500000;
	uint8_t *d = gen_text(len, 11);
	struct buf b = { 0 };
	struct idx_fix f;
	size_t last;

	(void)state;
	bfs_codec_xz_limits(T_DIRECT, T_SPAN);
	make_xz(&b, d, len, 0, LZMA_CHECK_CRC64, false);
	/* the check: the 8 bytes before the index (Backward Size in the footer) */
	b.p[b.len - 12 - (bfs_le32(b.p + b.len - 8) + 1) * 4 - 1] ^= 0x08;
	assert_int_equal(scan(&f, &b), 0);
	assert_false(f.idx.broken);
	last = f.idx.n - 1;
	assert_true(f.idx.blk[last].flags & BFS_BLK_OPEN);
	for (size_t k = 0; k <= last; k++) {
		uint8_t *dst = malloc(f.idx.blk[k].usize);

		assert_int_equal(dec(&f, k, dst, f.idx.blk[k].usize, true), -EILSEQ);
		free(dst);
	}
	assert_int_equal(read_all(&f, d, len, false), 0);
	done(&f);
	free(b.p);
	free(d);
	bfs_codec_xz_limits(0, 0);
}

/*
 * The spill (spill.h): with verify the proof of an open chain writes its
 * output there, and every span is then read from it, in any order, a
 * prefix too, without a decoder; a bad check spills nothing; a chain
 * bigger than the budget is decoded as without a spill.
 */
static void test_chain_spilled(void **state)
{
	size_t len = 1000000, n;
	uint8_t *d = gen_text(len, 16), *dst = malloc(T_SPAN);
	char dir[] = "/tmp/test_xz_spill.XXXXXX";
	struct bfs_spill_stats st0, st;
	struct buf b = { 0 };
	struct idx_fix f;
	size_t csum;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(bfs_spill_configure(dir, 4 << 20), 0);
	bfs_codec_xz_limits(T_DIRECT, T_SPAN);
	make_xz(&b, d, len, 0, LZMA_CHECK_CRC64, false);
	assert_int_equal(scan(&f, &b), 0);
	n = f.idx.n;
	assert_true(f.idx.blk[0].flags & BFS_BLK_OPEN);
	bfs_spill_stats(&st0);
	assert_int_equal(C->resume(&f.idx, 5), 0); /* not proven yet: from the start */
	read_span(&f, 0, d);
	bfs_spill_stats(&st);
	assert_int_equal(st.proofs - st0.proofs, 1);
	assert_int_equal(st.sealed - st0.sealed, 1);
	assert_int_equal(st.bytes, len);
	/* spilled: any span is where it is wanted, no decoder parked anywhere */
	for (size_t k = 0; k < n; k++)
		assert_int_equal(C->resume(&f.idx, k), k);
	read_span(&f, n - 1, d);
	read_span(&f, 5, d);
	assert_int_equal(dec(&f, 7, dst, 100, true), 0);
	assert_memory_equal(dst, d + 7 * T_SPAN, 100);
	assert_int_equal(read_all(&f, d, len, true), 0);
	bfs_spill_stats(&st);
	assert_int_equal(st.proofs - st0.proofs, 1); /* decoded once */
	assert_int_equal(st.reads - st0.reads, 4 + n);
	done(&f);
	bfs_spill_stats(&st);
	assert_int_equal(st.bytes, 0); /* gone with the index */

	/* a bad check: proven bad, nothing spilled, nothing served */
	csum = b.len - 12 - (bfs_le32(b.p + b.len - 8) + 1) * 4 - 1;
	b.p[csum] ^= 0x08;
	assert_int_equal(scan(&f, &b), 0);
	bfs_spill_stats(&st0);
	assert_int_equal(read_all(&f, d, len, true), n);
	bfs_spill_stats(&st);
	assert_int_equal(st.sealed - st0.sealed, 0);
	assert_int_equal(st.bytes, 0);
	done(&f);
	b.p[csum] ^= 0x08;

	/* a budget smaller than the chain: decoded, exact */
	assert_int_equal(bfs_spill_configure(dir, len / 2), 0);
	assert_int_equal(scan(&f, &b), 0);
	bfs_spill_stats(&st0);
	assert_int_equal(read_all(&f, d, len, true), 0);
	bfs_spill_stats(&st);
	assert_int_equal(st.proofs - st0.proofs, 1);
	assert_int_equal(st.sealed - st0.sealed, 0);
	assert_int_equal(st.reads - st0.reads, 0);
	done(&f);
	bfs_spill_shutdown();
	assert_int_equal(rmdir(dir), 0);
	free(b.p);
	free(dst);
	free(d);
	bfs_codec_xz_limits(0, 0);
}

/*
 * Damage inside a chained block. Open spans (the index intact): with
 * verify nothing of the block is served; without, the spans before the
 * damage are, and then the rest fail. A walked block (a truncated file,
 * walked forwards): the spans before the cut, then the file ends.
 */
static void test_chain_damage(void **state)
{
	size_t len = 800000;
	uint8_t *d = gen_text(len, 12), *dst = malloc(T_SPAN);
	struct buf b = { 0 };
	struct idx_fix f;
	size_t good = 0, k;

	(void)state;
	bfs_codec_xz_limits(T_DIRECT, T_SPAN);
	make_xz(&b, d, len, 0, LZMA_CHECK_CRC64, false);
	b.p[b.len / 2] ^= 0xff;
	assert_int_equal(scan(&f, &b), 0);
	assert_false(f.idx.broken);
	assert_int_equal(read_all(&f, d, len, true), f.idx.n);
	for (k = 0; k < f.idx.n; k++) {
		assert_true(f.idx.blk[k].flags & BFS_BLK_OPEN);
		if (dec(&f, k, dst, f.idx.blk[k].usize, false) != 0)
			break;
		assert_memory_equal(dst, d + f.idx.blk[k].uoff, f.idx.blk[k].usize);
		good += f.idx.blk[k].usize;
	}
	assert_true(good >= T_SPAN * 2);
	assert_true(k < f.idx.n);
	done(&f);
	/* truncated in the middle: the same, by the forward walk */
	b.len = b.len / 2 / 4 * 4;
	assert_int_equal(scan(&f, &b), 0);
	assert_true(f.idx.broken);
	assert_true(f.idx.n > 2);
	for (k = 0; k + 1 < f.idx.n; k++)
		assert_int_equal(f.idx.blk[k].flags, BFS_BLK_CHAIN);
	assert_int_equal(read_all(&f, d, len, true), 1);
	done(&f);
	free(b.p);
	free(dst);
	free(d);
	bfs_codec_xz_limits(0, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_probe, setup),
		cmocka_unit_test_setup(test_one_and_many_blocks, setup),
		cmocka_unit_test_setup(test_every_check, setup),
		cmocka_unit_test_setup(test_streams_and_padding, setup),
		cmocka_unit_test_setup(test_damaged_end, setup),
		cmocka_unit_test_setup(test_damaged_blocks, setup),
		cmocka_unit_test_setup(test_lying_index, setup),
		cmocka_unit_test_setup(test_prefix, setup),
		cmocka_unit_test_setup(test_chain, setup),
		cmocka_unit_test_setup(test_park_budget, setup),
		cmocka_unit_test_setup(test_chain_exact, setup),
		cmocka_unit_test_setup(test_chain_cache, setup),
		cmocka_unit_test_setup(test_chain_mixed, setup),
		cmocka_unit_test_setup(test_chain_check, setup),
		cmocka_unit_test_setup(test_chain_spilled, setup),
		cmocka_unit_test_setup(test_chain_damage, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
