// SPDX-License-Identifier: MIT
/*
 * Unit tests of LZ4 frames with linked blocks (codec_lz4_linked.c) and
 * legacy frames (codec_lz4.c): frames from liblz4's frame API with
 * blockLinked, frames made block by block with LZ4_compress_fast_continue
 * (odd sizes, stored and empty blocks), legacy frames by hand; spans,
 * their checkpoints, prefixes, damage, and the checkpoints' bytes in the
 * index cache (stale, truncated and altered ones ignored).
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <lz4frame.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/index_cache.h"
#include "blockfs/io.h"
#include "blockfs/xxh32.h"
#include "builders.h"

#define KIB	     1024u
#define MIB	     (1024u * 1024u)
#define SPAN_TAG     1u /* lz4_linked.h: aux of a span */
#define SPAN_TARGET  (128u * KIB)
#define LEGACY_MAGIC 0x184C2102u
/* The cache's private bytes (codec_lz4_linked.c): header, then 20 per checkpoint. */
#define PRIV_HDR     8
#define PRIV_CP	     20

struct fx {
	struct tb_buf file;
	uint8_t *in; /* what the file decodes to */
	size_t n;
	struct bfs_io io;
	struct bfs_index idx;
	bool have_idx;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	*state = f;
	return f ? 0 : -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	if (f->have_idx)
		bfs_index_destroy(&f->idx);
	free(f->file.p);
	free(f->in);
	free(f);
	return 0;
}

/* Scan and measure as bfs_file_open() does. */
static int scan(struct fx *f)
{
	int rc;

	if (f->have_idx)
		bfs_index_destroy(&f->idx);
	bfs_io_init_mem(&f->io, f->file.p, f->file.len);
	bfs_index_init(&f->idx, f->file.len);
	f->have_idx = true;
	rc = bfs_codec_lz4.scan(&f->io, NULL, &f->idx);
	if (rc == 0)
		rc = bfs_measure(&f->idx, &f->io, &bfs_codec_lz4, NULL);
	if (rc == 0)
		rc = bfs_settle(&f->idx, &f->io, &bfs_codec_lz4, UINT64_MAX);
	return rc;
}

/* Append @n bytes to the expected output. */
static void expect(struct fx *f, const uint8_t *p, size_t n)
{
	uint8_t *np = realloc(f->in, f->n + n + 1);

	assert_non_null(np);
	f->in = np;
	memcpy(f->in + f->n, p, n);
	f->n += n;
}

/* Block @k of @idx decoded whole (exactly usize bytes, for ASan); NULL when it fails. */
static uint8_t *decode_blk(const struct bfs_index *idx, size_t k, const uint8_t *file, bool verify,
			   int *rc)
{
	const struct bfs_blk *b = &idx->blk[k];
	uint8_t *src = malloc(b->clen ? b->clen : 1), *dst = malloc(b->usize);
	const char *why = NULL;

	assert_true(src && dst);
	memcpy(src, file + b->coff, b->clen);
	*rc = bfs_codec_lz4.decode(idx, k, src, dst, idx->blk[k].usize, verify, &why);
	free(src);
	if (*rc == 0)
		return dst;
	assert_non_null(why);
	free(dst);
	return NULL;
}

/* The first @n bytes of block @k match what the file holds there. */
static void assert_prefix(struct fx *f, size_t k, uint32_t n)
{
	const struct bfs_blk *b = &f->idx.blk[k];
	uint8_t *src = malloc(b->clen), *dst = malloc(n);
	const char *why = NULL;

	assert_true(src && dst);
	memcpy(src, f->file.p + b->coff, b->clen);
	assert_int_equal(bfs_codec_lz4.decode(&f->idx, k, src, dst, n, true, &why), 0);
	assert_memory_equal(dst, f->in + b->uoff, n);
	free(src);
	free(dst);
}

/*
 * The index serves exactly f->in: every block whole (verify on and off),
 * prefixes of every span around its 64 KiB history edge, and every span
 * measures to its size.
 */
