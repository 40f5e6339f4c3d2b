// SPDX-License-Identifier: MIT
/*
 * Unit tests of the seek table (seektable.c) and of XXH32 (xxh32.c):
 * writer and reader round trips, the reads the reader makes, and tables
 * that are truncated, damaged or well-formed but lying, which the reader
 * must refuse rather than hand to the scan.
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

#include <lz4frame.h>

#include "blockfs/io.h"
#include "blockfs/seektable.h"
#include "blockfs/xxh32.h"
#include "builders.h"

#define KIB    1024u
#define MIB    (1024u * 1024u)
#define PREFIX 7 /* a frame header before the first block */

/* A file image: frame bytes (junk here: the table never looks at them) + table. */
struct img {
	uint8_t *p;
	size_t len;
	size_t tab; /* where the table starts */
};

static void img_free(struct img *m)
{
	free(m->p);
	m->p = NULL;
}

/*
 * @n blocks of @bsize (the last one @last bytes decoded), clen @clen each,
 * in one frame starting at PREFIX; then the table.
 */
static void make(struct img *m, size_t n, uint32_t clen, uint32_t usize, uint32_t last,
		 uint32_t bmax, bool csum)
{
	struct bfs_seektable_writer w = { 0 };
	const uint8_t *tab;
	size_t tlen;
	uint64_t off = PREFIX;

	for (size_t i = 0; i < n; i++) {
		struct bfs_seektable_entry e = { .coff = off,
						 .clen = clen,
						 .usize = i + 1 == n ? last : usize,
						 .bmax = bmax,
						 .csum = csum };

		assert_int_equal(bfs_seektable_writer_add(&w, &e), 0);
		off += clen;
	}
	off += 4; /* EndMark */
	assert_int_equal(bfs_seektable_writer_finish(&w, off, usize, &tab, &tlen), 0);
	assert_int_equal(tlen, bfs_seektable_size(n));
	m->len = (size_t)off + tlen;
	m->tab = (size_t)off;
	m->p = calloc(1, m->len);
	assert_non_null(m->p);
	memset(m->p, 0x5A, (size_t)off);
	memcpy(m->p + off, tab, tlen);
	bfs_seektable_writer_release(&w);
}

static int load(const uint8_t *p, size_t len, struct bfs_seektable *t)
{
	struct bfs_io io;
	const char *why = NULL;
	int rc;

	bfs_io_init_mem(&io, p, len);
	rc = bfs_seektable_load(&io, SIZE_MAX, t, &why);
	if (rc == -EBADMSG)
		assert_non_null(why);
	return rc;
}

/* Recompute the checksum after editing a table: a lie, not damage. */
static void reseal(struct img *m)
{
	size_t size = m->len - m->tab;

	bfs_put_le32(m->p + m->len - 8,
		     bfs_xxh32(m->p + m->tab + BFS_SEEK_HDR_LEN, size - BFS_SEEK_HDR_LEN - 8, 0));
}

static uint8_t *entry(struct img *m, size_t i)
{
	return m->p + m->tab + BFS_SEEK_HDR_LEN + i * BFS_SEEK_ENTRY_LEN;
}

static uint8_t *footer(struct img *m)
{
	return m->p + m->len - BFS_SEEK_FOOTER_LEN;
}

/* ---- xxh32 ---- */

static void test_xxh32_known_values(void **state)
{
	(void)state;
	assert_int_equal(bfs_xxh32("", 0, 0), 0x02CC5D05u);
	assert_int_equal(bfs_xxh32("abc", 3, 0), 0x32D153FFu);
}

/* LZ4F writes XXH32 of the content at the end of a frame: ours must agree. */
static void test_xxh32_agrees_with_lz4_content_checksum(void **state)
{
	size_t n = 100 * KIB + 13;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_default, false, false, true, n);
	struct tb_buf frame = { 0 };
	uint8_t *in = malloc(n);
	uint64_t s = 88172645463325252ull;

	(void)state;
	assert_non_null(in);
	for (size_t i = 0; i < n; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		in[i] = (uint8_t)(s % 7 + 'a');
	}
	tb_lz4_frame(&frame, in, n, &p);
	assert_int_equal(bfs_xxh32(in, n, 0), bfs_le32(frame.p + frame.len - 4));
	free(frame.p);
	free(in);
}

