// SPDX-License-Identifier: MIT
/*
 * BGZF codec: probe, scan (walk and .gzi sidecar), decode, and hostile
 * input. Every file is built in memory by builders.h: raw deflate chunks
 * framed by hand-written BGZF headers and trailers, and .gzi bytes laid
 * out as htslib 1.16's bgzip -i / -r writes them.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/io.h"
#include "builders.h"

#define CHUNK	TB_BGZF_CHUNK	/* what bgzip puts in one member */
#define HDR_LEN TB_BGZF_HDR_LEN /* bgzip's header: XLEN 6, BC only */

/* ---- the data the members hold ---- */

/* Compressible, deterministic bytes: words drawn by an LCG. */
static uint8_t *gen_data(size_t len, uint32_t seed)
{
	static const char *const words[] = { "block ", "fuse ",	  "gzip ",    "lz4 ",
					     "index ", "random ", "access\n", "0123456789 " };
	uint8_t *d = malloc(len ? len : 1);
	size_t i = 0;

	assert_non_null(d);
	while (i < len) {
		const char *w;
		size_t wl;

		seed = seed * 1103515245u + 12345u;
		w = words[(seed >> 16) % 8];
		wl = strlen(w);
		if (wl > len - i)
			wl = len - i;
		memcpy(d + i, w, wl);
		i += wl;
		if ((seed >> 8) % 7 == 0 && i < len)
			d[i++] = (uint8_t)(seed >> 24);
	}
	return d;
}

static void build(struct tb_bgzf *b, size_t len, bool eof)
{
	uint8_t *d = gen_data(len, 42);

	tb_bgzf_data(b, d, len, eof);
	free(d);
}

/* ---- running the codec ---- */

/* A memory io that counts what the codec reads. */
struct counting_io {
	struct bfs_io io; /* first: the ops get this pointer */
	size_t reads, bytes;
};

static ssize_t counting_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	struct counting_io *c = (struct counting_io *)io;
	ssize_t n = bfs_io_mem_ops.read(io, buf, len, off);

	c->reads++;
	if (n > 0)
		c->bytes += (size_t)n;
	return n;
}

static const struct bfs_io_ops counting_ops = { .name = "counting", .read = counting_read };

static void counting_init(struct counting_io *c, const void *buf, size_t len)
{
	memset(c, 0, sizeof(*c));
	bfs_io_init_mem(&c->io, buf, len);
	c->io.ops = &counting_ops;
}

static int scan(const uint8_t *buf, size_t len, const uint8_t *gzi, size_t gzi_len,
		struct bfs_index *idx)
{
	struct bfs_io io, side;

	bfs_io_init_mem(&io, buf, len);
	bfs_io_init_mem(&side, gzi, gzi_len);
	bfs_index_init(idx, len);
	return bfs_codec_bgzf.scan(&io, gzi ? &side : NULL, idx);
}

/* The index has exactly the non-empty members of @b, and is whole. */
static void assert_walked(const struct bfs_index *idx, const struct tb_bgzf *b)
{
	size_t k = 0;

	assert_false(idx->broken);
	for (size_t i = 0; i < b->n; i++) {
		if (b->m[i].usize == 0)
			continue;
		assert_true(k < idx->n);
		assert_int_equal(idx->blk[k].coff, b->m[i].coff);
		assert_int_equal(idx->blk[k].uoff, b->m[i].uoff);
		assert_int_equal(idx->blk[k].clen, b->m[i].clen);
		assert_int_equal(idx->blk[k].usize, b->m[i].usize);
		assert_int_equal(idx->blk[k].flags, 0);
		k++;
	}
	assert_int_equal(idx->n, k);
	assert_int_equal(idx->usize, b->usize);
	assert_int_equal(atomic_load(&idx->nexact), k);
}

/* Blocks [0, @good) match members [0, @good) and a BAD block follows at @coff. */
static void assert_broken_at(const struct bfs_index *idx, const struct tb_bgzf *b, size_t good,
			     uint64_t coff)
{
	char off[32];

	assert_true(idx->broken);
	assert_int_equal(idx->n, good + 1);
	for (size_t k = 0; k < good; k++) {
		assert_int_equal(idx->blk[k].coff, b->m[k].coff);
		assert_int_equal(idx->blk[k].clen, b->m[k].clen);
		assert_int_equal(idx->blk[k].usize, b->m[k].usize);
	}
	assert_int_equal(idx->blk[good].flags, BFS_BLK_BAD);
	assert_int_equal(idx->blk[good].coff, coff);
	snprintf(off, sizeof(off), "offset %" PRIu64, coff);
	assert_non_null(strstr(idx->why, off));
}

static int decode_blk(const struct bfs_index *idx, size_t k, const uint8_t *file, uint8_t *out,
		      bool verify, const char **why)
{
	const struct bfs_blk *blk = &idx->blk[k];

	return tb_decode(&bfs_codec_bgzf, blk, file + blk->coff, out + blk->uoff, verify, why);
}