static void assert_serves(struct fx *f)
{
	static const uint32_t cuts[] = { 1, 4096, 65534, 65535, 65536, 65537, 100000, 200000 };

	assert_false(f->idx.broken);
	assert_int_equal(atomic_load(&f->idx.nexact), f->idx.n);
	assert_int_equal(f->idx.usize, f->n);
	for (size_t k = 0; k < f->idx.n; k++) {
		const struct bfs_blk *b = &f->idx.blk[k];
		uint8_t *out;
		uint32_t u;
		const char *why;
		int rc;

		assert_int_equal(f->idx.blk[k].flags & (BFS_BLK_GUESS | BFS_BLK_BAD), 0);
		out = decode_blk(&f->idx, k, f->file.p, true, &rc);
		assert_int_equal(rc, 0);
		assert_memory_equal(out, f->in + b->uoff, b->usize);
		free(out);
		out = decode_blk(&f->idx, k, f->file.p, false, &rc);
		assert_int_equal(rc, 0);
		free(out);
		for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
			if (cuts[i] < b->usize)
				assert_prefix(f, k, cuts[i]);
		if (b->usize > 1)
			assert_prefix(f, k, b->usize - 1);
		assert_int_equal(bfs_codec_lz4.measure(b, f->file.p + b->coff, &u, &why), 0);
		assert_int_equal(u, b->usize);
	}
}

static size_t count_spans(const struct bfs_index *idx)
{
	size_t n = 0;

	for (size_t k = 0; k < idx->n; k++)
		n += idx->blk[k].aux & SPAN_TAG;
	return n;
}

/* ---- frames ---- */

static LZ4F_preferences_t linked_prefs(LZ4F_blockSizeID_t id, bool csize, bool bcsum, bool ccsum,
				       size_t n)
{
	LZ4F_preferences_t p = tb_lz4_prefs(id, csize, bcsum, ccsum, n);

	p.frameInfo.blockMode = LZ4F_blockLinked;
	return p;
}

/*
 * A linked frame made block by block: block i holds sizes[i % nsizes]
 * bytes of @in (0: an empty block), compressed against everything before
 * it with LZ4_compress_fast_continue, stored when that does not shrink it.
 */
static void hand_frame(struct tb_buf *b, const uint8_t *in, size_t n, LZ4F_blockSizeID_t id,
		       bool bcsum, bool ccsum, const size_t *sizes, size_t nsizes)
{
	LZ4F_preferences_t p = linked_prefs(id, false, bcsum, ccsum, 0);
	uint32_t bmax = 1u << (8 + 2 * (unsigned int)id);
	LZ4_stream_t *s = LZ4_createStream();
	char *z = malloc((size_t)LZ4_COMPRESSBOUND(bmax));
	size_t at = 0;

	assert_true(s && z);
	tb_lz4_header(b, &p);
	for (size_t i = 0; at < n; i++) {
		size_t len = sizes[i % nsizes];
		int c;

		if (len > n - at)
			len = n - at;
		assert_true(len <= bmax);
		c = LZ4_compress_fast_continue(s, (const char *)in + at, z, (int)len,
					       LZ4_COMPRESSBOUND(bmax), 1);
		assert_true(c > 0);
		if (len > 0 && (size_t)c >= len) {
			tb_put_le32(b, 0x80000000u | (uint32_t)len);
			tb_put(b, in + at, len);
			if (bcsum)
				tb_put_le32(b, bfs_xxh32(in + at, len, 0));
		} else {
			tb_put_le32(b, (uint32_t)c);
			tb_put(b, z, (size_t)c);
			if (bcsum)
				tb_put_le32(b, bfs_xxh32(z, (size_t)c, 0));
		}
		at += len;
	}
	tb_put_le32(b, 0);
	if (ccsum)
		tb_put_le32(b, bfs_xxh32(in, n, 0));
	LZ4_freeStream(s);
	free(z);
}

/* A legacy frame: the magic, then @in in blocks of sizes[i % nsizes] bytes. */
static void legacy_frame(struct tb_buf *b, const uint8_t *in, size_t n, const size_t *sizes,
			 size_t nsizes)
{
	char *z = malloc((size_t)LZ4_COMPRESSBOUND(8 * MIB));
	size_t at = 0;

	assert_non_null(z);
	tb_put_le32(b, LEGACY_MAGIC);
	for (size_t i = 0; at < n; i++) {
		size_t len = sizes[i % nsizes] < n - at ? sizes[i % nsizes] : n - at;
		int c = LZ4_compress_default((const char *)in + at, z, (int)len,
					     LZ4_COMPRESSBOUND(8 * MIB));

		assert_true(c > 0);
		tb_put_le32(b, (uint32_t)c);
		tb_put(b, z, (size_t)c);
		at += len;
	}
	free(z);
}