static void test_xxh32_streaming_matches_one_shot(void **state)
{
	uint8_t buf[1000];

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 31 + 7);
	for (size_t len = 0; len <= sizeof(buf); len += 37) {
		for (size_t piece = 1; piece <= 40; piece += 3) {
			struct bfs_xxh32 st;

			bfs_xxh32_init(&st, 17);
			for (size_t at = 0; at < len; at += piece)
				bfs_xxh32_update(&st, buf + at,
						 len - at < piece ? len - at : piece);
			assert_int_equal(bfs_xxh32_digest(&st), bfs_xxh32(buf, len, 17));
		}
	}
}

/* ---- round trips ---- */

static void test_roundtrip(void **state)
{
	struct img m;
	struct bfs_seektable t;

	(void)state;
	make(&m, 10, 3000, 64 * KIB, 1234, 64 * KIB, true);
	assert_int_equal(load(m.p, m.len, &t), 0);
	assert_int_equal(t.n, 10);
	assert_int_equal(t.table_off, m.tab);
	assert_int_equal(t.usize, 9 * 64 * KIB + 1234);
	assert_int_equal(t.block_size, 64 * KIB);
	for (size_t i = 0; i < 10; i++) {
		assert_int_equal(t.e[i].coff, PREFIX + i * 3000);
		assert_int_equal(t.e[i].clen, 3000);
		assert_int_equal(t.e[i].usize, i == 9 ? 1234 : 64 * KIB);
		assert_int_equal(t.e[i].bmax, 64 * KIB);
		assert_true(t.e[i].csum);
	}
	free(t.e);
	img_free(&m);
}

static void test_roundtrip_largest_blocks(void **state)
{
	struct img m;
	struct bfs_seektable t;

	(void)state;
	make(&m, 3, 4 * MIB + 8, 4 * MIB, 4 * MIB, 4 * MIB, true);
	assert_int_equal(load(m.p, m.len, &t), 0);
	assert_int_equal(t.usize, 12ull * MIB);
	assert_int_equal(t.e[2].usize, 4 * MIB);
	assert_int_equal(t.e[2].bmax, 4 * MIB);
	free(t.e);
	img_free(&m);
}

static void test_roundtrip_empty(void **state)
{
	struct img m;
	struct bfs_seektable t;

	(void)state;
	make(&m, 0, 0, 64 * KIB, 0, 64 * KIB, false);
	assert_int_equal(load(m.p, m.len, &t), 0);
	assert_int_equal(t.n, 0);
	assert_int_equal(t.usize, 0);
	free(t.e);
	img_free(&m);
}

/* Blocks of two frames with different properties, a gap between them. */
static void test_roundtrip_two_frames(void **state)
{
	struct bfs_seektable_writer w = { 0 };
	struct bfs_seektable_entry a = { .coff = 7, .clen = 100, .usize = 500, .bmax = 64 * KIB },
				   b = { .coff = 7 + 100 + 4 + 15,
					 .clen = 200,
					 .usize = 900,
					 .bmax = 4 * MIB,
					 .csum = true };
	struct bfs_seektable t;
	const uint8_t *tab;
	uint8_t *file;
	size_t tlen, off = 7 + 100 + 4 + 15 + 200 + 4;

	(void)state;
	assert_int_equal(bfs_seektable_writer_add(&w, &a), 0);
	assert_int_equal(bfs_seektable_writer_add(&w, &b), 0);
	assert_int_equal(bfs_seektable_writer_finish(&w, off, 0, &tab, &tlen), 0);
	file = calloc(1, off + tlen);
	assert_non_null(file);
	memcpy(file + off, tab, tlen);
	assert_int_equal(load(file, off + tlen, &t), 0);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.block_size, 0);
	assert_false(t.e[0].csum);
	assert_int_equal(t.e[1].bmax, 4 * MIB);
	assert_int_equal(t.e[1].coff, b.coff);
	free(t.e);
	free(file);
	bfs_seektable_writer_release(&w);
}

/* ---- the reads the reader makes ---- */

static int nreads;
static size_t biggest;

static ssize_t counting_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	nreads++;
	if (len > biggest)
		biggest = len;
	return bfs_io_mem_ops.read(io, buf, len, off);
}