/* Decode every block with verify on and compare with @want. */
static void assert_decodes_to(const struct bfs_index *idx, const uint8_t *file, const uint8_t *want,
			      size_t want_len)
{
	uint8_t *out = malloc(want_len ? want_len : 1);
	const char *why = NULL;

	assert_non_null(out);
	assert_int_equal(idx->usize, want_len);
	for (size_t k = 0; k < idx->n; k++)
		assert_int_equal(decode_blk(idx, k, file, out, true, &why), 0);
	assert_memory_equal(out, want, want_len);
	free(out);
}

/* ---- probe ---- */

static void test_probe_bgzip_header(void **state)
{
	struct tb_bgzf b = { 0 };

	(void)state;
	build(&b, 1000, true);
	assert_true(bfs_codec_bgzf.probe(b.buf, BFS_PROBE_LEN));
	assert_true(bfs_codec_bgzf.probe(b.buf, HDR_LEN));
	tb_bgzf_free(&b);
}

static void test_probe_short_head(void **state)
{
	struct tb_bgzf b = { 0 };

	(void)state;
	tb_bgzf_eof(&b);
	for (size_t len = 0; len < HDR_LEN; len++)
		assert_false(bfs_codec_bgzf.probe(b.buf, len));
	tb_bgzf_free(&b);
}

static void test_probe_foreign_subfield_first(void **state)
{
	struct tb_bgzf b = { 0 };

	(void)state;
	tb_bgzf_member(&b, (const uint8_t *)"hello", 5, true);
	assert_true(bfs_codec_bgzf.probe(b.buf, BFS_PROBE_LEN));
	tb_bgzf_free(&b);
}

static void test_probe_plain_gzip(void **state)
{
	uint8_t gz[128];
	z_stream zs = { 0 };

	(void)state;
	assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	zs.next_in = (Bytef *)"plain gzip, served unchanged";
	zs.avail_in = 28;
	zs.next_out = gz;
	zs.avail_out = sizeof(gz);
	assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
	deflateEnd(&zs);
	assert_int_equal(gz[0], 0x1f);
	assert_false(bfs_codec_bgzf.probe(gz, BFS_PROBE_LEN));
}

static void test_probe_fextra_without_bc(void **state)
{
	/* FEXTRA with one 'X' 'Y' subfield only: gzip, but not BGZF */
	static const uint8_t h[] = { 0x1f, 0x8b, 8, 4, 0,    0,	   0, 0, 0, 0xff, 6, 0,
				     'X',  'Y',	 2, 0, 0x10, 0x00, 3, 0, 0, 0,	  0, 0 };

	(void)state;
	assert_false(bfs_codec_bgzf.probe(h, sizeof(h)));
}

static void test_probe_bc_with_wrong_slen(void **state)
{
	static const uint8_t h[] = { 0x1f, 0x8b, 8, 4, 0,    0,	   0, 0, 0, 0xff, 7, 0,
				     'B',  'C',	 3, 0, 0x10, 0x00, 0, 3, 0, 0,	  0, 0 };

	(void)state;
	assert_false(bfs_codec_bgzf.probe(h, sizeof(h)));
}

/* ---- scan by walking ---- */

static void test_scan_one_block(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };

	(void)state;
	build(&b, 5000, true);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_walked(&idx, &b);
	assert_int_equal(idx.n, 1);
	assert_int_equal(idx.block_size, 5000); /* the largest block there is */
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_scan_many_blocks(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };

	(void)state;
	build(&b, 20 * CHUNK + 1234, true);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_walked(&idx, &b);
	assert_int_equal(idx.n, 21);
	assert_int_equal(idx.max_usize, CHUNK);
	assert_int_equal(idx.block_size, CHUNK); /* what the writer used: bgzip's 65280 */
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_scan_full_64k_member(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t *d = gen_data(65536, 7);

	(void)state;
	tb_bgzf_member(&b, d, 65536, false); /* the BGZF maximum, not bgzip's 65280 */
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_walked(&idx, &b);
	assert_decodes_to(&idx, b.buf, d, 65536);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(d);
}

static void test_scan_without_eof_marker(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };

	(void)state;
	build(&b, 3 * CHUNK, false);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_walked(&idx, &b);
	assert_int_equal(idx.n, 3);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_scan_only_eof_marker(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };

	(void)state;
	tb_bgzf_eof(&b);
	assert_int_equal(b.len, 28);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_int_equal(idx.n, 0);
	assert_false(idx.broken);
	assert_int_equal(idx.usize, 0);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_scan_empty_file(void **state)
{
	struct bfs_index idx;

	(void)state;
	assert_int_equal(scan((const uint8_t *)"", 0, NULL, 0, &idx), 0);
	assert_int_equal(idx.n, 0);
	assert_false(idx.broken);
	bfs_index_destroy(&idx);
}