/* ---- linked frames from liblz4's frame API ---- */

static void test_frame_api_every_block_size(void **state)
{
	struct fx *f = *state;
	static const LZ4F_blockSizeID_t ids[] = { LZ4F_max64KB, LZ4F_max256KB, LZ4F_max1MB,
						  LZ4F_max4MB };
	size_t n = 1300 * KIB + 7;
	uint8_t *text = tb_text(n, 1);

	for (size_t i = 0; i < 4; i++) {
		for (unsigned int opt = 0; opt < 8; opt++) {
			LZ4F_preferences_t p = linked_prefs(ids[i], opt & 1, opt & 2, opt & 4, n);

			f->file.len = 0;
			f->n = 0;
			tb_lz4_frame(&f->file, text, n, &p);
			expect(f, text, n);
			assert_true(bfs_codec_lz4.probe(f->file.p, f->file.len));
			assert_int_equal(scan(f), 0);
			assert_int_equal(count_spans(&f->idx), f->idx.n);
			assert_serves(f);
		}
	}
	free(text);
}

static void test_spans_of_64k_blocks(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = linked_prefs(LZ4F_max64KB, false, false, true, 0);
	size_t n = 1 * MIB + 5000;
	uint8_t *text = tb_text(n, 2);

	tb_lz4_frame(&f->file, text, n, &p);
	expect(f, text, n);
	free(text);
	assert_int_equal(scan(f), 0);
	/* two full blocks a span, the rest in the last */
	assert_int_equal(f->idx.n, (n + SPAN_TARGET - 1) / SPAN_TARGET);
	for (size_t k = 0; k + 1 < f->idx.n; k++) {
		assert_int_equal(f->idx.blk[k].usize, SPAN_TARGET);
		assert_int_equal(f->idx.blk[k].aux, 64 * KIB | SPAN_TAG);
	}
	assert_int_equal(f->idx.block_size, 64 * KIB);
	/* checkpoints: far smaller than the 64 KiB of history each */
	assert_non_null(f->idx.priv);
	assert_true(f->idx.priv_bytes < f->idx.n * 32 * KIB);
	assert_serves(f);
}

/* python-lz4 and others flush: blocks of a few KiB, spans still about SPAN_TARGET. */
static void test_flushed_small_blocks(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = linked_prefs(LZ4F_max256KB, false, true, true, 0);
	size_t n = 900 * KIB;
	uint8_t *text = tb_text(n, 3);

	tb_lz4_frame_chunked(&f->file, text, n, &p, 3001);
	expect(f, text, n);
	free(text);
	assert_int_equal(scan(f), 0);
	for (size_t k = 0; k + 1 < f->idx.n; k++) {
		assert_true(f->idx.blk[k].usize >= SPAN_TARGET);
		assert_true(f->idx.blk[k].usize < SPAN_TARGET + 3001);
	}
	assert_serves(f);
}

/* Blocks of odd sizes, stored ones (random data), empty and one-byte blocks. */
static void test_hand_made_blocks(void **state)
{
	struct fx *f = *state;
	static const size_t sizes[] = { 65536, 1, 0, 30000, 65535, 7, 40000, 0, 65536, 12345 };
	size_t n = 2 * MIB;
	uint8_t *data = tb_text(n, 4), *rnd = tb_random(n, 5);

	/* text with stretches of random bytes: stored blocks between compressed ones */
	for (size_t at = 0; at + 50000 < n; at += 180000)
		memcpy(data + at, rnd + at, 50000);
	for (unsigned int opt = 0; opt < 4; opt++) {
		f->file.len = 0;
		f->n = 0;
		hand_frame(&f->file, data, n, LZ4F_max64KB, opt & 1, opt & 2, sizes, 10);
		expect(f, data, n);
		assert_int_equal(scan(f), 0);
		assert_serves(f);
	}
	free(data);
	free(rnd);
}