static int counted_load(struct img *m, struct bfs_seektable *t)
{
	static const struct bfs_io_ops counting = { .name = "counting", .read = counting_read };
	struct bfs_io io;
	const char *why;

	bfs_io_init_mem(&io, m->p, m->len);
	io.ops = &counting;
	nreads = 0;
	biggest = 0;
	return bfs_seektable_load(&io, SIZE_MAX, t, &why);
}

static void test_small_table_is_one_read(void **state)
{
	struct img m;
	struct bfs_seektable t;

	(void)state;
	make(&m, 200, 1000, 64 * KIB, 5, 64 * KIB, false);
	assert_int_equal(counted_load(&m, &t), 0);
	assert_int_equal(nreads, 1);
	assert_int_equal(biggest, BFS_SEEK_TAIL_LEN);
	free(t.e);
	img_free(&m);
}

static void test_big_table_is_two_reads(void **state)
{
	struct img m;
	struct bfs_seektable t;

	(void)state;
	make(&m, 20000, 100, 64 * KIB, 64 * KIB, 64 * KIB, false);
	assert_int_equal(counted_load(&m, &t), 0);
	assert_int_equal(t.n, 20000);
	assert_int_equal(nreads, 2);
	assert_int_equal(biggest, bfs_seektable_size(20000));
	free(t.e);
	img_free(&m);
}

/* ---- no table, truncated, damaged ---- */

static void test_no_table(void **state)
{
	uint8_t junk[5000];
	struct bfs_seektable t;

	(void)state;
	memset(junk, 0, sizeof(junk));
	assert_int_equal(load(junk, sizeof(junk), &t), 1);
	assert_int_equal(load(junk, 3, &t), 1);
	assert_int_equal(load(junk, 0, &t), 1);
}

/* A file cut anywhere inside its table has none, or a refused one. */
static void test_truncated_at_every_length(void **state)
{
	struct img m;
	struct bfs_seektable t;

	(void)state;
	make(&m, 5, 500, 64 * KIB, 77, 64 * KIB, true);
	for (size_t len = 0; len < m.len; len++) {
		int rc = load(m.p, len, &t);

		if (rc != 1 && rc != -EBADMSG)
			fail_msg("length %zu: %d", len, rc);
	}
	img_free(&m);
}

/* Bytes cut from the front (or added there) move the table: refused. */
static void test_moved_table_is_refused(void **state)
{
	struct img m;
	struct bfs_seektable t;
	uint8_t *longer;

	(void)state;
	make(&m, 5, 500, 64 * KIB, 77, 64 * KIB, true);
	assert_int_equal(load(m.p + 1, m.len - 1, &t), -EBADMSG);
	longer = calloc(1, m.len + 100);
	assert_non_null(longer);
	memcpy(longer + 100, m.p, m.len);
	assert_int_equal(load(longer, m.len + 100, &t), -EBADMSG);
	free(longer);
	img_free(&m);
}

static void test_flipped_bit_anywhere_is_refused(void **state)
{
	struct img m;
	struct bfs_seektable t;

	(void)state;
	make(&m, 4, 500, 64 * KIB, 77, 64 * KIB, true);
	for (size_t i = m.tab; i < m.len; i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			int rc;

			m.p[i] ^= (uint8_t)(1u << bit);
			rc = load(m.p, m.len, &t);
			m.p[i] ^= (uint8_t)(1u << bit);
			if (rc != 1 && rc != -EBADMSG)
				fail_msg("byte %zu bit %d: %d", i - m.tab, bit, rc);
		}
	}
	img_free(&m);
}

/* ---- well-formed (checksum resealed) but lying ---- */

static void assert_lie_refused(struct img *m)
{
	struct bfs_seektable t;

	reseal(m);
	assert_int_equal(load(m->p, m->len, &t), -EBADMSG);
}

static void test_lie_usize_zero(void **state)
{
	struct img m;

	(void)state;
	make(&m, 4, 500, 64 * KIB, 77, 64 * KIB, true);
	bfs_put_le32(entry(&m, 1) + 12, bfs_le32(entry(&m, 1) + 12) & ~0x7FFFFFu);
	assert_lie_refused(&m);
	img_free(&m);
}

static void test_lie_usize_above_block_max(void **state)
{
	struct img m;

	(void)state;
	make(&m, 4, 500, 64 * KIB, 77, 64 * KIB, true);
	bfs_put_le32(entry(&m, 1) + 12, bfs_le32(entry(&m, 1) + 12) + 1);
	assert_lie_refused(&m);
	img_free(&m);
}