static void test_scan_empty_members_between(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t *d = gen_data(2 * CHUNK, 3);

	(void)state;
	tb_bgzf_eof(&b); /* cat empty.gz a.gz b.gz: markers everywhere */
	tb_bgzf_data(&b, d, CHUNK, true);
	tb_bgzf_eof(&b);
	tb_bgzf_data(&b, d + CHUNK, CHUNK, true);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_walked(&idx, &b);
	assert_int_equal(idx.n, 2);
	assert_decodes_to(&idx, b.buf, d, 2 * CHUNK);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(d);
}

static void test_scan_foreign_subfield_first(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t *d = gen_data(3 * 1000, 5);

	(void)state;
	for (int i = 0; i < 3; i++)
		tb_bgzf_member(&b, d + i * 1000, 1000, true);
	tb_bgzf_eof(&b);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_walked(&idx, &b);
	assert_int_equal(idx.n, 3);
	assert_decodes_to(&idx, b.buf, d, 3000);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(d);
}

static void test_scan_walk_reads_headers_only(void **state)
{
	struct counting_io c;
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };

	(void)state;
	build(&b, 50 * CHUNK, true);
	counting_init(&c, b.buf, b.len);
	bfs_index_init(&idx, b.len);
	assert_int_equal(bfs_codec_bgzf.scan(&c.io, NULL, &idx), 0);
	assert_walked(&idx, &b);
	/* one read per member (its ISIZE with the next header), plus the first header */
	assert_true(c.reads <= b.n + 1);
	assert_true(c.bytes <= (b.n + 1) * 68);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

/* ---- scan with a .gzi sidecar ---- */

static void test_gzi_same_as_walk(void **state)
{
	struct bfs_index walked, indexed;
	struct tb_bgzf b = { 0 };
	uint8_t *gzi;
	size_t gl;

	(void)state;
	build(&b, 10 * CHUNK + 77, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	assert_int_equal(bfs_le64(gzi), 10); /* neither block 0 nor the EOF marker */
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &walked), 0);
	assert_int_equal(scan(b.buf, b.len, gzi, gl, &indexed), 0);
	assert_walked(&indexed, &b);
	assert_int_equal(indexed.n, walked.n);
	assert_memory_equal(indexed.blk, walked.blk, walked.n * sizeof(*walked.blk));
	bfs_index_destroy(&walked);
	bfs_index_destroy(&indexed);
	tb_bgzf_free(&b);
	free(gzi);
}