/* Frames of every kind one after another, with skippable frames between. */
static void test_concatenated_kinds(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t lk = linked_prefs(LZ4F_max64KB, true, false, true, 300 * KIB);
	LZ4F_preferences_t ind = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	static const size_t lsz[] = { 100 * KIB };
	uint8_t *text = tb_text(300 * KIB, 6);

	tb_lz4_frame(&f->file, text, 300 * KIB, &lk);
	expect(f, text, 300 * KIB);
	legacy_frame(&f->file, text, 250 * KIB, lsz, 1);
	expect(f, text, 250 * KIB);
	tb_lz4_skippable(&f->file, 3, 10);
	tb_lz4_frame(&f->file, text, 200 * KIB, &ind);
	expect(f, text, 200 * KIB);
	legacy_frame(&f->file, text + 1, 1000, lsz, 1);
	expect(f, text + 1, 1000);
	legacy_frame(&f->file, text + 2, 1000, lsz, 1);
	expect(f, text + 2, 1000);
	tb_lz4_frame(&f->file, text, 300 * KIB, &lk);
	expect(f, text, 300 * KIB);
	free(text);
	assert_int_equal(scan(f), 0);
	assert_serves(f);
}

/* ---- damage ---- */

/* Where block @i's data starts in a frame at @start whose header is @hlen bytes. */
static size_t block_data(const struct fx *f, size_t start, size_t hlen, bool bcsum, size_t i)
{
	size_t pos = start + hlen;

	for (size_t j = 0; j < i; j++)
		pos += 4 + (bfs_le32(f->file.p + pos) & 0x7FFFFFFFu) + (bcsum ? 4 : 0);
	return pos + 4;
}

/* Every block before the poison serves the file's bytes; returns the poison's coff. */
static uint64_t assert_intact_prefix(struct fx *f)
{
	assert_true(f->idx.broken);
	for (size_t k = 0; k + 1 < f->idx.n; k++) {
		const struct bfs_blk *b = &f->idx.blk[k];
		uint8_t *out;
		int rc;

		assert_false(b->flags & BFS_BLK_BAD);
		out = decode_blk(&f->idx, k, f->file.p, true, &rc);
		assert_int_equal(rc, 0);
		assert_true(b->uoff + b->usize <= f->n);
		assert_memory_equal(out, f->in + b->uoff, b->usize);
		free(out);
	}
	assert_true(f->idx.blk[f->idx.n - 1].flags & BFS_BLK_BAD);
	return f->idx.blk[f->idx.n - 1].coff;
}

static void test_truncated_anywhere(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = linked_prefs(LZ4F_max64KB, false, false, true, 0);
	size_t n = 600 * KIB, full;
	uint8_t *text = tb_text(n, 7);

	tb_lz4_frame(&f->file, text, n, &p);
	expect(f, text, n);
	free(text);
	full = f->file.len;
	for (size_t cut = 1; cut < full; cut += full / 37 + 1) {
		f->file.len = cut;
		assert_int_equal(scan(f), 0);
		assert_intact_prefix(f);
	}
	f->file.len = full - 1; /* inside the content checksum: every block kept */
	assert_int_equal(scan(f), 0);
	assert_int_equal(assert_intact_prefix(f), full - 4);
	assert_int_equal(f->idx.usize - 1, n);
}

static void test_flipped_bit_with_block_checksums(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = linked_prefs(LZ4F_max64KB, false, true, true, 0);
	size_t n = 600 * KIB, at;
	uint8_t *text = tb_text(n, 8);

	tb_lz4_frame(&f->file, text, n, &p);
	expect(f, text, n);
	free(text);
	at = block_data(f, 0, 7, true, 3) + 10;
	f->file.p[at] ^= 0x10;
	assert_int_equal(scan(f), 0);
	/* the damaged block ends the file; the blocks before it serve */
	assert_int_equal(assert_intact_prefix(f), block_data(f, 0, 7, true, 3) - 4);
	assert_int_equal(f->idx.n, 3);
	assert_int_equal(f->idx.usize - 1, 3 * 64 * KIB);
	assert_non_null(strstr(f->idx.why, "block checksum mismatch"));
}

