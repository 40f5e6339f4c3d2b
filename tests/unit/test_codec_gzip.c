// SPDX-License-Identifier: MIT
/*
 * Plain gzip codec: probe, the checkpoint walk (levels, stored blocks,
 * flushes, header fields, members of every size), the decoding of every
 * span from its checkpoint, damage (deflate errors, CRC32/ISIZE, header
 * CRC, truncation at every point, padding and garbage), the proof each
 * span gives of its own extent, the index cache round trip and forged
 * entries, and spans decoded from several threads. Files are made in
 * memory with zlib.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/index_cache.h"
#include "blockfs/io.h"
#include "blockfs/xxh32.h"

#define SPAN BFS_GZIP_SPAN_MIN

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

/*
 * Deterministic text that compresses about 3:1, like logs: words drawn by
 * an LCG, each followed by a number. (Text of a few words repeated would
 * make deflate blocks of megabytes, hence very few checkpoints.)
 */
static uint8_t *gen_text(size_t len, uint32_t seed)
{
	static const char *const words[] = { "checkpoint ", "window ", "gzip ",	  "member ",
					     "deflate ",    "span\n",  "random ", "offset " };
	uint8_t *d = malloc(len + 32);

	assert_non_null(d);
	for (size_t i = 0; i < len;) {
		seed = seed * 1103515245u + 12345u;
		i += (size_t)sprintf((char *)d + i, "%s%u ", words[(seed >> 16) % 8],
				     (seed >> 8) % 100000);
	}
	return d;
}

static uint8_t *gen_random(size_t len, uint32_t seed)
{
	uint8_t *d = malloc(len ? len : 1);

	assert_non_null(d);
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		d[i] = (uint8_t)(seed >> 23);
	}
	return d;
}

enum {
	F_EXTRA = 1, /* a foreign extra subfield */
	F_NAME = 2,
	F_COMMENT = 4,
	F_HCRC = 8,
	F_SYNC = 16, /* Z_SYNC_FLUSH every 10000 bytes: empty stored blocks */
	F_FULL = 32, /* Z_FULL_FLUSH every 30000 bytes */
};