static void test_gzi_reads_only_the_tail(void **state)
{
	struct counting_io c;
	struct bfs_io side;
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t *gzi;
	size_t gl;

	(void)state;
	build(&b, 50 * CHUNK + 1, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	counting_init(&c, b.buf, b.len);
	bfs_io_init_mem(&side, gzi, gl);
	bfs_index_init(&idx, b.len);
	assert_int_equal(bfs_codec_bgzf.scan(&c.io, &side, &idx), 0);
	assert_walked(&idx, &b);
	/* the last data member and the EOF marker: not 52 members */
	assert_true(c.reads <= 3);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(gzi);
}

static void test_gzi_count_zero_one_block(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t *gzi;
	size_t gl;

	(void)state;
	build(&b, 100, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	assert_int_equal(gl, 8); /* bgzip -i on a small file: count 0 */
	assert_int_equal(scan(b.buf, b.len, gzi, gl, &idx), 0);
	assert_walked(&idx, &b);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(gzi);
}

static void test_gzi_of_empty_input_ignored(void **state)
{
	/* bgzip -i on empty input writes count 2^64 - 1 and no pairs */
	static const uint8_t gzi[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };

	(void)state;
	tb_bgzf_eof(&b);
	assert_int_equal(scan(b.buf, b.len, gzi, sizeof(gzi), &idx), 0);
	assert_int_equal(idx.n, 0);
	assert_false(idx.broken);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

/* Scan with a damaged sidecar: the result must be the walk's. */
static void assert_gzi_ignored(const struct tb_bgzf *b, const uint8_t *gzi, size_t gl)
{
	struct bfs_index idx;

	assert_int_equal(scan(b->buf, b->len, gzi, gl, &idx), 0);
	assert_walked(&idx, b);
	bfs_index_destroy(&idx);
}

static void test_gzi_wrong_count_ignored(void **state)
{
	struct tb_bgzf b = { 0 };
	uint8_t *gzi;
	size_t gl;

	(void)state;
	build(&b, 6 * CHUNK, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	bfs_put_le64(gzi, 6); /* one more than the pairs present */
	assert_gzi_ignored(&b, gzi, gl);
	bfs_put_le64(gzi, 4); /* one fewer: size is not 8 + 16 * count */
	assert_gzi_ignored(&b, gzi, gl);
	bfs_put_le64(gzi, UINT64_MAX / 8); /* 8 + 16 * count wraps */
	assert_gzi_ignored(&b, gzi, gl);
	assert_gzi_ignored(&b, gzi, 5); /* shorter than the count */
	tb_bgzf_free(&b);
	free(gzi);
}

static void test_gzi_non_monotonic_ignored(void **state)
{
	struct tb_bgzf b = { 0 };
	uint8_t *gzi;
	size_t gl;
	uint8_t pair[16];

	(void)state;
	build(&b, 6 * CHUNK, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	memcpy(pair, gzi + 8 + 16, 16); /* swap pairs 1 and 2 */
	memcpy(gzi + 8 + 16, gzi + 8 + 32, 16);
	memcpy(gzi + 8 + 32, pair, 16);
	assert_gzi_ignored(&b, gzi, gl);
	memcpy(gzi + 8 + 32, gzi + 8 + 16, 16); /* a repeated pair */
	assert_gzi_ignored(&b, gzi, gl);
	tb_bgzf_free(&b);
	free(gzi);
}

static void test_gzi_uncompressed_not_increasing_ignored(void **state)
{
	struct tb_bgzf b = { 0 };
	uint8_t *gzi;
	size_t gl;

	(void)state;
	build(&b, 6 * CHUNK, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	bfs_put_le64(gzi + 8 + 16 + 8, bfs_le64(gzi + 8 + 8)); /* an empty span */
	assert_gzi_ignored(&b, gzi, gl);
	bfs_put_le64(gzi + 8 + 16 + 8, bfs_le64(gzi + 8 + 8) + 65537); /* span > 64K */
	assert_gzi_ignored(&b, gzi, gl);
	tb_bgzf_free(&b);
	free(gzi);
}

static void test_gzi_past_eof_ignored(void **state)
{
	struct tb_bgzf b = { 0 };
	uint8_t *gzi;
	size_t gl;

	(void)state;
	build(&b, 6 * CHUNK, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	bfs_put_le64(gzi + 8 + 4 * 16, b.len + 100); /* last pair past the end */
	assert_gzi_ignored(&b, gzi, gl);
	bfs_put_le64(gzi + 8 + 4 * 16, b.len - 10); /* no room for a member there */
	assert_gzi_ignored(&b, gzi, gl);
	tb_bgzf_free(&b);
	free(gzi);
}

static void test_gzi_concatenated_spans_decode(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t *d = gen_data(3 * CHUNK, 11), *gzi;
	size_t gl;

	(void)state;
	/* cat e.gz e.gz a.gz e.gz b.gz, then bgzip -r: empties fold into spans */
	tb_bgzf_eof(&b);
	tb_bgzf_eof(&b);
	tb_bgzf_data(&b, d, 2 * CHUNK, true);
	tb_bgzf_eof(&b);
	tb_bgzf_data(&b, d + 2 * CHUNK, CHUNK, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	assert_int_equal(bfs_le64(gzi), 2);
	assert_int_equal(scan(b.buf, b.len, gzi, gl, &idx), 0);
	assert_false(idx.broken);
	assert_int_equal(idx.n, 3);
	assert_int_equal(idx.blk[0].coff, 0); /* two markers + member 0 */
	assert_int_equal(idx.blk[0].clen, 56 + b.m[2].clen);
	assert_int_equal(idx.blk[1].clen, b.m[6].coff - b.m[3].coff); /* + 2 markers */
	assert_decodes_to(&idx, b.buf, d, 3 * CHUNK);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(d);
	free(gzi);
}

static void test_gzi_then_appended_members(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t *d = gen_data(5 * CHUNK, 13), *gzi;
	size_t gl;

	(void)state;
	tb_bgzf_data(&b, d, 3 * CHUNK, true);
	gzi = tb_bgzf_gzi(&b, &gl); /* made before the append */
	tb_bgzf_data(&b, d + 3 * CHUNK, 2 * CHUNK, true);
	assert_int_equal(scan(b.buf, b.len, gzi, gl, &idx), 0);
	assert_walked(&idx, &b);
	assert_decodes_to(&idx, b.buf, d, 5 * CHUNK);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(d);
	free(gzi);
}

static void test_gzi_lying_offset_caught_by_decode(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t *gzi, *out;
	const char *why = NULL;
	size_t gl;

	(void)state;
	build(&b, 4 * CHUNK, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	bfs_put_le64(gzi + 8 + 16, bfs_le64(gzi + 8 + 16) + 40); /* mid-member */
	assert_int_equal(scan(b.buf, b.len, gzi, gl, &idx), 0);
	assert_false(idx.broken); /* it looked valid */
	out = malloc(idx.usize);
	assert_int_equal(decode_blk(&idx, 0, b.buf, out, false, &why), 0);
	why = NULL;
	assert_int_equal(decode_blk(&idx, 1, b.buf, out, false, &why), -EBADMSG);
	assert_non_null(why);
	why = NULL;
	assert_int_equal(decode_blk(&idx, 2, b.buf, out, false, &why), -EBADMSG);
	assert_non_null(why);
	free(out);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(gzi);
}

static void test_gzi_lying_usize_caught_by_decode(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t *gzi, *out;
	const char *why = NULL;
	size_t gl;

	(void)state;
	build(&b, 4 * CHUNK, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	bfs_put_le64(gzi + 8 + 8, CHUNK - 1); /* block 0 one byte short */
	assert_int_equal(scan(b.buf, b.len, gzi, gl, &idx), 0);
	out = malloc(idx.usize);
	assert_int_equal(decode_blk(&idx, 0, b.buf, out, false, &why), -EBADMSG);
	assert_int_equal(decode_blk(&idx, 1, b.buf, out, false, &why), -EBADMSG);
	assert_int_equal(decode_blk(&idx, 2, b.buf, out, false, &why), 0);
	free(out);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(gzi);
}

/* ---- decode ---- */

static void test_decode_round_trip(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	size_t len = 7 * CHUNK + 999;
	uint8_t *d = gen_data(len, 42);

	(void)state;
	build(&b, len, true);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_decodes_to(&idx, b.buf, d, len);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(d);
}

static void test_decode_flipped_crc(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t out[CHUNK];
	const char *why = NULL;

	(void)state;
	build(&b, 2 * CHUNK, true);
	b.buf[b.m[1].coff + b.m[1].clen - 8] ^= 0x01; /* CRC32 of member 1 */
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_int_equal(tb_decode(&bfs_codec_bgzf, &idx.blk[1], b.buf + idx.blk[1].coff, out, true,
				   &why),
			 -EILSEQ);
	assert_string_equal(why, "CRC32 mismatch");
	/* without verify the data is trusted: the deflate stream itself is fine */
	assert_int_equal(tb_decode(&bfs_codec_bgzf, &idx.blk[1], b.buf + idx.blk[1].coff, out,
				   false, &why),
			 0);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_decode_flipped_deflate_byte(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t out[CHUNK];
	const char *why;
	int rc;

	(void)state;
	build(&b, CHUNK, true);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	for (size_t at = HDR_LEN; at < b.m[0].clen - 8; at += 97) {
		b.buf[at] ^= 0x20;
		why = NULL;
		rc = tb_decode(&bfs_codec_bgzf, &idx.blk[0], b.buf, out, true, &why);
		assert_true(rc == -EBADMSG || rc == -EILSEQ);
		assert_non_null(why);
		b.buf[at] ^= 0x20;
	}
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_decode_wrong_clen(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t out[CHUNK];
	const char *why = NULL;
	struct bfs_blk blk;

	(void)state;
	build(&b, 2 * CHUNK, false);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	blk = idx.blk[0];
	blk.clen -= 1; /* BSIZE + 1 no longer fits */
	assert_int_equal(tb_decode(&bfs_codec_bgzf, &blk, b.buf, out, false, &why), -EBADMSG);
	blk.clen += 2; /* one stray byte after the member */
	assert_int_equal(tb_decode(&bfs_codec_bgzf, &blk, b.buf, out, false, &why), -EBADMSG);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_decode_wrong_usize(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t out[CHUNK + 1];
	const char *why = NULL;
	struct bfs_blk blk;

	(void)state;
	build(&b, CHUNK, true);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	blk = idx.blk[0];
	blk.usize = CHUNK - 1;
	assert_int_equal(tb_decode(&bfs_codec_bgzf, &blk, b.buf, out, false, &why), -EBADMSG);
	blk.usize = CHUNK + 1;
	assert_int_equal(tb_decode(&bfs_codec_bgzf, &blk, b.buf, out, false, &why), -EBADMSG);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_decode_isize_lies(void **state)
{
	struct tb_bgzf b = { 0 };
	uint8_t out[CHUNK];
	const char *why = NULL;
	struct bfs_blk blk;
	uint8_t *isize;

	(void)state;
	build(&b, 1000, false);
	isize = b.buf + b.m[0].clen - 4;
	bfs_put_le32(isize, 999); /* the stream holds 1000 */
	blk = (struct bfs_blk){ .clen = b.m[0].clen, .usize = 999 };
	assert_int_equal(tb_decode(&bfs_codec_bgzf, &blk, b.buf, out, false, &why), -EBADMSG);
	bfs_put_le32(isize, 1001); /* the stream holds 1000 */
	blk.usize = 1001;
	assert_int_equal(tb_decode(&bfs_codec_bgzf, &blk, b.buf, out, false, &why), -EBADMSG);
	tb_bgzf_free(&b);
}

struct decode_job {
	const struct bfs_index *idx;
	const uint8_t *file, *want;
	int failures;
};

static void *decode_thread(void *arg)
{
	struct decode_job *j = arg;
	uint8_t *out = malloc(CHUNK);
	const char *why;

	for (int round = 0; round < 3; round++)
		for (size_t k = 0; k < j->idx->n; k++) {
			const struct bfs_blk *blk = &j->idx->blk[k];

			if (tb_decode(&bfs_codec_bgzf, blk, j->file + blk->coff, out, true, &why) !=
				    0 ||
			    memcmp(out, j->want + blk->uoff, blk->usize) != 0)
				j->failures++;
		}
	free(out);
	return NULL;
}

static void test_decode_concurrent_threads(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	size_t len = 12 * CHUNK;
	uint8_t *d = gen_data(len, 42);
	struct decode_job jobs[4];
	pthread_t t[4];

	(void)state;
	build(&b, len, true);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	for (int i = 0; i < 4; i++) {
		jobs[i] = (struct decode_job){ .idx = &idx, .file = b.buf, .want = d };
		assert_int_equal(pthread_create(&t[i], NULL, decode_thread, &jobs[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(jobs[i].failures, 0);
	}
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(d);
}

/* ---- hostile input ---- */

static void test_hostile_truncated_at_every_length(void **state)
{
	struct tb_bgzf b = { 0 };
	uint8_t *d = gen_data(2 * 3000, 9);

	(void)state;
	tb_bgzf_member(&b, d, 3000, false);
	tb_bgzf_member(&b, d + 3000, 3000, false);
	for (size_t cut = b.m[1].coff; cut < b.len; cut++) {
		struct bfs_index idx;

		assert_int_equal(scan(b.buf, cut, NULL, 0, &idx), 0);
		if (cut == b.m[1].coff) {
			assert_false(idx.broken); /* a clean member boundary */
			assert_int_equal(idx.n, 1);
		} else {
			assert_broken_at(&idx, &b, 1, b.m[1].coff);
		}
		bfs_index_destroy(&idx);
	}
	for (size_t cut = 1; cut < b.m[0].clen; cut++) {
		struct bfs_index idx;

		assert_int_equal(scan(b.buf, cut, NULL, 0, &idx), 0);
		assert_broken_at(&idx, &b, 0, 0);
		bfs_index_destroy(&idx);
	}
	tb_bgzf_free(&b);
	free(d);
}

static void test_hostile_bsize_past_eof(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };

	(void)state;
	build(&b, 3 * 1000, false);
	tb_bgzf_member(&b, (const uint8_t *)"tail", 4, false);
	b.buf[b.m[1].coff + 16] = 0xff; /* BSIZE 65535: far past the end */
	b.buf[b.m[1].coff + 17] = 0xff;
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_broken_at(&idx, &b, 1, b.m[1].coff);
	assert_non_null(strstr(idx.why, "past the end"));
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_hostile_bsize_too_small(void **state)
{
	struct tb_bgzf b = { 0 };
	uint8_t *d = gen_data(3000, 2);

	(void)state;
	tb_bgzf_member(&b, d, 1000, false);
	tb_bgzf_member(&b, d + 1000, 1000, false);
	tb_bgzf_member(&b, d + 2000, 1000, false);
	/* smallest legal BSIZE is 25 (18 + 8 - 1); 24 and 0 are not */
	for (unsigned int bsize = 0; bsize < 25; bsize += 24) {
		struct bfs_index idx;

		b.buf[b.m[1].coff + 16] = (uint8_t)bsize;
		b.buf[b.m[1].coff + 17] = 0;
		assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
		assert_broken_at(&idx, &b, 1, b.m[1].coff);
		assert_non_null(strstr(idx.why, "BSIZE"));
		bfs_index_destroy(&idx);
	}
	tb_bgzf_free(&b);
	free(d);
}

static void test_hostile_isize_huge(void **state)
{
	struct tb_bgzf b = { 0 };
	static const uint32_t bad[] = { 65537, 1u << 20, UINT32_MAX };

	(void)state;
	build(&b, 3 * CHUNK, true);
	for (size_t i = 0; i < BFS_ARRAY_SIZE(bad); i++) {
		struct bfs_index idx;

		bfs_put_le32(b.buf + b.m[2].coff + b.m[2].clen - 4, bad[i]);
		assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
		assert_broken_at(&idx, &b, 2, b.m[2].coff);
		assert_non_null(strstr(idx.why, "ISIZE"));
		bfs_index_destroy(&idx);
	}
	tb_bgzf_free(&b);
}

static void test_hostile_isize_max_accepted(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };

	(void)state;
	build(&b, 2 * CHUNK, true);
	/* 65536 is legal for scan; decode then sees the stream disagree */
	bfs_put_le32(b.buf + b.m[1].coff + b.m[1].clen - 4, 65536);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_false(idx.broken);
	assert_int_equal(idx.n, 2);
	assert_int_equal(idx.blk[1].usize, 65536);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

/*
 * ISIZE is under no checksum and places every member after it: one that
 * differs from its neighbours is measured (inflated) before a read relies
 * on it. The member fails; the ones after it stay in place.
 */
static void test_hostile_isize_lie_measured_in_place(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	struct bfs_io io;
	size_t len = 5 * CHUNK + 1000;
	uint8_t *d = gen_data(len, 42), *out;
	const char *why = NULL;

	(void)state;
	tb_bgzf_data(&b, d, len, true);
	bfs_put_le32(b.buf + b.m[1].coff + b.m[1].clen - 4, CHUNK + 1);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_int_equal(idx.blk[1].flags, BFS_BLK_GUESS | BFS_BLK_CLAIMED);
	assert_int_equal(idx.blk[2].flags, 0);
	assert_int_equal(atomic_load(&idx.nexact), 1);
	bfs_io_init_mem(&io, b.buf, b.len);
	assert_int_equal(bfs_settle(&idx, &io, &bfs_codec_bgzf, UINT64_MAX), 0);
	assert_int_equal(atomic_load(&idx.nexact), idx.n);
	assert_true(idx.blk[1].flags & BFS_BLK_BAD);
	assert_int_equal(idx.blk[1].usize, CHUNK);
	assert_int_equal(idx.usize, len + 1); /* shown size: damaged, not resized */
	assert_true(idx.blk[idx.n - 1].flags & BFS_BLK_BAD);
	out = malloc(len);
	assert_non_null(out);
	for (size_t k = 2; k < idx.n; k++) {
		assert_int_equal(idx.blk[k].uoff, k * CHUNK);
		assert_int_equal(decode_blk(&idx, k, b.buf, out, true, &why), 0);
	}
	assert_memory_equal(out + 2 * CHUNK, d + 2 * CHUNK, len - 2 * CHUNK);
	free(out);
	free(d);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

/*
 * A .gzi has no checksum at all: one uncompressed offset off by one makes
 * two spans odd. Both are measured and fail; everything else stays tb_bgzf_put.
 */
static void test_gzi_lying_offset_measured_in_place(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	struct bfs_io io;
	size_t len = 6 * CHUNK + 1000, gl;
	uint8_t *d = gen_data(len, 42), *gzi, *out;
	const char *why = NULL;

	(void)state;
	tb_bgzf_data(&b, d, len, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	bfs_put_le64(gzi + 8 + 16 + 8, 2 * CHUNK + 1); /* member 2 starts one byte late */
	assert_int_equal(scan(b.buf, b.len, gzi, gl, &idx), 0);
	assert_int_equal(idx.blk[1].flags, BFS_BLK_GUESS | BFS_BLK_CLAIMED);
	assert_int_equal(idx.blk[2].flags, BFS_BLK_GUESS | BFS_BLK_CLAIMED);
	bfs_io_init_mem(&io, b.buf, b.len);
	assert_int_equal(bfs_settle(&idx, &io, &bfs_codec_bgzf, UINT64_MAX), 0);
	assert_true(idx.blk[1].flags & BFS_BLK_BAD);
	assert_true(idx.blk[2].flags & BFS_BLK_BAD);
	assert_int_equal(idx.usize, len);
	out = malloc(len);
	assert_non_null(out);
	for (size_t k = 3; k < idx.n; k++) {
		assert_int_equal(idx.blk[k].uoff, k * CHUNK);
		assert_int_equal(decode_blk(&idx, k, b.buf, out, true, &why), 0);
	}
	assert_memory_equal(out + 3 * CHUNK, d + 3 * CHUNK, len - 3 * CHUNK);
	free(out);
	free(gzi);
	free(d);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

/* Members of many sizes (a writer that flushes at record ends): all measured, all right. */
static void test_irregular_members_measured(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	struct bfs_io io;
	size_t len = 0;
	uint8_t *d = gen_data(8 * CHUNK, 43);

	(void)state;
	for (size_t i = 0; i < 8; i++) {
		size_t n = 1000 + i * 7000;

		tb_bgzf_member(&b, d + len, n, false);
		len += n;
	}
	tb_bgzf_eof(&b);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_int_equal(atomic_load(&idx.nexact), 0);
	bfs_io_init_mem(&io, b.buf, b.len);
	assert_int_equal(bfs_settle(&idx, &io, &bfs_codec_bgzf, UINT64_MAX), 0);
	assert_walked(&idx, &b);
	assert_decodes_to(&idx, b.buf, d, len);
	free(d);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_hostile_bad_magic_middle(void **state)
{
	struct tb_bgzf b = { 0 };
	static const size_t at[] = { 0, 1, 2, 3 }; /* ID1, ID2, CM, FLG */

	(void)state;
	build(&b, 4 * CHUNK, true);
	for (size_t i = 0; i < BFS_ARRAY_SIZE(at); i++) {
		struct bfs_index idx;

		b.buf[b.m[2].coff + at[i]] ^= i == 3 ? 0x04 : 0x40; /* FLG: drop FEXTRA */
		assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
		assert_broken_at(&idx, &b, 2, b.m[2].coff);
		bfs_index_destroy(&idx);
		b.buf[b.m[2].coff + at[i]] ^= i == 3 ? 0x04 : 0x40;
	}
	tb_bgzf_free(&b);
}

static void test_hostile_bc_subfield_renamed(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };

	(void)state;
	build(&b, 3 * CHUNK, true);
	b.buf[b.m[1].coff + 13] = 'D'; /* 'B' 'D': gzip, but no BSIZE */
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_broken_at(&idx, &b, 1, b.m[1].coff);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_hostile_xlen_past_eof(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };

	(void)state;
	build(&b, 2 * CHUNK, false);
	tb_bgzf_member(&b, (const uint8_t *)"x", 1, false);
	b.buf[b.m[2].coff + 10] = 0xff; /* XLEN 65535 > what is left */
	b.buf[b.m[2].coff + 11] = 0xff;
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_broken_at(&idx, &b, 2, b.m[2].coff);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_hostile_junk_appended(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	size_t end;

	(void)state;
	build(&b, 3 * CHUNK, true);
	end = b.len;
	tb_bgzf_put(&b, "trailing junk, not a member", 27);
	assert_int_equal(scan(b.buf, b.len, NULL, 0, &idx), 0);
	assert_broken_at(&idx, &b, 3, end);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
}

static void test_hostile_junk_after_gzi_tail(void **state)
{
	struct bfs_index idx;
	struct tb_bgzf b = { 0 };
	uint8_t *gzi;
	size_t gl, end;

	(void)state;
	build(&b, 3 * CHUNK, true);
	gzi = tb_bgzf_gzi(&b, &gl);
	end = b.len;
	tb_bgzf_put(&b, "\x1f\x8b", 2); /* the start of a member, cut short */
	assert_int_equal(scan(b.buf, b.len, gzi, gl, &idx), 0);
	assert_broken_at(&idx, &b, 3, end);
	bfs_index_destroy(&idx);
	tb_bgzf_free(&b);
	free(gzi);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_bgzip_header),
		cmocka_unit_test(test_probe_short_head),
		cmocka_unit_test(test_probe_foreign_subfield_first),
		cmocka_unit_test(test_probe_plain_gzip),
		cmocka_unit_test(test_probe_fextra_without_bc),
		cmocka_unit_test(test_probe_bc_with_wrong_slen),
		cmocka_unit_test(test_scan_one_block),
		cmocka_unit_test(test_scan_many_blocks),
		cmocka_unit_test(test_scan_full_64k_member),
		cmocka_unit_test(test_scan_without_eof_marker),
		cmocka_unit_test(test_scan_only_eof_marker),
		cmocka_unit_test(test_scan_empty_file),
		cmocka_unit_test(test_scan_empty_members_between),
		cmocka_unit_test(test_scan_foreign_subfield_first),
		cmocka_unit_test(test_scan_walk_reads_headers_only),
		cmocka_unit_test(test_gzi_same_as_walk),
		cmocka_unit_test(test_gzi_reads_only_the_tail),
		cmocka_unit_test(test_gzi_count_zero_one_block),
		cmocka_unit_test(test_gzi_of_empty_input_ignored),
		cmocka_unit_test(test_gzi_wrong_count_ignored),
		cmocka_unit_test(test_gzi_non_monotonic_ignored),
		cmocka_unit_test(test_gzi_uncompressed_not_increasing_ignored),
		cmocka_unit_test(test_gzi_past_eof_ignored),
		cmocka_unit_test(test_gzi_concatenated_spans_decode),
		cmocka_unit_test(test_gzi_then_appended_members),
		cmocka_unit_test(test_gzi_lying_offset_caught_by_decode),
		cmocka_unit_test(test_gzi_lying_usize_caught_by_decode),
		cmocka_unit_test(test_decode_round_trip),
		cmocka_unit_test(test_decode_flipped_crc),
		cmocka_unit_test(test_decode_flipped_deflate_byte),
		cmocka_unit_test(test_decode_wrong_clen),
		cmocka_unit_test(test_decode_wrong_usize),
		cmocka_unit_test(test_decode_isize_lies),
		cmocka_unit_test(test_decode_concurrent_threads),
		cmocka_unit_test(test_hostile_truncated_at_every_length),
		cmocka_unit_test(test_hostile_bsize_past_eof),
		cmocka_unit_test(test_hostile_bsize_too_small),
		cmocka_unit_test(test_hostile_isize_huge),
		cmocka_unit_test(test_hostile_isize_max_accepted),
		cmocka_unit_test(test_hostile_isize_lie_measured_in_place),
		cmocka_unit_test(test_gzi_lying_offset_measured_in_place),
		cmocka_unit_test(test_irregular_members_measured),
		cmocka_unit_test(test_hostile_bad_magic_middle),
		cmocka_unit_test(test_hostile_bc_subfield_renamed),
		cmocka_unit_test(test_hostile_xlen_past_eof),
		cmocka_unit_test(test_hostile_junk_appended),
		cmocka_unit_test(test_hostile_junk_after_gzi_tail),
	};

	return cmocka_run_group_tests_name("codec_bgzf", tests, NULL, NULL);
}