/* Only the content checksum vouched for the blocks: the whole frame goes. */
static void test_flipped_bit_content_checksum_only(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = linked_prefs(LZ4F_max64KB, false, false, true, 0);
	LZ4F_preferences_t ind = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	size_t n = 600 * KIB, start;
	uint8_t *text = tb_text(n, 9);

	tb_lz4_frame(&f->file, text, 1000, &ind);
	expect(f, text, 1000);
	start = f->file.len;
	tb_lz4_frame(&f->file, text, n, &p);
	expect(f, text, n);
	free(text);
	f->file.p[block_data(f, start, 7, false, 4) + 100] ^= 0x01;
	assert_int_equal(scan(f), 0);
	assert_int_equal(assert_intact_prefix(f), start);
	assert_int_equal(f->idx.n, 2);

	/* a wrong content checksum alike */
	f->file.p[block_data(f, start, 7, false, 4) + 100] ^= 0x01;
	f->file.p[f->file.len - 1] ^= 0x80;
	assert_int_equal(scan(f), 0);
	assert_int_equal(assert_intact_prefix(f), start);
	assert_non_null(strstr(f->idx.why, "content checksum mismatch"));
}

/* With block checksums a wrong content checksum keeps every block. */
static void test_wrong_content_checksum_with_block_checksums(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = linked_prefs(LZ4F_max64KB, false, true, true, 0);
	size_t n = 300 * KIB;
	uint8_t *text = tb_text(n, 10);

	tb_lz4_frame(&f->file, text, n, &p);
	expect(f, text, n);
	free(text);
	f->file.p[f->file.len - 2] ^= 0x04;
	assert_int_equal(scan(f), 0);
	assert_int_equal(assert_intact_prefix(f), f->file.len - 4);
	assert_int_equal(f->idx.usize - 1, n);
}

static void test_content_size_lie(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = linked_prefs(LZ4F_max64KB, true, false, false, 200 * KIB);
	uint8_t *text = tb_text(200 * KIB, 11);

	tb_lz4_frame(&f->file, text, 200 * KIB, &p);
	/* state one byte more, with a header checksum to match */
	bfs_put_le64(f->file.p + 6, 200 * KIB + 1);
	f->file.p[14] = (uint8_t)(bfs_xxh32(f->file.p + 4, 10, 0) >> 8);
	expect(f, text, 200 * KIB);
	free(text);
	assert_int_equal(scan(f), 0);
	assert_int_equal(assert_intact_prefix(f), f->file.len);
	assert_non_null(strstr(f->idx.why, "header says"));
}

/* An index that lies about a span fails that span, never returns other bytes. */
static void test_lying_index_fails_the_span(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = linked_prefs(LZ4F_max64KB, false, false, false, 0);
	size_t n = 400 * KIB;
	uint8_t *text = tb_text(n, 12), *out;
	struct bfs_blk *b;
	int rc;

	tb_lz4_frame(&f->file, text, n, &p);
	expect(f, text, n);
	free(text);
	assert_int_equal(scan(f), 0);
	b = &f->idx.blk[1];
	b->usize -= 1;
	out = decode_blk(&f->idx, 1, f->file.p, false, &rc);
	assert_null(out);
	assert_int_equal(rc, -EBADMSG);
	b->usize += 2;
	out = decode_blk(&f->idx, 1, f->file.p, false, &rc);
	assert_null(out);
	assert_int_equal(rc, -EBADMSG);
	b->usize -= 1;
	b->clen -= 1;
	out = decode_blk(&f->idx, 1, f->file.p, false, &rc);
	assert_null(out);
	assert_int_equal(rc, -EBADMSG);
	b->clen += 1;
	/* the last span is one short block decoded against its checkpoint: alike */
	assert_int_equal(f->idx.n, 4);
	f->idx.blk[3].usize -= 1;
	out = decode_blk(&f->idx, 3, f->file.p, false, &rc);
	assert_null(out);
	assert_int_equal(rc, -EBADMSG);
	f->idx.blk[3].usize += 1;
	out = decode_blk(&f->idx, 3, f->file.p, true, &rc);
	assert_int_equal(rc, 0);
	assert_memory_equal(out, f->in + 3 * SPAN_TARGET, n - 3 * SPAN_TARGET);
	free(out);
	/* a span is no block: decode outside its index (no checkpoint) refuses it */
	{
		const char *why = NULL;
		uint8_t *dst = malloc(b->usize);

		assert_non_null(dst);
		assert_int_equal(tb_decode(&bfs_codec_lz4, b, f->file.p + b->coff, dst, true, &why),
				 -EBADMSG);
		free(dst);
	}
}

