// SPDX-License-Identifier: MIT
/*
 * zstd codec: probe and sniff (past skippable frames), XXH64 against
 * libzstd's frame checksums, the frame walk (content size present or not,
 * several frames, skippable and empty frames), the seek table (with and
 * without checksums, tables that lie or are malformed), big frames as
 * chained spans (decoded in order, resumed, -EAGAIN with no decoder
 * parked), damage (truncation, flipped bits, garbage, large windows,
 * dictionaries), the index cache round trip, and the read path of
 * bfs_file over a chain: sequential, random and concurrent readers and
 * decode-ahead, each span decoded about once. Files are made in memory
 * with libzstd.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/park.h"
#include "blockfs/file.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/index_cache.h"
#include "blockfs/io.h"
#include "blockfs/push.h"
#include "blockfs/spill.h"
#include "blockfs/stats.h"
#include "blockfs/workq.h"
#include "blockfs/xxh32.h"

#define MiB (1u << 20)

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

static void put_le32(struct buf *b, uint32_t v)
{
	uint8_t x[4];

	bfs_put_le32(x, v);
	put(b, x, 4);
}

/* Log-like text, about 4:1 under zstd. */
static uint8_t *gen_text(size_t len, uint32_t seed)
{
	static const char *const words[] = { "span ",	 "frame ",   "window ", "zstd ",
					     "decoder ", "parked\n", "random ", "offset " };
	uint8_t *d = malloc(len + 32);

	assert_non_null(d);
	for (size_t i = 0; i < len;) {
		seed = seed * 1103515245u + 12345u;
		i += (size_t)sprintf((char *)d + i, "%s%u ", words[(seed >> 16) % 8],
				     (seed >> 8) % 100000);
	}
	return d;
}

/*
 * One frame of @d: @fcs says whether the header holds the content size,
 * @csum adds the content checksum, @flush ends a block every so many
 * bytes (0: never).
 */
static void frame(struct buf *b, const uint8_t *d, size_t len, int level, bool fcs, bool csum,
		  size_t flush)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();
	size_t cap = ZSTD_compressBound(len) + (flush ? (len / flush + 1) * 8 : 0) + 64;
	uint8_t *out = malloc(cap);
	ZSTD_outBuffer o = { .dst = out, .size = cap };
	size_t at = 0;

	assert_non_null(c);
	assert_non_null(out);
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, csum);
	ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, fcs);
	if (fcs)
		ZSTD_CCtx_setPledgedSrcSize(c, len);
	for (;;) {
		size_t step = flush && len - at > flush ? flush : len - at;
		ZSTD_inBuffer in = { .src = d + at, .size = step };
		bool last = at + step == len;
		size_t r;

		do {
			r = ZSTD_compressStream2(c, &o, &in, last ? ZSTD_e_end : ZSTD_e_flush);
			assert_false(ZSTD_isError(r));
		} while (r != 0);
		at += step;
		if (last)
			break;
	}
	put(b, out, o.pos);
	free(out);
	ZSTD_freeCCtx(c);
}

static void skippable(struct buf *b, uint32_t nibble, uint32_t len)
{
	put_le32(b, 0x184D2A50u | nibble);
	put_le32(b, len);
	for (uint32_t i = 0; i < len; i++)
		put(b, "s", 1);
}

/*
 * A seekable-format file: @d in frames of @fsize bytes, then the table
 * (checksums when @csum: the low 32 bits of XXH64, taken here from
 * libzstd's own frame checksums).
 */
static void seekable(struct buf *b, const uint8_t *d, size_t len, size_t fsize, bool csum)
{
	struct buf t = { 0 };
	uint32_t n = 0;

	for (size_t at = 0; at < len; at += fsize, n++) {
		size_t u = len - at < fsize ? len - at : fsize, before = b->len;

		frame(b, d + at, u, 3, true, true, 0);
		put_le32(&t, (uint32_t)(b->len - before));
		put_le32(&t, (uint32_t)u);
		if (csum)
			put_le32(&t, bfs_le32(b->p + b->len - 4));
	}
	put_le32(b, 0x184D2A5Eu);
	put_le32(b, (uint32_t)t.len + 9);
	put(b, t.p, t.len);
	put_le32(b, n);
	put(b, (uint8_t[]){ csum ? 0x80 : 0 }, 1);
	put_le32(b, 0x8F92EAB1u);
	free(t.p);
}

static int scan_rc(const struct buf *f, struct bfs_index *idx)
{
	struct bfs_io io;
	int rc;

	bfs_io_init_mem(&io, f->p, f->len);
	bfs_index_init(idx, f->len);
	rc = bfs_codec_zstd.scan(&io, NULL, idx);
	if (rc == 0)
		assert_int_equal(bfs_measure(idx, &io, &bfs_codec_zstd, NULL), 0);
	return rc;
}

static void scan(const struct buf *f, struct bfs_index *idx)
{
	assert_int_equal(scan_rc(f, idx), 0);
}

/* Decode block @k as the read path does (decode); with verify. */
static int decode_k(const struct bfs_index *idx, const struct buf *f, size_t k, uint8_t *dst,
		    bool verify)
{
	const struct bfs_blk *b = &idx->blk[k];
	uint8_t *src = malloc(b->clen ? b->clen : 1);
	const char *why = NULL;
	int rc;

	assert_non_null(src);
	memcpy(src, f->p + b->coff, b->clen);
	rc = bfs_codec_zstd.decode(idx, k, src, dst, idx->blk[k].usize, verify, &why);
	if (rc < 0)
		assert_non_null(why);
	free(src);
	return rc;
}

/*
 * Settle everything, then decode every block in order (a chain resumes
 * from where its last block parked the decoder) and compare with @d.
 * Return: bytes that decoded and matched from the start, up to the first
 * block that fails.
 */