/* Append one gzip member of @len bytes of @d, written by zlib at @level. */
static void member(struct buf *b, const uint8_t *d, size_t len, int level, unsigned int f)
{
	static uint8_t extra[] = { 'X', 'Y', 2, 0, 7, 7 };
	static char name[] = "data.txt", comment[] = "made by test_codec_gzip";
	gz_header h = { 0 };
	z_stream zs = { 0 };
	uint8_t out[1 << 16];
	size_t at = 0;
	int rc;

	assert_int_equal(deflateInit2(&zs, level, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY),
			 Z_OK);
	if (f & (F_EXTRA | F_NAME | F_COMMENT | F_HCRC)) {
		h.extra = (f & F_EXTRA) ? extra : NULL;
		h.extra_len = (f & F_EXTRA) ? sizeof(extra) : 0;
		h.name = (f & F_NAME) ? (Bytef *)name : NULL;
		h.comment = (f & F_COMMENT) ? (Bytef *)comment : NULL;
		h.hcrc = (f & F_HCRC) ? 1 : 0;
		assert_int_equal(deflateSetHeader(&zs, &h), Z_OK);
	}
	do {
		size_t step = f & F_SYNC ? 10000 : f & F_FULL ? 30000 : len - at;
		int flush;

		if (step > len - at)
			step = len - at;
		zs.next_in = (Bytef *)(uintptr_t)(d + at);
		zs.avail_in = (uInt)step;
		at += step;
		flush = at == len ? Z_FINISH : f & F_SYNC ? Z_SYNC_FLUSH : Z_FULL_FLUSH;
		do {
			zs.next_out = out;
			zs.avail_out = sizeof(out);
			rc = deflate(&zs, flush);
			assert_true(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR);
			put(b, out, sizeof(out) - zs.avail_out);
		} while (zs.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
	} while (at < len);
	deflateEnd(&zs);
}

/* ---- scanning and checking ---- */

/* The settings of a mount with -o gzip=index,gzip_span=SPAN: every index is given them. */
static const struct bfs_codec_conf conf = { .gzip = true, .gzip_span = SPAN };

static void scan(const struct buf *f, struct bfs_index *idx)
{
	struct bfs_io io;

	bfs_io_init_mem(&io, f->p, f->len);
	bfs_index_init(idx, f->len);
	idx->conf = &conf;
	assert_int_equal(bfs_codec_gzip.scan(&io, NULL, idx), 0);
}

/*
 * Decode the first @n bytes of span @k (all of it: its usize) from a copy
 * of exactly its clen bytes into exactly @n bytes.
 */
static int decode_n(const struct bfs_index *idx, const uint8_t *file, size_t k, uint32_t n,
		    bool verify, uint8_t **out)
{
	const struct bfs_blk *b = &idx->blk[k];
	uint8_t *src = malloc(b->clen ? b->clen : 1), *dst = malloc(n ? n : 1);
	const char *why = NULL;
	int rc;

	assert_non_null(src);
	assert_non_null(dst);
	memcpy(src, file + b->coff, b->clen);
	if (n < b->usize)
		rc = bfs_codec_gzip.decode(idx, k, src, dst, n, verify, &why);
	else
		rc = bfs_codec_gzip.decode(idx, k, src, dst, idx->blk[k].usize, verify, &why);
	free(src);
	if (rc != 0) {
		assert_non_null(why);
		free(dst);
		dst = NULL;
	}
	*out = dst;
	return rc;
}

static int decode(const struct bfs_index *idx, const uint8_t *file, size_t k, bool verify,
		  uint8_t **out)
{
	return decode_n(idx, file, k, idx->blk[k].usize, verify, out);
}

/*
 * Every span that is not poison decodes, with and without verify, to
 * @want at its offset; the index is contiguous, within the file, and ends
 * (but for the poison byte) after @good bytes.
 */
static void check_spans(const struct bfs_index *idx, const struct buf *f, const uint8_t *want,
			size_t good)
{
	uint64_t uoff = 0, cend = 0;

	for (size_t k = 0; k < idx->n; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		uint8_t *out;

		assert_int_equal(b->uoff, uoff);
		assert_true(b->coff >= cend);
		uoff += b->usize;
		if (b->flags & BFS_BLK_BAD) {
			assert_int_equal(k, idx->n - 1);
			assert_true(idx->broken);
			continue;
		}
		assert_int_equal(b->flags, 0);
		assert_true(bfs_range_ok(b->coff, b->clen, f->len));
		cend = b->coff + b->clen;
		assert_int_equal(decode(idx, f->p, k, true, &out), 0);
		assert_memory_equal(out, want + b->uoff, b->usize);
		free(out);
		assert_int_equal(decode(idx, f->p, k, false, &out), 0);
		free(out);
		/* prefixes, as a random reader's first read takes them */
		for (uint32_t n = 1; n < b->usize; n = n * 7 + 4093) {
			assert_int_equal(decode_n(idx, f->p, k, n, true, &out), 0);
			assert_memory_equal(out, want + b->uoff, n);
			free(out);
		}
	}
	assert_int_equal(atomic_load(&idx->usize), good + (idx->broken ? 1 : 0));
	assert_int_equal(atomic_load(&idx->nexact), idx->n);
}

/* ---- probe ---- */

static void test_probe(void **state)
{
	static const uint8_t bgzf[] = { 0x1f, 0x8b, 8, 4,   0,	 0, 0, 0,    0,
					0xff, 6,    0, 'B', 'C', 2, 0, 0x1b, 0 };
	struct buf f = { 0 };
	uint8_t *d = gen_text(1000, 1);

	(void)state;
	member(&f, d, 1000, 6, 0);
	assert_true(bfs_codec_gzip.probe(f.p, 16));
	assert_ptr_equal(bfs_codec_probe(&conf, f.p, 16), &bfs_codec_gzip);
	assert_false(bfs_codec_gzip.probe(f.p, 9));		/* too short to tell */
	assert_false(bfs_codec_gzip.probe(bgzf, sizeof(bgzf))); /* BGZF stays BGZF */
	assert_ptr_equal(bfs_codec_probe(&conf, bgzf, sizeof(bgzf)), &bfs_codec_bgzf);
	f.p[3] |= 0x20; /* a reserved flag */
	assert_false(bfs_codec_gzip.probe(f.p, 16));
	f.p[3] &= ~0x20;
	f.p[2] = 7; /* not deflate */
	assert_false(bfs_codec_gzip.probe(f.p, 16));
	f.p[2] = 8;
	/* off: gzip=raw shows it unchanged, as the defaults do */
	assert_null(bfs_codec_probe(&(struct bfs_codec_conf){ .gzip = false, .gzip_span = SPAN },
				    f.p, 16));
	assert_null(bfs_codec_probe(NULL, f.p, 16));
	/* two mounts' settings side by side: only the one with gzip=index lists its names */
	{
		const struct bfs_codec *c;
		const struct bfs_suffix *sfx;
		bool on = false, off = false;

		for (size_t n = 0; bfs_codec_suffix_at(&conf, n, &c, &sfx); n++)
			on |= c == &bfs_codec_gzip;
		for (size_t n = 0; bfs_codec_suffix_at(NULL, n, &c, &sfx); n++)
			off |= c == &bfs_codec_gzip;
		assert_true(on);
		assert_false(off);
	}
	free(f.p);
	free(d);
}

/* ---- the walk and decode ---- */

static void round_trip(const uint8_t *d, size_t len, int level, unsigned int flags,
		       size_t min_spans)
{
	struct buf f = { 0 };
	struct bfs_index idx;
	uint64_t lib = bfs_codec_gzip_lib_spans();

	member(&f, d, len, level, flags);
	scan(&f, &idx);
	assert_false(idx.broken);
	if (idx.n < min_spans)
		print_message("level %d: %zu spans\n", level, idx.n);
	assert_true(idx.n >= min_spans);
	assert_int_equal(idx.source, BFS_SRC_WALK);
	assert_int_equal(idx.block_size, SPAN);
	assert_non_null(idx.priv);
	check_spans(&idx, &f, d, len);
	/*
	 * One member: every span but the first (at the member's start) and
	 * the last (at its trailer) lies between two block boundaries, and
	 * check_spans() decodes each whole twice: libdeflate's, when built in.
	 */
#if HAVE_LIBDEFLATE
	assert_true(bfs_codec_gzip_lib_spans() - lib >= 2 * (idx.n - 2));
#else
	assert_int_equal(bfs_codec_gzip_lib_spans() - lib, 0);
#endif
	for (size_t k = 0; k + 1 < idx.n; k++)
		assert_true(idx.blk[k].usize >= SPAN); /* a span ends after SPAN at the earliest */
	bfs_index_destroy(&idx);
	free(f.p);
}

static void test_levels(void **state)
{
	size_t len = 3u << 20;
	uint8_t *d = gen_text(len, 2);

	(void)state;
	round_trip(d, len, 1, 0, 4);
	round_trip(d, len, 6, 0, 4);
	round_trip(d, len, 9, 0, 4);
	round_trip(d, len, 0, 0, 20); /* stored blocks of 64K-1: a checkpoint every other one */
	free(d);
}

static void test_incompressible(void **state)
{
	size_t len = 1u << 20;
	uint8_t *d = gen_random(len, 3);

	(void)state;
	round_trip(d, len, 6, 0, 8);
	free(d);
}

static void test_flushes(void **state)
{
	size_t len = 1u << 20;
	uint8_t *d = gen_text(len, 4);

	(void)state;
	round_trip(d, len, 6, F_SYNC, 8); /* empty stored blocks, byte-aligned boundaries */
	round_trip(d, len, 6, F_FULL, 8);
	free(d);
}

static void test_header_fields(void **state)
{
	size_t len = 300000;
	uint8_t *d = gen_text(len, 5);

	(void)state;
	round_trip(d, len, 6, F_EXTRA | F_NAME | F_COMMENT | F_HCRC, 2);
	round_trip(d, len, 6, F_NAME, 2);
	free(d);
}

/* Many members, empty ones among them: spans cross member boundaries. */
static void test_many_members(void **state)
{
	size_t len = 1500000, at = 0, sizes[] = { 1, 7000, 0, 33333, 120000, 0, 0, 999 };
	uint8_t *d = gen_text(len, 6);
	struct buf f = { 0 };
	struct bfs_index idx;

	(void)state;
	for (int i = 0; at < len; i++) {
		size_t n = sizes[i % 8];

		if (n > len - at)
			n = len - at;
		member(&f, d + at, n, i % 3 == 0 ? 1 : 6, i % 5 == 0 ? F_NAME : 0);
		at += n;
	}
	member(&f, d, 0, 6, 0); /* an empty member last */
	scan(&f, &idx);
	assert_false(idx.broken);
	assert_true(idx.n >= 10);
	check_spans(&idx, &f, d, len);
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

static void test_empty_file(void **state)
{
	struct buf f = { 0 };
	struct bfs_index idx;

	(void)state;
	member(&f, (const uint8_t *)"", 0, 6, 0);
	member(&f, (const uint8_t *)"", 0, 6, 0);
	scan(&f, &idx);
	assert_false(idx.broken);
	assert_int_equal(idx.n, 0);
	assert_int_equal(atomic_load(&idx.usize), 0);
	bfs_index_destroy(&idx);
	free(f.p);
}

/* ---- damage ---- */

/* Three members; returns the file and where each starts. */
static void three(struct buf *f, const uint8_t *d, size_t part, size_t cstart[3])
{
	for (int i = 0; i < 3; i++) {
		cstart[i] = f->len;
		member(f, d + i * part, part, 6, 0);
	}
}

static void expect_ends_after(const struct buf *f, const uint8_t *d, size_t good)
{
	struct bfs_index idx;

	scan(f, &idx);
	assert_true(idx.broken);
	assert_true(idx.blk[idx.n - 1].flags & BFS_BLK_BAD);
	check_spans(&idx, f, d, good);
	bfs_index_destroy(&idx);
}

static void test_corrupt_member_dropped_whole(void **state)
{
	size_t part = 400000, c[3];
	uint8_t *d = gen_text(3 * part, 7);
	struct buf f = { 0 };

	(void)state;
	three(&f, d, part, c);
	/* deep inside member 2: spans were closed inside it before the damage */
	f.p[c[1] + (c[2] - c[1]) * 3 / 4] ^= 0x55;
	expect_ends_after(&f, d, part);
	free(f.p);
	free(d);
}

static void test_crc_isize_hcrc_mismatch(void **state)
{
	size_t part = 200000, c[3];
	uint8_t *d = gen_text(3 * part, 8);
	struct buf f = { 0 };

	(void)state;
	three(&f, d, part, c);
	f.p[c[2] - 8] ^= 1; /* member 2's CRC32 */
	expect_ends_after(&f, d, part);
	f.p[c[2] - 8] ^= 1;
	f.p[c[2] - 1] ^= 1; /* member 2's ISIZE */
	expect_ends_after(&f, d, part);
	f.p[c[2] - 1] ^= 1;
	free(f.p);

	memset(&f, 0, sizeof(f));
	member(&f, d, part, 6, 0);
	member(&f, d + part, part, 6, F_HCRC | F_NAME);
	member(&f, d + 2 * part, part, 6, 0);
	{
		struct bfs_index idx;

		scan(&f, &idx);
		assert_false(idx.broken);
		bfs_index_destroy(&idx);
	}
	/* member 2's name: its header CRC16 no longer matches */
	for (size_t i = 0; i + 8 < f.len; i++) {
		if (memcmp(f.p + i, "data.txt", 8) == 0) {
			f.p[i] = 'D';
			break;
		}
	}
	expect_ends_after(&f, d, part);
	free(f.p);
	free(d);
}

/* Cut at many points: what is served is always the original's prefix. */
static void test_truncated_everywhere(void **state)
{
	size_t part = 90000, c[3];
	uint8_t *d = gen_text(3 * part, 9);
	struct buf f = { 0 }, g;

	(void)state;
	three(&f, d, part, c);
	for (size_t cut = 1; cut < f.len; cut += cut < 64 ? 1 : 97) {
		struct bfs_index idx;
		uint64_t served;

		g = (struct buf){ .p = malloc(cut), .len = cut };
		assert_non_null(g.p);
		memcpy(g.p, f.p, cut);
		scan(&g, &idx);
		served = atomic_load(&idx.usize) - (idx.broken ? 1 : 0);
		assert_true(served <= 3 * part);
		assert_true(idx.broken == (cut != c[1] && cut != c[2]));
		check_spans(&idx, &g, d, (size_t)served);
		bfs_index_destroy(&idx);
		free(g.p);
	}
	free(f.p);
	free(d);
}

static void test_padding_and_garbage(void **state)
{
	size_t part = 100000;
	uint8_t *d = gen_text(part, 10), zeros[1000] = { 0 };
	struct buf f = { 0 };
	struct bfs_index idx;

	(void)state;
	member(&f, d, part, 6, 0);
	put(&f, zeros, sizeof(zeros)); /* tape padding: ignored, as gzip does */
	scan(&f, &idx);
	assert_false(idx.broken);
	check_spans(&idx, &f, d, part);
	bfs_index_destroy(&idx);
	put(&f, "junk", 4); /* garbage: the good part, then EIO */
	expect_ends_after(&f, d, part);
	free(f.p);
	free(d);
}

/* ---- each span proves its extent ---- */

static void test_decode_checks_size_and_crc(void **state)
{
	size_t len = 1u << 20;
	uint8_t *d = gen_text(len, 11), *out;
	struct buf f = { 0 };
	struct bfs_index idx;

	(void)state;
	member(&f, d, len, 6, 0);
	scan(&f, &idx);
	assert_true(idx.n >= 3);
	for (size_t k = 0; k < idx.n; k++) {
		struct bfs_blk keep = idx.blk[k];

		idx.blk[k].usize = keep.usize - 1;
		assert_int_equal(decode(&idx, f.p, k, false, &out), -EBADMSG);
		idx.blk[k].usize = keep.usize + 1;
		assert_int_equal(decode(&idx, f.p, k, false, &out), -EBADMSG);
		idx.blk[k].usize = keep.usize;
		idx.blk[k].clen = keep.clen - 1;
		assert_int_equal(decode(&idx, f.p, k, false, &out), -EBADMSG);
		idx.blk[k].clen = keep.clen;
		idx.blk[k].aux = keep.aux ^ 1;
		assert_int_equal(decode(&idx, f.p, k, true, &out), -EILSEQ);
		assert_int_equal(decode(&idx, f.p, k, false, &out), 0);
		free(out);
		/* a prefix cannot be held to the CRC32 of its whole span */
		assert_int_equal(decode_n(&idx, f.p, k, keep.usize / 2, true, &out), 0);
		assert_memory_equal(out, d + keep.uoff, keep.usize / 2);
		free(out);
		/* but it must inflate that far from the span's bytes */
		idx.blk[k].clen = 16;
		assert_int_equal(decode_n(&idx, f.p, k, keep.usize / 2, false, &out), -EBADMSG);
		idx.blk[k] = keep;
	}
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

/* ---- the index cache ---- */

static const struct bfs_icache_key key = { .dev = 1, .ino = 2, .mtime_sec = 3, .ctime_sec = 4 };

static void test_cache_round_trip(void **state)
{
	size_t len = 1u << 20, elen;
	uint8_t *d = gen_text(len, 12), *e;
	struct bfs_icache_key k = key;
	struct buf f = { 0 };
	struct bfs_index a, b;
	const char *why;

	(void)state;
	member(&f, d, len / 2, 6, 0);
	member(&f, d + len / 2, len / 2, 1, 0);
	scan(&f, &a);
	k.size = f.len;
	assert_int_equal(bfs_icache_encode(&k, &bfs_codec_gzip, &a, &e, &elen), 0);
	bfs_index_init(&b, f.len);
	b.conf = &conf;
	assert_int_equal(bfs_icache_decode(e, elen, &k, &bfs_codec_gzip, &b, &why), 0);
	assert_int_equal(b.source, BFS_SRC_CACHE);
	assert_int_equal(b.n, a.n);
	assert_int_equal(b.priv_bytes, a.priv_bytes);
	check_spans(&b, &f, d, len);
	/* made with another gzip_span: walked again, so that the option takes effect */
	{
		const struct bfs_codec_conf wider = { .gzip = true, .gzip_span = 2 * SPAN };
		struct bfs_index c;

		bfs_index_init(&c, f.len);
		c.conf = &wider;
		assert_int_equal(bfs_icache_decode(e, elen, &k, &bfs_codec_gzip, &c, &why), 1);
		bfs_index_destroy(&c);
		/* and the same entry, taken up by an index with the mount's settings */
		bfs_index_init(&c, f.len);
		c.conf = &conf;
		assert_int_equal(bfs_icache_decode(e, elen, &k, &bfs_codec_gzip, &c, &why), 0);
		bfs_index_destroy(&c);
	}
	/* a truncated entry is refused at every length */
	for (size_t cut = 0; cut < elen; cut += 1 + cut / 64) {
		struct bfs_index c;

		bfs_index_init(&c, f.len);
		c.conf = &conf;
		assert_int_equal(bfs_icache_decode(e, cut, &k, &bfs_codec_gzip, &c, &why), 1);
		bfs_index_destroy(&c);
	}
	free(e);
	bfs_index_destroy(&a);
	bfs_index_destroy(&b);
	free(f.p);
	free(d);
}

/*
 * Flip bytes of a gzip entry and forge its checksum: whatever is accepted
 * keeps every span where it was, and each span then decodes (verify on)
 * to exactly its true bytes or fails; never to other bytes.
 */
static void test_cache_forged_flips(void **state)
{
	size_t len = 600000, elen, accepted = 0, failed = 0;
	uint8_t *d = gen_text(len, 13), *e;
	struct bfs_icache_key k = key;
	struct buf f = { 0 };
	struct bfs_index a;

	(void)state;
	member(&f, d, len, 6, 0);
	scan(&f, &a);
	k.size = f.len;
	assert_int_equal(bfs_icache_encode(&k, &bfs_codec_gzip, &a, &e, &elen), 0);
	for (size_t i = 0; i + 4 < elen; i += i < 128 + 24 * a.n + 8 + 12 * a.n + 64 ? 1 : 61) {
		struct bfs_index b;
		const char *why;

		e[i] ^= 0x21;
		bfs_put_le32(e + elen - 4, bfs_xxh32(e, elen - 4, 0));
		bfs_index_init(&b, f.len);
		b.conf = &conf;
		if (bfs_icache_decode(e, elen, &k, &bfs_codec_gzip, &b, &why) == 0) {
			accepted++;
			assert_int_equal(b.n, a.n);
			for (size_t j = 0; j < b.n; j++) {
				uint8_t *out;

				assert_int_equal(b.blk[j].uoff, a.blk[j].uoff);
				assert_int_equal(b.blk[j].usize, a.blk[j].usize);
				if (decode(&b, f.p, j, true, &out) == 0) {
					assert_memory_equal(out, d + b.blk[j].uoff, b.blk[j].usize);
					free(out);
				} else {
					failed++;
				}
			}
		}
		bfs_index_destroy(&b);
		e[i] ^= 0x21;
	}
	assert_true(accepted > 0);
	assert_true(failed > 0); /* windows and checkpoints were hit */
	free(e);
	bfs_index_destroy(&a);
	free(f.p);
	free(d);
}

/* ---- threads ---- */

struct par {
	const struct bfs_index *idx;
	const struct buf *f;
	const uint8_t *d;
	int bad;
};

static void *decode_all(void *arg)
{
	struct par *p = arg;

	for (int round = 0; round < 3; round++) {
		for (size_t k = p->idx->n; k-- > 0;) {
			const struct bfs_blk *b = &p->idx->blk[k];
			uint8_t *dst = malloc(b->usize);
			const char *why;

			if (!dst ||
			    bfs_codec_gzip.decode(p->idx, k, p->f->p + b->coff, dst,
						  p->idx->blk[k].usize, true, &why) != 0 ||
			    memcmp(dst, p->d + b->uoff, b->usize) != 0)
				p->bad++;
			free(dst);
		}
	}
	return NULL;
}

static void test_threads_share_checkpoints(void **state)
{
	size_t len = 2u << 20;
	uint8_t *d = gen_text(len, 14);
	struct buf f = { 0 };
	struct bfs_index idx;
	struct par p[4];
	pthread_t th[4];

	(void)state;
	member(&f, d, len, 6, 0);
	scan(&f, &idx);
	for (int i = 0; i < 4; i++) {
		p[i] = (struct par){ .idx = &idx, .f = &f, .d = d };
		assert_int_equal(pthread_create(&th[i], NULL, decode_all, &p[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(p[i].bad, 0);
	}
	bfs_index_destroy(&idx);
	free(f.p);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_levels),
		cmocka_unit_test(test_incompressible),
		cmocka_unit_test(test_flushes),
		cmocka_unit_test(test_header_fields),
		cmocka_unit_test(test_many_members),
		cmocka_unit_test(test_empty_file),
		cmocka_unit_test(test_corrupt_member_dropped_whole),
		cmocka_unit_test(test_crc_isize_hcrc_mismatch),
		cmocka_unit_test(test_truncated_everywhere),
		cmocka_unit_test(test_padding_and_garbage),
		cmocka_unit_test(test_decode_checks_size_and_crc),
		cmocka_unit_test(test_cache_round_trip),
		cmocka_unit_test(test_cache_forged_flips),
		cmocka_unit_test(test_threads_share_checkpoints),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