/* ---- the checkpoints in the index cache ---- */

static const struct bfs_icache_key KEY = { .dev = 1, .ino = 2, .mtime_sec = 3 };

/* An index with @f's entries and @priv as cache_load would see them. */
static int load_priv(struct fx *f, struct bfs_index *back, const uint8_t *priv, size_t len)
{
	bfs_index_init(back, f->file.len);
	for (size_t k = 0; k < f->idx.n; k++) {
		const struct bfs_blk *b = &f->idx.blk[k];

		assert_int_equal(bfs_index_add(back, b->coff, b->clen, b->usize, b->flags), 0);
		back->blk[k].aux = b->aux;
	}
	back->block_size = f->idx.block_size;
	return bfs_codec_lz4.cache_load(back, priv, len);
}

static void build_cached(struct fx *f)
{
	LZ4F_preferences_t p = linked_prefs(LZ4F_max64KB, false, true, false, 0);
	LZ4F_preferences_t ind = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	size_t n = 700 * KIB;
	uint8_t *text = tb_text(n, 13);

	tb_lz4_frame(&f->file, text, 100 * KIB, &ind);
	expect(f, text, 100 * KIB);
	tb_lz4_frame(&f->file, text, n, &p);
	expect(f, text, n);
	free(text);
	assert_int_equal(scan(f), 0);
}

static void test_cache_round_trip(void **state)
{
	struct fx *f = *state;
	struct bfs_icache_key key = KEY;
	struct bfs_index back;
	const char *why = NULL;
	uint8_t *e;
	size_t elen;

	build_cached(f);
	key.size = f->file.len;
	assert_int_equal(bfs_icache_encode(&key, &bfs_codec_lz4, &f->idx, &e, &elen), 0);
	bfs_index_init(&back, f->file.len);
	assert_int_equal(bfs_icache_decode(e, elen, &key, &bfs_codec_lz4, &back, &why), 0);
	assert_int_equal(back.n, f->idx.n);
	assert_non_null(back.priv);
	assert_int_equal(bfs_settle(&back, &f->io, &bfs_codec_lz4, UINT64_MAX), 0);
	for (size_t k = 0; k < back.n; k++) {
		uint8_t *out;
		int rc;

		assert_false(back.blk[k].flags & BFS_BLK_BAD);
		out = decode_blk(&back, k, f->file.p, true, &rc);
		assert_int_equal(rc, 0);
		assert_memory_equal(out, f->in + back.blk[k].uoff, back.blk[k].usize);
		free(out);
	}
	bfs_index_destroy(&back);
	/* a flipped bit anywhere in the entry: ignored */
	for (size_t at = 0; at < elen; at += elen / 53 + 1) {
		e[at] ^= 0x20;
		bfs_index_init(&back, f->file.len);
		assert_int_equal(bfs_icache_decode(e, elen, &key, &bfs_codec_lz4, &back, &why), 1);
		bfs_index_destroy(&back);
		e[at] ^= 0x20;
	}
	/* truncated: ignored */
	bfs_index_init(&back, f->file.len);
	assert_int_equal(bfs_icache_decode(e, elen - 1, &key, &bfs_codec_lz4, &back, &why), 1);
	bfs_index_destroy(&back);
	free(e);
}