static void test_lie_clen_above_block_max(void **state)
{
	struct img m;

	(void)state;
	make(&m, 1, 64 * KIB + 8, 64 * KIB, 64 * KIB, 64 * KIB, true);
	bfs_put_le32(entry(&m, 0) + 8, 64 * KIB + 9);
	/* keep the entry inside the frames: the only lie is the size */
	bfs_put_le64(footer(&m), m.tab);
	assert_lie_refused(&m);
	img_free(&m);
}

static void test_lie_block_max_id(void **state)
{
	struct img m;

	(void)state;
	make(&m, 2, 500, 100, 77, 64 * KIB, false);
	bfs_put_le32(entry(&m, 0) + 12, 100 | 3u << 24);
	assert_lie_refused(&m);
	img_free(&m);
}

static void test_lie_reserved_bits(void **state)
{
	struct img m;

	(void)state;
	make(&m, 2, 500, 100, 77, 64 * KIB, false);
	bfs_put_le32(entry(&m, 0) + 12, bfs_le32(entry(&m, 0) + 12) | 1u << 23);
	assert_lie_refused(&m);
	img_free(&m);
}

static void test_lie_overlapping_entries(void **state)
{
	struct img m;

	(void)state;
	make(&m, 4, 500, 100, 77, 64 * KIB, false);
	bfs_put_le64(entry(&m, 2), PREFIX + 500 + 499);
	assert_lie_refused(&m);
	img_free(&m);
}

static void test_lie_entries_out_of_order(void **state)
{
	struct img m;
	uint8_t tmp[BFS_SEEK_ENTRY_LEN];

	(void)state;
	make(&m, 4, 500, 100, 100, 64 * KIB, false);
	memcpy(tmp, entry(&m, 1), sizeof(tmp));
	memcpy(entry(&m, 1), entry(&m, 2), sizeof(tmp));
	memcpy(entry(&m, 2), tmp, sizeof(tmp));
	assert_lie_refused(&m);
	img_free(&m);
}

/* A gap too small for an EndMark and a frame header cannot be a frame boundary. */
static void test_lie_small_gap(void **state)
{
	struct img m;

	(void)state;
	make(&m, 4, 500, 100, 100, 64 * KIB, false);
	bfs_put_le64(entry(&m, 3), bfs_le64(entry(&m, 3)) + 3);
	bfs_put_le32(entry(&m, 3) + 8, 497);
	assert_lie_refused(&m);
	img_free(&m);
}

static void test_lie_entry_inside_table(void **state)
{
	struct img m;

	(void)state;
	make(&m, 4, 500, 100, 100, 64 * KIB, false);
	bfs_put_le32(entry(&m, 3) + 8, 502); /* runs over the EndMark into the table */
	assert_lie_refused(&m);
	img_free(&m);
}

static void test_lie_total(void **state)
{
	struct img m;

	(void)state;
	make(&m, 4, 500, 100, 100, 64 * KIB, false);
	bfs_put_le64(footer(&m) + 8, 401);
	assert_lie_refused(&m);
	img_free(&m);
}

static void test_lie_count(void **state)
{
	struct img m;

	(void)state;
	make(&m, 4, 500, 100, 100, 64 * KIB, false);
	bfs_put_le32(footer(&m) + 16, 3);
	assert_lie_refused(&m);
	bfs_put_le32(footer(&m) + 16, 0xFFFFFFFFu);
	assert_lie_refused(&m);
	img_free(&m);
}

static void test_count_above_limit(void **state)
{
	struct img m;
	struct bfs_io io;
	struct bfs_seektable t;
	const char *why;

	(void)state;
	make(&m, 4, 500, 100, 100, 64 * KIB, false);
	bfs_io_init_mem(&io, m.p, m.len);
	assert_int_equal(bfs_seektable_load(&io, 3, &t, &why), -EBADMSG);
	img_free(&m);
}

static void test_unknown_version(void **state)
{
	struct img m;

	(void)state;
	make(&m, 1, 500, 100, 100, 64 * KIB, false);
	bfs_put_le32(footer(&m) + 24, 2);
	assert_lie_refused(&m);
	img_free(&m);
}