static uint64_t check_all(struct bfs_index *idx, const struct buf *f, const uint8_t *d, size_t len)
{
	struct bfs_io io;

	bfs_io_init_mem(&io, f->p, f->len);
	assert_int_equal(bfs_settle(idx, &io, &bfs_codec_zstd, UINT64_MAX), 0);
	for (size_t k = 0; k < idx->n; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		uint8_t *out = malloc(b->usize);

		assert_non_null(out);
		if ((b->flags & BFS_BLK_BAD) || decode_k(idx, f, k, out, true) != 0) {
			free(out);
			return b->uoff;
		}
		assert_true(b->uoff + b->usize <= len);
		assert_memory_equal(out, d + b->uoff, b->usize);
		free(out);
	}
	return atomic_load(&idx->usize);
}

static size_t count_flag(const struct bfs_index *idx, uint32_t flag)
{
	size_t n = 0;

	for (size_t k = 0; k < idx->n; k++)
		n += (idx->blk[k].flags & flag) != 0;
	return n;
}

/* ---- probe, sniff, XXH64 ---- */

static void test_probe_and_sniff(void **state)
{
	uint8_t *d = gen_text(1000, 1);
	struct buf f = { 0 }, g = { 0 };
	struct bfs_io io;

	(void)state;
	frame(&f, d, 1000, 3, true, false, 0);
	assert_true(bfs_codec_zstd.probe(f.p, 5));
	assert_false(bfs_codec_zstd.probe(f.p, 4));
	assert_false(bfs_codec_lz4.probe(f.p, f.len < 32 ? f.len : 32));
	f.p[4] |= 1u << 3; /* reserved bit */
	assert_false(bfs_codec_zstd.probe(f.p, 32));
	f.p[4] &= (uint8_t) ~(1u << 3);
	/* pzstd's layout: a skippable frame before each frame; past 4 of them */
	for (int i = 0; i < 4; i++)
		skippable(&g, (uint32_t)i, 40);
	put(&g, f.p, f.len);
	assert_false(bfs_codec_zstd.probe(g.p, 32));
	assert_int_equal(bfs_codec_zstd.prelude(g.p, 32), 48);
	bfs_io_init_mem(&io, g.p, g.len);
	assert_ptr_equal(bfs_codec_sniff(NULL, &io), &bfs_codec_zstd);
	/* after skippable frames, something that is neither LZ4 nor zstd */
	g.len = 4 * 48;
	put(&g, "\x1f\x8b\x08\x00plain gzip header.....", 26);
	bfs_io_init_mem(&io, g.p, g.len);
	assert_null(bfs_codec_sniff(NULL, &io));
	free(f.p);
	free(g.p);
	free(d);
}

static void test_xxh64_matches_frame_checksums(void **state)
{
	(void)state;
	for (size_t len = 0; len < 300; len += 1 + len / 8) {
		uint8_t *d = gen_text(len, (uint32_t)len);
		struct buf f = { 0 };

		frame(&f, d, len, 1, true, true, 0);
		assert_int_equal(bfs_zstd_xxh64_low(d, len), bfs_le32(f.p + f.len - 4));
		free(f.p);
		free(d);
	}
}

/* ---- the frame walk ---- */