/* The private bytes themselves, each value out of what a walk writes: unusable. */
static void test_cache_private_bytes_checked(void **state)
{
	struct fx *f = *state;
	struct bfs_index back;
	uint8_t *priv, *bad;
	size_t len, spans;

	build_cached(f);
	spans = count_spans(&f->idx);
	assert_true(spans >= 5);
	assert_int_equal(bfs_codec_lz4.cache_save(&f->idx, &priv, &len), 0);
	assert_true(len > PRIV_HDR + spans * PRIV_CP);
	assert_int_equal(load_priv(f, &back, priv, len), 0);
	bfs_index_destroy(&back);
	bad = malloc(len);
	assert_non_null(bad);

	/* none at all, truncated, extended */
	assert_int_equal(load_priv(f, &back, priv, 0), 1);
	bfs_index_destroy(&back);
	for (size_t cut = 0; cut < len; cut += len / 31 + 1) {
		assert_int_equal(load_priv(f, &back, priv, cut), 1);
		bfs_index_destroy(&back);
	}
	{
		uint8_t *longer = calloc(1, len + 1);

		assert_non_null(longer);
		memcpy(longer, priv, len);
		assert_int_equal(load_priv(f, &back, longer, len + 1), 1);
		bfs_index_destroy(&back);
		free(longer);
	}
#define TRY(off, val)                                               \
	do {                                                        \
		memcpy(bad, priv, len);                             \
		bfs_put_le32(bad + (off), (val));                   \
		assert_int_equal(load_priv(f, &back, bad, len), 1); \
		bfs_index_destroy(&back);                           \
	} while (0)
	TRY(0, (uint32_t)spans + 1); /* count */
	TRY(0, (uint32_t)spans - 1);
	TRY(4, 256 * KIB);				/* another spacing: stale */
	assert_int_equal(bfs_le32(priv + PRIV_HDR), 2); /* after the independent frame's 2 */
	assert_int_equal(priv[PRIV_HDR + 2 * PRIV_CP + 16], 2); /* CP_LZ4 */
	TRY(PRIV_HDR, 0);					/* not a span */
	TRY(PRIV_HDR + PRIV_CP, 1);				/* out of order */
	TRY(PRIV_HDR + 2 * PRIV_CP + 8, 65537);			/* dict longer than 64 KiB */
	TRY(PRIV_HDR + 2 * PRIV_CP + 12, 0); /* its bytes no longer tile the rest */
	TRY(PRIV_HDR + 2 * PRIV_CP + 16, 9); /* kind */
	TRY(PRIV_HDR + 2 * PRIV_CP + 16, 0x100 | bad[PRIV_HDR + 2 * PRIV_CP + 16]); /* reserved */
#undef TRY
	/* spans but an index without them, and the reverse */
	f->idx.blk[0].aux |= SPAN_TAG;
	assert_int_equal(load_priv(f, &back, priv, len), 1);
	bfs_index_destroy(&back);
	f->idx.blk[0].aux &= ~SPAN_TAG;
	free(bad);
	free(priv);
}

/* -o verify: a span whose output differs from what the walk hashed. */
static void test_verify_span_hash(void **state)
{
	struct fx *f = *state;
	struct bfs_index back;
	uint8_t *priv, *out;
	size_t len;
	int rc;

	build_cached(f);
	assert_int_equal(bfs_codec_lz4.cache_save(&f->idx, &priv, &len), 0);
	priv[PRIV_HDR + 4] ^= 1; /* the first span's hash (block 2) */
	assert_int_equal(load_priv(f, &back, priv, len), 0);
	out = decode_blk(&back, 2, f->file.p, true, &rc);
	assert_null(out);
	assert_int_equal(rc, -EILSEQ);
	out = decode_blk(&back, 2, f->file.p, false, &rc);
	assert_int_equal(rc, 0);
	assert_memory_equal(out, f->in + back.blk[2].uoff, back.blk[2].usize);
	free(out);
	bfs_index_destroy(&back);
	free(priv);
}

/* ---- legacy frames ---- */

static void test_legacy_blocks(void **state)
{
	struct fx *f = *state;
	static const size_t sizes[] = { 100 * KIB, 33 * KIB, 250 * KIB };
	size_t n = 1 * MIB;
	uint8_t *text = tb_text(n, 14);

	legacy_frame(&f->file, text, n, sizes, 3);
	expect(f, text, n);
	free(text);
	assert_true(bfs_codec_lz4.probe(f->file.p, f->file.len));
	assert_int_equal(scan(f), 0);
	assert_int_equal(f->idx.block_size, 8 * MIB);
	assert_int_equal(f->idx.n, 9);
	assert_int_equal(f->idx.blk[0].usize, 100 * KIB);
	assert_serves(f);
}