static void test_wrong_frame_magic(void **state)
{
	struct img m;

	(void)state;
	make(&m, 1, 500, 100, 100, 64 * KIB, false);
	bfs_put_le32(m.p + m.tab, 0x184D2A50u);
	assert_lie_refused(&m); /* the frame magic is not under the checksum */
	img_free(&m);
}

/* ---- the writer refuses what the reader would ---- */

static void test_writer_refuses_bad_entries(void **state)
{
	struct bfs_seektable_entry ok = { .coff = 7, .clen = 100, .usize = 200, .bmax = 64 * KIB };
	struct bfs_seektable_entry bads[] = {
		{ .coff = 7, .clen = 100, .usize = 0, .bmax = 64 * KIB },
		{ .coff = 7, .clen = 100, .usize = 64 * KIB + 1, .bmax = 64 * KIB },
		{ .coff = 7, .clen = 100, .usize = 1, .bmax = 128 * KIB },
		{ .coff = 7, .clen = 4, .usize = 1, .bmax = 64 * KIB },
		{ .coff = 7, .clen = 8, .usize = 1, .bmax = 64 * KIB, .csum = true },
		{ .coff = 0, .clen = 100, .usize = 1, .bmax = 64 * KIB },
	};
	const uint8_t *tab;
	size_t len;

	(void)state;
	for (size_t i = 0; i < BFS_ARRAY_SIZE(bads); i++) {
		struct bfs_seektable_writer w = { 0 };

		assert_int_equal(bfs_seektable_writer_add(&w, &bads[i]), -EINVAL);
		assert_int_equal(bfs_seektable_writer_add(&w, &ok), -EINVAL); /* sticky */
		assert_int_equal(bfs_seektable_writer_finish(&w, 1000, 0, &tab, &len), -EINVAL);
		bfs_seektable_writer_release(&w);
	}
}

static void test_writer_refuses_overlap_and_short_table_offset(void **state)
{
	struct bfs_seektable_entry a = { .coff = 7, .clen = 100, .usize = 200, .bmax = 64 * KIB };
	struct bfs_seektable_entry b = { .coff = 106, .clen = 100, .usize = 200, .bmax = 64 * KIB };
	struct bfs_seektable_writer w = { 0 };
	const uint8_t *tab;
	size_t len;

	(void)state;
	assert_int_equal(bfs_seektable_writer_add(&w, &a), 0);
	assert_int_equal(bfs_seektable_writer_finish(&w, 107 + 3, 0, &tab, &len), -EINVAL);
	assert_int_equal(bfs_seektable_writer_add(&w, &b), -EINVAL);
	bfs_seektable_writer_release(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_xxh32_known_values),
		cmocka_unit_test(test_xxh32_agrees_with_lz4_content_checksum),
		cmocka_unit_test(test_xxh32_streaming_matches_one_shot),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_roundtrip_largest_blocks),
		cmocka_unit_test(test_roundtrip_empty),
		cmocka_unit_test(test_roundtrip_two_frames),
		cmocka_unit_test(test_small_table_is_one_read),
		cmocka_unit_test(test_big_table_is_two_reads),
		cmocka_unit_test(test_no_table),
		cmocka_unit_test(test_truncated_at_every_length),
		cmocka_unit_test(test_moved_table_is_refused),
		cmocka_unit_test(test_flipped_bit_anywhere_is_refused),
		cmocka_unit_test(test_lie_usize_zero),
		cmocka_unit_test(test_lie_usize_above_block_max),
		cmocka_unit_test(test_lie_clen_above_block_max),
		cmocka_unit_test(test_lie_block_max_id),
		cmocka_unit_test(test_lie_reserved_bits),
		cmocka_unit_test(test_lie_overlapping_entries),
		cmocka_unit_test(test_lie_entries_out_of_order),
		cmocka_unit_test(test_lie_small_gap),
		cmocka_unit_test(test_lie_entry_inside_table),
		cmocka_unit_test(test_lie_total),
		cmocka_unit_test(test_lie_count),
		cmocka_unit_test(test_count_above_limit),
		cmocka_unit_test(test_unknown_version),
		cmocka_unit_test(test_wrong_frame_magic),
		cmocka_unit_test(test_writer_refuses_bad_entries),
		cmocka_unit_test(test_writer_refuses_overlap_and_short_table_offset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