static void test_one_frame(void **state)
{
	size_t len = 3 * MiB;
	uint8_t *d = gen_text(len, 2);
	struct bfs_index idx;
	struct buf f = { 0 };

	(void)state;
	frame(&f, d, len, 3, true, true, 0);
	scan(&f, &idx);
	assert_int_equal(idx.n, 1);
	assert_int_equal(idx.blk[0].usize, len);
	assert_int_equal(idx.blk[0].clen, f.len);
	assert_int_equal(idx.source, BFS_SRC_WALK);
	assert_int_equal(check_all(&idx, &f, d, len), len);
	/* a prefix decodes alone */
	{
		uint8_t *out = malloc(5000);
		const char *why;

		assert_int_equal(bfs_codec_zstd.decode(&idx, 0, f.p, out, 5000, true, &why), 0);
		assert_memory_equal(out, d, 5000);
		free(out);
	}
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

static void test_frames_skippable_empty_nofcs(void **state)
{
	size_t len = 2 * MiB;
	uint8_t *d = gen_text(len, 3);
	struct bfs_index idx;
	struct buf f = { 0 };

	(void)state;
	skippable(&f, 1, 100);
	frame(&f, d, MiB / 2, 1, true, false, 0);
	frame(&f, d, 0, 3, true, true, 0);   /* empty, with FCS */
	frame(&f, d, 0, 3, false, false, 0); /* empty, without */
	skippable(&f, 15, 0);
	frame(&f, d + MiB / 2, MiB / 2, 5, false, true, 0); /* no FCS: measured */
	frame(&f, d + MiB, 300000, 3, false, false, 10000); /* flushed, no FCS */
	skippable(&f, 0xE, 9);
	frame(&f, d + MiB + 300000, len - MiB - 300000, 19, true, false, 0);
	scan(&f, &idx);
	assert_false(idx.broken);
	assert_int_equal(atomic_load(&idx.usize), len);
	assert_int_equal(idx.n, 4);
	assert_int_equal(count_flag(&idx, BFS_BLK_CHAIN), 0);
	assert_int_equal(check_all(&idx, &f, d, len), len);
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

/* Frames of odd sizes: the walk distrusts FCS it has not seen decode. */
static void test_odd_fcs_is_claimed(void **state)
{
	size_t len = 3 * MiB;
	uint8_t *d = gen_text(len, 4);
	struct bfs_index idx;
	struct buf f = { 0 };

	(void)state;
	for (int i = 0; i < 4; i++)
		frame(&f, d + (size_t)i * (MiB / 2), MiB / 2, 3, true, false, 0);
	frame(&f, d + 2 * MiB, MiB / 3, 3, true, false, 0); /* odd, not last */
	frame(&f, d + 2 * MiB + MiB / 3, MiB - MiB / 3, 3, true, false, 0);
	scan(&f, &idx);
	assert_int_equal(idx.n, 6);
	assert_int_equal(idx.blk[4].flags, BFS_BLK_GUESS | BFS_BLK_CLAIMED);
	assert_int_equal(idx.blk[5].flags, 0);
	assert_int_equal(check_all(&idx, &f, d, len), len);
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

/* ---- the seek table ---- */

static void test_seek_table(void **state)
{
	size_t len = MiB + 12345;
	uint8_t *d = gen_text(len, 5);

	(void)state;
	for (int csum = 0; csum < 2; csum++) {
		struct bfs_index idx;
		struct buf f = { 0 };

		seekable(&f, d, len, 64 << 10, csum);
		scan(&f, &idx);
		assert_int_equal(idx.source, BFS_SRC_SEEKTABLE);
		assert_int_equal(idx.n, (len + (64 << 10) - 1) / (64 << 10));
		assert_int_equal(count_flag(&idx, BFS_BLK_CSUM), csum ? idx.n : 0);
		assert_int_equal(count_flag(&idx, BFS_BLK_GUESS), 0);
		assert_int_equal(check_all(&idx, &f, d, len), len);
		if (csum) {
			uint8_t *out = malloc(64 << 10);

			/* a table checksum that lies: caught with verify, not without */
			idx.blk[3].aux ^= 1;
			assert_int_equal(decode_k(&idx, &f, 3, out, true), -EILSEQ);
			assert_int_equal(decode_k(&idx, &f, 3, out, false), 0);
			assert_memory_equal(out, d + 3 * (64 << 10), 64 << 10);
			free(out);
		}
		bfs_index_destroy(&idx);
		free(f.p);
	}
	free(d);
}

/* Offsets into a seekable file's table: entry i's sizes and the footer. */
static uint8_t *entry(struct buf *f, size_t i, bool csum)
{
	uint32_t n = bfs_le32(f->p + f->len - 9);

	return f->p + f->len - 9 - (size_t)(n - i) * (csum ? 12 : 8);
}

static void test_seek_table_lies(void **state)
{
	size_t len = MiB, fs = 64 << 10;
	uint8_t *d = gen_text(len, 6);

	(void)state;
	for (int lie = 0; lie < 6; lie++) {
		struct bfs_index idx;
		struct buf f = { 0 };
		uint64_t good;
		uint8_t *e;

		seekable(&f, d, len, fs, false);
		e = entry(&f, 5, false);
		switch (lie) {
		case 0: /* two decompressed sizes swapped the wrong way: sum the same */
			bfs_put_le32(e + 4, (uint32_t)fs - 100);
			bfs_put_le32(e + 12, (uint32_t)fs + 100);
			break;
		case 1: /* compressed sizes that do not tile the file */
			bfs_put_le32(e, bfs_le32(e) + 1);
			break;
		case 2: /* reserved descriptor bits */
			f.p[f.len - 5] |= 0x04;
			break;
		case 3: /* a frame count that does not match the table's size */
			bfs_put_le32(f.p + f.len - 9, bfs_le32(f.p + f.len - 9) + 1);
			break;
		case 4: /* the last frame's size against its FCS */
			e = entry(&f, bfs_le32(f.p + f.len - 9) - 1, false);
			bfs_put_le32(e + 4, bfs_le32(e + 4) + 1);
			break;
		default: /* a sizes shift between two frames: both odd */
			bfs_put_le32(e, bfs_le32(e) - 1);
			bfs_put_le32(e + 8, bfs_le32(e + 8) + 1);
			break;
		}
		scan(&f, &idx);
		if (lie == 0) {
			/* odd sizes are claims: measured in order, the lie poisons */
			assert_int_equal(idx.source, BFS_SRC_SEEKTABLE);
			assert_int_equal(idx.blk[5].flags & BFS_BLK_CLAIMED, BFS_BLK_CLAIMED);
		} else if (lie != 5) {
			assert_int_equal(idx.source, BFS_SRC_WALK); /* no table: walked */
		}
		good = check_all(&idx, &f, d, len);
		assert_true(good >= 5 * fs);
		if (lie >= 1 && lie <= 3)
			assert_int_equal(good, len);
		bfs_index_destroy(&idx);
		free(f.p);
	}
	free(d);
}

/* ---- big frames: chains of spans ---- */

/*
 * One big frame, with a content size (open spans: the scan walks only the
 * block headers) or without (the scan decodes it and records the spans).
 */
static void chain_in_order_and_resume(bool fcs)
{
	size_t len = 34 * MiB + 777;
	uint8_t *d = gen_text(len, 7), *out = malloc(MiB);
	struct bfs_index idx;
	struct buf f = { 0 };

	assert_non_null(out);
	frame(&f, d, len, 1, fcs, true, 0);
	scan(&f, &idx);
	assert_int_equal(idx.n, 35);
	assert_int_equal(count_flag(&idx, BFS_BLK_CHAIN), 35);
	assert_int_equal(count_flag(&idx, BFS_BLK_OPEN), fcs ? 35 : 0);
	assert_int_equal(idx.blk[0].coff, 0);
	assert_int_equal(idx.blk[34].coff + idx.blk[34].clen, f.len);
	if (fcs)
		assert_int_equal(idx.blk[34].coff, 0); /* each states the whole frame */
	assert_int_equal(atomic_load(&idx.nexact), 35);
	/* nothing parked: span 5 needs the frame's start, and cannot be decoded alone */
	assert_int_equal(bfs_codec_zstd.resume(&idx, 5), 0);
	assert_int_equal(decode_k(&idx, &f, 5, out, true), -EAGAIN);
	/* in order from 0 to 6: each parks the decoder at the next */
	for (size_t k = 0; k <= 6; k++) {
		assert_int_equal(bfs_codec_zstd.resume(&idx, 6), k);
		assert_int_equal(decode_k(&idx, &f, k, out, true), 0);
		assert_memory_equal(out, d + k * MiB, MiB);
	}
	assert_true(bfs_zstd_parked_bytes() > 0);
	/* span 3 again: from the start (the decoder stands at 7) */
	assert_int_equal(bfs_codec_zstd.resume(&idx, 3), 0);
	assert_int_equal(bfs_codec_zstd.resume(&idx, 20), 7);
	assert_int_equal(decode_k(&idx, &f, 3, out, true), -EAGAIN);
	/* the rest, from 7, to the end (the checksum at the end of the frame) */
	for (size_t k = 7; k < idx.n; k++) {
		assert_int_equal(decode_k(&idx, &f, k, out, true), 0);
		assert_memory_equal(out, d + k * MiB, idx.blk[k].usize);
	}
	assert_int_equal(bfs_codec_zstd.resume(&idx, 34), 0); /* done: nothing parked */
	/* a second decoder alongside: 0..2 while one stands at 10 */
	for (size_t k = 0; k <= 9; k++)
		assert_int_equal(decode_k(&idx, &f, k, out, false), 0);
	for (size_t k = 0; k <= 2; k++)
		assert_int_equal(decode_k(&idx, &f, k, out, false), 0);
	assert_int_equal(bfs_codec_zstd.resume(&idx, 12), 10);
	assert_int_equal(bfs_codec_zstd.resume(&idx, 8), 3);
	if (!fcs) {
		/* a span that does not start where the one before ended: fails, and its decoder */
		idx.blk[3].coff++;
		idx.blk[3].clen--;
		assert_int_equal(decode_k(&idx, &f, 3, out, true), -EBADMSG);
		idx.blk[3].coff--;
		idx.blk[3].clen++;
		assert_int_equal(bfs_codec_zstd.resume(&idx, 8), 0);
	}
	bfs_index_destroy(&idx); /* frees the decoders parked */
	assert_int_equal(bfs_zstd_parked_bytes(), 0);
	free(f.p);
	free(out);
	free(d);
}

/*
 * The mount's budget of parked decoders (codec.h): over it, the least
 * recently parked go, in any file, but never the one being parked; freed
 * decoders give their bytes back.
 */
static void test_park_budget(void **state)
{
	size_t len = 33 * MiB + 5, one, old;
	uint8_t *d = gen_text(len, 9), *out = malloc(MiB);
	struct bfs_index a, b;
	struct buf f = { 0 };

	(void)state;
	assert_non_null(out);
	frame(&f, d, len, 1, true, true, 0);
	scan(&f, &a);
	scan(&f, &b);
	assert_int_equal(count_flag(&a, BFS_BLK_CHAIN), 34);
	assert_int_equal(bfs_parked_bytes(), 0);
	/* budget 0: each park keeps the decoder being parked and drops the other file's */
	old = bfs_park_set_budget(0);
	assert_int_equal(decode_k(&a, &f, 0, out, true), 0);
	one = bfs_parked_bytes();
	assert_true(one > 0);
	assert_int_equal(bfs_zstd_parked_bytes(), one);
	assert_int_equal(bfs_codec_zstd.resume(&a, 1), 1);
	assert_int_equal(decode_k(&b, &f, 0, out, true), 0);
	assert_int_equal(bfs_codec_zstd.resume(&b, 1), 1);
	assert_int_equal(bfs_codec_zstd.resume(&a, 1), 0); /* a's went */
	assert_int_equal(bfs_parked_bytes(), one);
	/* room for two: both stay */
	bfs_park_set_budget(2 * one);
	assert_int_equal(decode_k(&a, &f, 0, out, true), 0);
	assert_int_equal(bfs_codec_zstd.resume(&a, 1), 1);
	assert_int_equal(bfs_codec_zstd.resume(&b, 1), 1);
	assert_int_equal(bfs_parked_bytes(), 2 * one);
	/* a third over the budget: the least recently parked (b's) goes */
	assert_int_equal(decode_k(&a, &f, 1, out, true), 0); /* takes a's at 1, parks it at 2 */
	assert_int_equal(decode_k(&a, &f, 0, out, true), 0); /* a second in a: 1 */
	assert_int_equal(bfs_codec_zstd.resume(&a, 1), 1);
	assert_int_equal(bfs_codec_zstd.resume(&a, 3), 2);
	assert_int_equal(bfs_codec_zstd.resume(&b, 1), 0);
	assert_true(bfs_parked_bytes() <= 2 * one);
	/* freeing an index gives its decoders' bytes back */
	bfs_index_destroy(&a);
	assert_int_equal(bfs_parked_bytes(), 0);
	bfs_index_destroy(&b);
	assert_int_equal(bfs_parked_bytes(), 0);
	assert_int_equal(bfs_park_set_budget(old), 2 * one);
	free(f.p);
	free(out);
	free(d);
}

static void test_chain_walked(void **state)
{
	(void)state;
	chain_in_order_and_resume(false);
}

static void test_chain_open(void **state)
{
	(void)state;
	chain_in_order_and_resume(true);
}

/*
 * Open spans of a damaged frame: with verify the frame is decoded whole
 * before its first span is served, so a flip the decoder does not notice
 * (the checksum does) serves nothing; the answer is kept. Without verify
 * the spans before the damage are served exact.
 */
static void test_chain_open_damaged(void **state)
{
	size_t len = 34 * MiB;
	uint8_t *d = gen_text(len, 15), *out = malloc(MiB);
	struct bfs_index idx;
	struct buf f = { 0 };

	(void)state;
	assert_non_null(out);
	frame(&f, d, len, 1, true, true, 0);
	f.p[f.len / 2] ^= 0x55;
	scan(&f, &idx);
	assert_false(idx.broken); /* the block headers are intact */
	assert_int_equal(count_flag(&idx, BFS_BLK_OPEN), 34);
	assert_true(decode_k(&idx, &f, 0, out, true) < 0);
	assert_true(decode_k(&idx, &f, 0, out, true) < 0);   /* known: refused again */
	assert_int_equal(bfs_codec_zstd.resume(&idx, 3), 0); /* nothing parked */
	for (size_t k = 0; k < 5; k++) {
		assert_int_equal(decode_k(&idx, &f, k, out, false), 0);
		assert_memory_equal(out, d + k * MiB, MiB);
	}
	bfs_index_destroy(&idx);
	/*
	 * A header that claims less than the frame holds: refused whole with
	 * verify; without, the spans before the claim's end are served and
	 * the last one fails.
	 */
	f.len = 0;
	frame(&f, d, 34 * MiB, 1, true, true, 0);
	assert_int_equal(f.p[4] >> 6, 2); /* a 4-byte FCS ... */
	assert_int_equal(f.p[4] & 3, 0);  /* ... after magic, FHD and WD */
	bfs_put_le32(f.p + 5 + !(f.p[4] & 0x20), 33 * MiB);
	scan(&f, &idx);
	assert_false(idx.broken);
	assert_int_equal(count_flag(&idx, BFS_BLK_OPEN), 33);
	assert_true(decode_k(&idx, &f, 0, out, true) < 0);
	for (size_t k = 0; k < 32; k++) {
		assert_int_equal(decode_k(&idx, &f, k, out, false), 0);
		assert_memory_equal(out, d + k * MiB, MiB);
	}
	assert_true(decode_k(&idx, &f, 32, out, false) < 0);
	bfs_index_destroy(&idx);
	free(f.p);
	free(out);
	free(d);
}

/* No FCS and many flushed blocks: decoded during the scan, cut into spans. */
static void test_chain_without_fcs(void **state)
{
	size_t len = 3 * MiB + 5;
	uint8_t *d = gen_text(len, 8);
	struct bfs_index idx;
	struct buf f = { 0 };

	(void)state;
	frame(&f, d, len, 3, false, false, 4096);
	frame(&f, d, 1000, 3, true, false, 0); /* and a small frame after it */
	scan(&f, &idx);
	assert_int_equal(idx.n, 5);
	assert_int_equal(count_flag(&idx, BFS_BLK_CHAIN), 4);
	assert_int_equal(idx.blk[3].aux >> 31, 1); /* the frame's last span */
	assert_int_equal(atomic_load(&idx.usize), len + 1000);
	{
		uint8_t *all = malloc(len + 1000);

		memcpy(all, d, len);
		memcpy(all + len, d, 1000);
		assert_int_equal(check_all(&idx, &f, all, len + 1000), len + 1000);
		free(all);
	}
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

/* ---- damage ---- */

static void test_truncated_big_frame(void **state)
{
	size_t len = 34 * MiB;
	uint8_t *d = gen_text(len, 9);
	struct bfs_index idx;
	struct buf f = { 0 };

	(void)state;
	frame(&f, d, len, 1, true, true, 0);
	f.len = f.len * 2 / 3;
	scan(&f, &idx);
	assert_true(idx.broken);
	assert_true(idx.n > 10);
	assert_int_equal(count_flag(&idx, BFS_BLK_CHAIN), idx.n - 1);
	/* every span but the poison decodes; none says it ends the frame */
	assert_int_equal(check_all(&idx, &f, d, len), (idx.n - 1) * MiB);
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

static void test_flipped_bits_and_garbage(void **state)
{
	size_t len = 2 * MiB;
	uint8_t *d = gen_text(len, 10);

	(void)state;
	for (int c = 0; c < 5; c++) {
		struct bfs_index idx;
		struct buf f = { 0 };
		size_t m;
		uint64_t good;

		frame(&f, d, MiB, 3, true, true, 0);
		m = f.len;
		if (c < 3)
			frame(&f, d + MiB, MiB, 3, true, true, 0);
		else
			frame(&f, d + MiB, MiB, 3, false, true, 4096); /* a chain */
		switch (c) {
		case 0:
		case 3:
			f.p[m + (f.len - m) / 2] ^= 0x10; /* inside the second frame */
			break;
		case 1:
			put(&f, "garbage after the frames", 24);
			break;
		case 2:
		default:
			f.p[f.len - 2] ^= 0x01; /* its checksum */
			break;
		}
		scan(&f, &idx);
		good = check_all(&idx, &f, d, len);
		/* the first frame always; the second never, never a wrong byte */
		assert_true(good >= MiB);
		if (c == 1)
			assert_int_equal(good, len);
		else
			assert_int_equal(good, MiB);
		bfs_index_destroy(&idx);
		free(f.p);
	}
	free(d);
}

/*
 * measure() counts a frame's output through a small buffer: for the
 * frame as written and with each of many bytes flipped, cut or extended,
 * it fails, or gives the size libzstd decodes the frame to in one call.
 */
static void measure_against_libzstd(const struct bfs_blk *b, const uint8_t *src, size_t len)
{
	const char *why = NULL;
	uint32_t n = 7;
	size_t cap = len + (1u << 20), ref;
	uint8_t *dst = malloc(cap);
	int rc = bfs_codec_zstd.measure(b, src, &n, &why);

	assert_non_null(dst);
	ref = ZSTD_decompress(dst, cap, src, b->clen);
	if (rc == 0) {
		assert_false(ZSTD_isError(ref));
		assert_int_equal(n, ref);
	} else {
		assert_int_equal(rc, -EBADMSG);
		assert_true(why && why[0]);
	}
	free(dst);
}

static void test_measure_streamed(void **state)
{
	size_t len = 3 * MiB / 2 + 12345;
	uint8_t *d = gen_text(len, 21);

	(void)state;
	for (int c = 0; c < 4; c++) {
		struct buf f = { 0 };
		struct bfs_blk b = { .flags = BFS_BLK_GUESS };
		const char *why = NULL;
		uint32_t n = 0;
		size_t step;

		/* without FCS, with it, without a checksum, in small blocks */
		frame(&f, d, len, c == 3 ? 1 : 3, c == 1, c != 2, c == 3 ? 50000 : 0);
		b.clen = (uint32_t)f.len;
		b.usize = (uint32_t)len;
		assert_int_equal(bfs_codec_zstd.measure(&b, f.p, &n, &why), 0);
		assert_int_equal(n, len);
		measure_against_libzstd(&b, f.p, len);
		step = f.len / 97 + 1;
		for (size_t i = 0; i < f.len; i += (i < 64 || i + 64 > f.len) ? 1 : step) {
			f.p[i] ^= 0x21;
			measure_against_libzstd(&b, f.p, len);
			f.p[i] ^= 0x21;
		}
		/* cut short, and longer than the frame */
		for (uint32_t cut = 1; cut < 40; cut += 3) {
			b.clen = (uint32_t)f.len - cut;
			assert_int_not_equal(bfs_codec_zstd.measure(&b, f.p, &n, &why), 0);
		}
		put(&f, "trailing bytes", 14);
		b.clen = (uint32_t)f.len;
		assert_int_not_equal(bfs_codec_zstd.measure(&b, f.p, &n, &why), 0);
		free(f.p);
	}
	free(d);
}

static void test_large_window_and_dictionary(void **state)
{
	/* magic, FHD (no FCS, not single segment), WD 2^28, a raw last block "hello" */
	static const uint8_t big[] = { 0x28, 0xB5, 0x2F, 0xFD, 0x00, 18 << 3, (5 << 3) | 1,
				       0,    0,	   'h',	 'e',  'l',  'l',     'o' };
	/* the same with a dictionary id of 1 byte and a 1 KiB window */
	static const uint8_t dict[] = { 0x28, 0xB5, 0x2F, 0xFD, 0x01, 0,   7,  (5 << 3) | 1,
					0,    0,    'h',  'e',	'l',  'l', 'o' };
	uint8_t *d = gen_text(MiB, 11);
	struct bfs_index idx;
	struct buf f = { 0 };

	(void)state;
	put(&f, big, sizeof(big));
	assert_true(bfs_codec_zstd.probe(f.p, f.len));
	assert_int_equal(scan_rc(&f, &idx), -ENOTSUP);
	assert_non_null(strstr(idx.why, "128 MiB"));
	bfs_index_destroy(&idx);
	f.len = 0;
	put(&f, dict, sizeof(dict));
	assert_int_equal(scan_rc(&f, &idx), -ENOTSUP);
	bfs_index_destroy(&idx);
	/* after a good frame: damage there */
	f.len = 0;
	frame(&f, d, MiB, 3, true, false, 0);
	put(&f, big, sizeof(big));
	scan(&f, &idx);
	assert_true(idx.broken);
	assert_int_equal(check_all(&idx, &f, d, MiB), MiB);
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

/* Every truncation of a small multi-frame file: only the intact prefix. */
static void test_truncated_everywhere(void **state)
{
	size_t len = 200000;
	uint8_t *d = gen_text(len, 12);
	struct buf f = { 0 };
	size_t full;

	(void)state;
	frame(&f, d, 100000, 3, true, true, 0);
	skippable(&f, 2, 10);
	frame(&f, d + 100000, 100000, 3, false, true, 3000);
	full = f.len;
	for (size_t cut = 0; cut < full; cut += 1 + cut / 50) {
		struct bfs_index idx;
		int rc;

		f.len = cut;
		rc = scan_rc(&f, &idx);
		assert_true(rc == 0);
		check_all(&idx, &f, d, len);
		bfs_index_destroy(&idx);
	}
	free(f.p);
	free(d);
}

/* ---- the index cache ---- */

static void test_cache_round_trip(void **state)
{
	size_t len = 3 * MiB;
	uint8_t *d = gen_text(len, 13), *e;
	struct bfs_icache_key k = { .dev = 1, .ino = 2, .mtime_sec = 3 };
	struct bfs_index a, b;
	struct buf f = { 0 };
	const char *why;
	size_t elen;

	(void)state;
	frame(&f, d, MiB, 3, true, false, 0);
	frame(&f, d + MiB, 2 * MiB, 3, false, true, 2048); /* spans */
	scan(&f, &a);
	assert_int_equal(a.n, 3);
	k.size = f.len;
	assert_int_equal(bfs_icache_encode(&k, &bfs_codec_zstd, &a, &e, &elen), 0);
	bfs_index_init(&b, f.len);
	assert_int_equal(bfs_icache_decode(e, elen, &k, &bfs_codec_zstd, &b, &why), 0);
	assert_int_equal(b.n, a.n);
	assert_int_equal(count_flag(&b, BFS_BLK_CHAIN), 2);
	assert_non_null(b.priv);
	assert_int_equal(check_all(&b, &f, d, len), len);
	bfs_index_destroy(&b);
	/* entries whose chain does not hold together are refused */
	for (int c = 0; c < 3; c++) {
		struct bfs_index x;
		uint8_t *blk = e + BFS_ICACHE_HDR_LEN + 2 * BFS_ICACHE_ENTRY_LEN;
		uint8_t save[BFS_ICACHE_ENTRY_LEN];

		memcpy(save, blk, sizeof(save));
		if (c == 0)
			bfs_put_le32(blk + 20, 5); /* span number */
		else if (c == 1)
			bfs_put_le32(blk + 20, 1); /* the frame's end unmarked */
		else
			bfs_put_le64(blk, bfs_le64(blk) + 1); /* a gap in the chain */
		/* (the entry's checksum is redone so that only the codec's checks speak) */
		bfs_put_le32(e + elen - 4, bfs_xxh32(e, elen - 4, 0));
		bfs_index_init(&x, f.len);
		assert_int_not_equal(bfs_icache_decode(e, elen, &k, &bfs_codec_zstd, &x, &why), 0);
		bfs_index_destroy(&x);
		memcpy(blk, save, sizeof(save));
	}
	free(e);
	bfs_index_destroy(&a);
	free(f.p);
	free(d);
}

/* Open spans of a big frame with a content size come back from the cache open. */
static void test_cache_round_trip_open(void **state)
{
	size_t len = 34 * MiB;
	uint8_t *d = gen_text(len, 16), *e;
	struct bfs_icache_key k = { .dev = 1, .ino = 2, .mtime_sec = 3 };
	struct bfs_index a, b;
	struct buf f = { 0 };
	const char *why;
	size_t elen;

	(void)state;
	frame(&f, d, 1000, 3, true, false, 0);
	frame(&f, d + 1000, len - 1000, 1, true, true, 0);
	scan(&f, &a);
	assert_int_equal(count_flag(&a, BFS_BLK_OPEN), 34);
	k.size = f.len;
	assert_int_equal(bfs_icache_encode(&k, &bfs_codec_zstd, &a, &e, &elen), 0);
	bfs_index_init(&b, f.len);
	assert_int_equal(bfs_icache_decode(e, elen, &k, &bfs_codec_zstd, &b, &why), 0);
	assert_int_equal(b.n, a.n);
	assert_int_equal(count_flag(&b, BFS_BLK_OPEN), 34);
	assert_int_equal(check_all(&b, &f, d, len), len);
	bfs_index_destroy(&b);
	/* an open span that states other bytes than the one before it is refused */
	for (int c = 0; c < 2; c++) {
		uint8_t *blk = e + BFS_ICACHE_HDR_LEN + 5 * BFS_ICACHE_ENTRY_LEN;
		uint8_t save[BFS_ICACHE_ENTRY_LEN];

		memcpy(save, blk, sizeof(save));
		if (c == 0)
			bfs_put_le32(blk + 8, bfs_le32(blk + 8) - 1); /* its clen */
		else
			bfs_put_le32(blk + 16, BFS_BLK_CHAIN); /* no longer open */
		bfs_put_le32(e + elen - 4, bfs_xxh32(e, elen - 4, 0));
		bfs_index_init(&b, f.len);
		assert_int_not_equal(bfs_icache_decode(e, elen, &k, &bfs_codec_zstd, &b, &why), 0);
		bfs_index_destroy(&b);
		memcpy(blk, save, sizeof(save));
	}
	free(e);
	bfs_index_destroy(&a);
	free(f.p);
	free(d);
}

/* ---- the read path over a chain ---- */

struct fx {
	struct bfs_file_env env;
	struct bfs_file *f;
	uint8_t *d;
	size_t len;
};

/* A file of one frame of @len bytes, with a content size (@fcs: open spans) or without. */
static struct fx *fx_frame(size_t len, uint64_t cache_size, unsigned int workers, bool fcs,
			   bool verify, long flip)
{
	struct fx *x = calloc(1, sizeof(*x));
	char path[] = "/tmp/test_zstd.XXXXXX";
	struct buf b = { 0 };
	int fd;

	assert_non_null(x);
	x->len = len;
	x->d = gen_text(len, 14);
	frame(&b, x->d, len, 1, fcs, true, 0);
	if (flip >= 0)
		b.p[flip < (long)b.len ? flip : (long)b.len / 2] ^= 0x55;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, b.p, b.len), (ssize_t)b.len);
	free(b.p);
	x->env.mount = bfs_counters_new(NULL);
	assert_non_null(x->env.mount);
	assert_int_equal(bfs_cache_new(&x->env.cache, cache_size), 0);
	assert_int_equal(bfs_workq_new(&x->env.workq, workers, 64, NULL), 0);
	x->env.verify = verify;
	assert_int_equal(bfs_file_open(&x->f, fd, NULL, -1, &bfs_codec_zstd, "test", &x->env, NULL),
			 0);
	assert_int_equal(bfs_file_size(x->f), len);
	return x;
}

static struct fx *fx_new(size_t len, uint64_t cache_size, unsigned int workers)
{
	return fx_frame(len, cache_size, workers, true, true, -1);
}

static void fx_free(struct fx *x)
{
	bfs_workq_free(x->env.workq);
	bfs_file_unuse(x->f);
	bfs_file_put(x->f);
	bfs_cache_free(x->env.cache);
	bfs_counters_put(x->env.mount);
	free(x->d);
	free(x);
}

static int read_cmp(struct fx *x, uint64_t off, size_t n)
{
	uint8_t *buf = malloc(n);
	ssize_t got = bfs_file_read(x->f, buf, n, off);
	size_t want = off >= x->len ? 0 : x->len - off < n ? x->len - off : n;
	int bad = got != (ssize_t)want || (want && memcmp(buf, x->d + off, want));

	free(buf);
	return bad;
}

static void test_file_sequential_is_linear(void **state)
{
	struct fx *x = fx_new(40 * MiB, 64 * MiB, 2);

	(void)state;
	/* a cat: 128 KiB reads from start to end decode each span once */
	for (uint64_t off = 0; off < x->len; off += 128 << 10)
		assert_int_equal(read_cmp(x, off, 128 << 10), 0);
	assert_int_equal(atomic_load(&x->f->ctr->decoded), 40);
	/* a small cache (4 MiB): still once per span, the decoder does not go back */
	fx_free(x);
	x = fx_new(40 * MiB, 4 * MiB, 2);
	for (uint64_t off = 0; off < x->len; off += 128 << 10)
		assert_int_equal(read_cmp(x, off, 128 << 10), 0);
	assert_int_equal(atomic_load(&x->f->ctr->decoded), 40);
	fx_free(x);
}

struct rd_arg {
	struct fx *x;
	unsigned int seed;
	int bad;
};

static void *random_reader(void *p)
{
	struct rd_arg *a = p;
	uint64_t s = a->seed;

	for (int i = 0; i < 40; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		a->bad += read_cmp(a->x, (s >> 20) % a->x->len, 1 + (size_t)((s >> 8) % 300000));
	}
	return NULL;
}

static void *seq_reader(void *p)
{
	struct rd_arg *a = p;

	for (uint64_t off = a->seed * (MiB / 4); off < a->x->len; off += 256 << 10)
		a->bad += read_cmp(a->x, off, 256 << 10);
	return NULL;
}

static void test_file_concurrent_readers_and_ahead(void **state)
{
	struct fx *x = fx_new(36 * MiB, 16 * MiB, 2);
	struct rd_arg a[6];
	pthread_t th[6];

	(void)state;
	/* decode-ahead of the whole file on the workers, while readers read */
	assert_true(bfs_push_willneed(x->env.workq, x->f, 0, 0, x->len) > 0);
	for (int i = 0; i < 6; i++) {
		a[i] = (struct rd_arg){ .x = x, .seed = (unsigned int)i };
		assert_int_equal(pthread_create(&th[i], NULL, i < 3 ? seq_reader : random_reader,
						&a[i]),
				 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(a[i].bad, 0);
	}
	fx_free(x);
}

static void test_file_damaged_chain(void **state)
{
	struct fx *x = fx_frame(34 * MiB, 64 * MiB, 1, false, true, -1);
	uint8_t buf[4096];

	(void)state;
	assert_int_equal(count_flag(&x->f->idx, BFS_BLK_OPEN), 0); /* walked */
	/* a span whose decoder fails: it and the spans after it fail, EIO, the rest reads */
	x->f->idx.blk[20].coff++; /* as a lying index would say */
	x->f->idx.blk[20].clen--;
	assert_int_equal(read_cmp(x, 19 * MiB, 4096), 0);
	assert_true(bfs_file_read(x->f, buf, sizeof(buf), 20 * MiB) < 0);
	assert_true(bfs_file_read(x->f, buf, sizeof(buf), 25 * MiB) < 0);
	assert_int_equal(read_cmp(x, 3 * MiB, 4096), 0);
	fx_free(x);
}

/*
 * The read path over the open spans of a frame with a flipped byte: with
 * verify nothing of it is served (EIO, a second read too); without, the
 * spans before the flip read exact.
 */
static void test_file_damaged_open(void **state)
{
	uint8_t buf[4096];
	struct fx *x;

	(void)state;
	x = fx_frame(34 * MiB, 64 * MiB, 1, true, true, LONG_MAX);
	assert_int_equal(count_flag(&x->f->idx, BFS_BLK_OPEN), 34);
	assert_true(bfs_file_read(x->f, buf, sizeof(buf), 3 * MiB) < 0);
	assert_true(bfs_file_read(x->f, buf, sizeof(buf), 0) < 0);
	fx_free(x);
	x = fx_frame(34 * MiB, 64 * MiB, 1, true, false, LONG_MAX);
	assert_int_equal(read_cmp(x, 0, 4096), 0);
	assert_int_equal(read_cmp(x, 3 * MiB, 4096), 0);
	fx_free(x);
}

/*
 * The read path with the spill (spill.h): the frame is decoded once, by
 * its proof, and every span is then read from the spill, by a cat and by
 * readers at once; a frame with a flipped byte spills nothing.
 */
static void test_file_spilled(void **state)
{
	char dir[] = "/tmp/test_zstd_spill.XXXXXX";
	struct bfs_spill_stats st0, st;
	struct rd_arg a[4];
	pthread_t th[4];
	uint8_t buf[4096];
	struct fx *x;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(bfs_spill_configure(dir, 64 * MiB), 0);
	bfs_spill_stats(&st0);
	x = fx_new(40 * MiB, 4 * MiB, 2);
	for (uint64_t off = 0; off < x->len; off += 128 << 10)
		assert_int_equal(read_cmp(x, off, 128 << 10), 0);
	bfs_spill_stats(&st);
	assert_int_equal(st.proofs - st0.proofs, 1);
	assert_int_equal(st.sealed - st0.sealed, 1);
	assert_int_equal(st.bytes, 40 * MiB);
	/* every span the read path took came from the spill: none was decoded again */
	assert_int_equal(st.reads - st0.reads, atomic_load(&x->f->ctr->decoded));
	assert_int_equal(bfs_zstd_parked_bytes(), 0);
	for (int i = 0; i < 4; i++) {
		a[i] = (struct rd_arg){ .x = x, .seed = (unsigned int)i + 7 };
		assert_int_equal(pthread_create(&th[i], NULL, i < 2 ? seq_reader : random_reader,
						&a[i]),
				 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(a[i].bad, 0);
	}
	bfs_spill_stats(&st);
	assert_int_equal(st.proofs - st0.proofs, 1);
	assert_int_equal(bfs_zstd_parked_bytes(), 0);
	fx_free(x);
	bfs_spill_stats(&st);
	assert_int_equal(st.bytes, 0); /* gone with the file */

	x = fx_frame(34 * MiB, 64 * MiB, 1, true, true, LONG_MAX);
	bfs_spill_stats(&st0);
	assert_true(bfs_file_read(x->f, buf, sizeof(buf), 3 * MiB) < 0);
	assert_true(bfs_file_read(x->f, buf, sizeof(buf), 0) < 0);
	bfs_spill_stats(&st);
	assert_int_equal(st.proofs - st0.proofs, 1);
	assert_int_equal(st.sealed - st0.sealed, 0);
	assert_int_equal(st.bytes, 0);
	fx_free(x);
	bfs_spill_shutdown();
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_and_sniff),
		cmocka_unit_test(test_xxh64_matches_frame_checksums),
		cmocka_unit_test(test_one_frame),
		cmocka_unit_test(test_frames_skippable_empty_nofcs),
		cmocka_unit_test(test_odd_fcs_is_claimed),
		cmocka_unit_test(test_seek_table),
		cmocka_unit_test(test_seek_table_lies),
		cmocka_unit_test(test_chain_walked),
		cmocka_unit_test(test_chain_open),
		cmocka_unit_test(test_chain_open_damaged),
		cmocka_unit_test(test_chain_without_fcs),
		cmocka_unit_test(test_truncated_big_frame),
		cmocka_unit_test(test_flipped_bits_and_garbage),
		cmocka_unit_test(test_measure_streamed),
		cmocka_unit_test(test_large_window_and_dictionary),
		cmocka_unit_test(test_truncated_everywhere),
		cmocka_unit_test(test_cache_round_trip),
		cmocka_unit_test(test_cache_round_trip_open),
		cmocka_unit_test(test_file_sequential_is_linear),
		cmocka_unit_test(test_file_concurrent_readers_and_ahead),
		cmocka_unit_test(test_file_damaged_chain),
		cmocka_unit_test(test_file_damaged_open),
		cmocka_unit_test(test_file_spilled),
		cmocka_unit_test(test_park_budget),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