/* lz4 -l fills every block but the last: the guess is right, nothing moves. */
static void test_legacy_full_blocks(void **state)
{
	struct fx *f = *state;
	static const size_t sizes[] = { 8 * MIB };
	size_t n = 8 * MIB + 1000;
	uint8_t *text = tb_text(n, 15);

	legacy_frame(&f->file, text, n, sizes, 1);
	expect(f, text, n);
	legacy_frame(&f->file, text, 10, sizes, 1); /* and a second legacy frame */
	expect(f, text, 10);
	free(text);
	assert_int_equal(scan(f), 0);
	assert_int_equal(f->idx.n, 3);
	assert_serves(f);
}

static void test_legacy_empty_and_followed(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	static const size_t sizes[] = { 64 * KIB };
	uint8_t *text = tb_text(200 * KIB, 16);

	tb_put_le32(&f->file, LEGACY_MAGIC); /* nothing in it */
	assert_int_equal(scan(f), 0);
	assert_false(f->idx.broken);
	assert_int_equal(f->idx.usize, 0);

	legacy_frame(&f->file, text, 200 * KIB, sizes, 1);
	expect(f, text, 200 * KIB);
	tb_lz4_skippable(&f->file, 0, 5);
	tb_lz4_frame(&f->file, text, 5000, &p);
	expect(f, text, 5000);
	assert_int_equal(scan(f), 0);
	assert_serves(f);
	free(text);
}

static void test_legacy_damage(void **state)
{
	struct fx *f = *state;
	static const size_t sizes[] = { 64 * KIB };
	uint8_t *text = tb_text(200 * KIB, 17);
	size_t full;

	legacy_frame(&f->file, text, 200 * KIB, sizes, 1);
	expect(f, text, 200 * KIB);
	free(text);
	full = f->file.len;
	/* cut anywhere: the whole blocks before the cut serve */
	for (size_t cut = 5; cut < full; cut += full / 23 + 1) {
		f->file.len = cut;
		assert_int_equal(scan(f), 0);
		if (f->idx.broken)
			assert_intact_prefix(f);
		else
			assert_true(f->idx.usize < 200 * KIB); /* cut at a block's end */
	}
	/* junk after it: not a frame */
	f->file.len = full;
	tb_put(&f->file, "junk!!!!", 8);
	assert_int_equal(scan(f), 0);
	assert_int_equal(assert_intact_prefix(f), full);
	assert_true(strstr(f->idx.why, "not an lz4 frame"));
	/* two stray bytes: a size word cut short */
	f->file.len = full + 2;
	assert_int_equal(scan(f), 0);
	assert_int_equal(assert_intact_prefix(f), full);
	/* the last block one byte short, its size word to match: its last literals are cut */
	{
		size_t pos = 4, last = 4;

		while (pos < full) {
			last = pos;
			pos += 4 + bfs_le32(f->file.p + pos);
		}
		bfs_put_le32(f->file.p + last, bfs_le32(f->file.p + last) - 1);
		f->file.len = full - 1;
		assert_int_equal(scan(f), 0);
		assert_int_equal(assert_intact_prefix(f), last);
		assert_non_null(strstr(f->idx.why, "inside a sequence"));
	}
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_frame_api_every_block_size),
		T(test_spans_of_64k_blocks),
		T(test_flushed_small_blocks),
		T(test_hand_made_blocks),
		T(test_concatenated_kinds),
		T(test_truncated_anywhere),
		T(test_flipped_bit_with_block_checksums),
		T(test_flipped_bit_content_checksum_only),
		T(test_wrong_content_checksum_with_block_checksums),
		T(test_content_size_lie),
		T(test_lying_index_fails_the_span),
		T(test_cache_round_trip),
		T(test_cache_private_bytes_checked),
		T(test_verify_span_hash),
		T(test_legacy_blocks),
		T(test_legacy_full_blocks),
		T(test_legacy_empty_and_followed),
		T(test_legacy_damage),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
