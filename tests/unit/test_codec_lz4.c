// SPDX-License-Identifier: MIT
/*
 * Unit tests of the LZ4 codec: probe, scan, settle, decode and measure on
 * frames built in memory with liblz4's frame API, and on hand-damaged
 * copies of them. Hostile cases assert the exact index that results.
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
#include "blockfs/io.h"
#include "blockfs/seektable.h"
#include "blockfs/xxh32.h"
#include "builders.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

/* Offsets inside a frame header (lz4_Frame_format.md). */
#define OFF_FLG	   4
#define OFF_BD	   5
#define HLEN_PLAIN 7  /* magic FLG BD HC */
#define HLEN_CSIZE 15 /* ... plus an 8-byte content size */

struct fx {
	struct tb_buf file; /* backing bytes */
	uint8_t *in;	    /* the data compressed into it */
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

static int scan(struct fx *f)
{
	if (f->have_idx)
		bfs_index_destroy(&f->idx);
	bfs_io_init_mem(&f->io, f->file.p, f->file.len);
	bfs_index_init(&f->idx, f->file.len);
	f->have_idx = true;
	return bfs_codec_lz4.scan(&f->io, NULL, &f->idx);
}

static void settle_all(struct fx *f)
{
	assert_int_equal(bfs_settle(&f->idx, &f->io, &bfs_codec_lz4, UINT64_MAX), 0);
	assert_int_equal(atomic_load(&f->idx.nexact), f->idx.n);
}

/* Decode blocks [0, @nblk) in order; the result must be exactly @want. */
static void assert_blocks_decode_to(struct fx *f, size_t nblk, const uint8_t *want, size_t n)
{
	uint8_t *out = malloc(n ? n : 1);
	size_t at = 0;

	assert_non_null(out);
	for (size_t i = 0; i < nblk; i++) {
		const struct bfs_blk *b = &f->idx.blk[i];
		const char *why = NULL;
		uint8_t *dst;

		assert_false(b->flags & (BFS_BLK_BAD | BFS_BLK_GUESS));
		assert_int_equal(b->uoff, at);
		assert_true(bfs_range_ok(b->coff, b->clen, f->file.len));
		assert_true(at + b->usize <= n);
		/* exactly usize bytes, so that ASan sees any write past them */
		dst = malloc(b->usize);
		assert_non_null(dst);
		assert_int_equal(tb_decode(&bfs_codec_lz4, b, f->file.p + b->coff, dst, true, &why),
				 0);
		memcpy(out + at, dst, b->usize);
		free(dst);
		at += b->usize;
	}
	assert_int_equal(at, n);
	assert_memory_equal(out, want, n);
	free(out);
}

/* Decode every block; the whole file must be exactly @want. */
static void assert_decodes_to(struct fx *f, const uint8_t *want, size_t n)
{
	assert_false(f->idx.broken);
	assert_int_equal(f->idx.usize, n);
	assert_blocks_decode_to(f, f->idx.n, want, n);
}

/* Compress @n bytes of text with @p, scan, settle, decode. */
static void roundtrip(struct fx *f, size_t n, const LZ4F_preferences_t *p)
{
	f->in = tb_text(n, n);
	f->n = n;
	tb_lz4_frame(&f->file, f->in, n, p);
	assert_int_equal(scan(f), 0);
	assert_false(f->idx.broken);
	settle_all(f);
	assert_decodes_to(f, f->in, n);
}

static void assert_broken_at(struct fx *f, size_t nblocks, uint64_t coff, const char *why)
{
	assert_true(f->idx.broken);
	assert_int_equal(f->idx.n, nblocks);
	assert_int_equal(f->idx.blk[nblocks - 1].flags, BFS_BLK_BAD);
	assert_int_equal(f->idx.blk[nblocks - 1].coff, coff);
	if (!strstr(f->idx.why, why))
		fail_msg("why is \"%s\", expected \"%s\"", f->idx.why, why);
}

/* ---- probe ---- */

static void test_probe_default_frame(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	tb_lz4_header(&f->file, &p);
	assert_true(bfs_codec_lz4.probe(f->file.p, f->file.len));
	assert_ptr_equal(bfs_codec_probe(NULL, f->file.p, f->file.len), &bfs_codec_lz4);
}

static void test_probe_short_prefixes(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max4MB, true, true, true, 5);

	tb_lz4_header(&f->file, &p);
	/* magic + FLG + BD decide; anything shorter cannot be told apart */
	for (size_t len = 0; len < 6; len++)
		assert_false(bfs_codec_lz4.probe(f->file.p, len));
	for (size_t len = 6; len <= f->file.len; len++)
		assert_true(bfs_codec_lz4.probe(f->file.p, len));
}

static void test_probe_claims_linked_blocks(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	p.frameInfo.blockMode = LZ4F_blockLinked;
	tb_lz4_header(&f->file, &p);
	assert_true(bfs_codec_lz4.probe(f->file.p, f->file.len));
}

static void test_probe_rejects_dict_id(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	p.frameInfo.dictID = 7;
	tb_lz4_header(&f->file, &p);
	assert_int_equal(f->file.p[OFF_FLG] & 1, 1);
	assert_false(bfs_codec_lz4.probe(f->file.p, f->file.len));
}

static void test_probe_claims_legacy_magic(void **state)
{
	static const uint8_t legacy[] = { 0x02, 0x21, 0x4C, 0x18, 0x10, 0, 0, 0, 0x40 };

	(void)state;
	assert_true(bfs_codec_lz4.probe(legacy, sizeof(legacy)));
	assert_true(bfs_codec_lz4.probe(legacy, 4));
	assert_false(bfs_codec_lz4.probe(legacy, 3));
}

static void test_probe_rejects_bad_flg_bd(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	uint8_t h[HLEN_PLAIN];

	tb_lz4_header(&f->file, &p);
	assert_int_equal(f->file.len, HLEN_PLAIN);
	memcpy(h, f->file.p, HLEN_PLAIN);
	h[OFF_FLG] ^= 0x80; /* version 11 */
	assert_false(bfs_codec_lz4.probe(h, sizeof(h)));
	memcpy(h, f->file.p, HLEN_PLAIN);
	h[OFF_FLG] |= 0x02; /* reserved FLG bit */
	assert_false(bfs_codec_lz4.probe(h, sizeof(h)));
	memcpy(h, f->file.p, HLEN_PLAIN);
	h[OFF_BD] |= 0x80; /* reserved BD bit 7 */
	assert_false(bfs_codec_lz4.probe(h, sizeof(h)));
	memcpy(h, f->file.p, HLEN_PLAIN);
	h[OFF_BD] |= 0x01; /* reserved BD low bits */
	assert_false(bfs_codec_lz4.probe(h, sizeof(h)));
	for (unsigned int id = 0; id < 4; id++) {
		memcpy(h, f->file.p, HLEN_PLAIN);
		h[OFF_BD] = (uint8_t)(id << 4);
		assert_false(bfs_codec_lz4.probe(h, sizeof(h)));
	}
}

static void test_probe_rejects_other_data(void **state)
{
	static const uint8_t gz[] = { 0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 6, 0, 'B', 'C' };
	static const uint8_t text[] = "hello, world\n";

	(void)state;
	assert_false(bfs_codec_lz4.probe(gz, sizeof(gz)));
	assert_false(bfs_codec_lz4.probe(text, sizeof(text) - 1));
}

static const struct bfs_codec *sniff_file(struct fx *f)
{
	struct bfs_io io;

	bfs_io_init_mem(&io, f->file.p, f->file.len);
	return bfs_codec_sniff(NULL, &io);
}

static void test_sniff_sees_past_skippable_frames(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	tb_lz4_skippable(&f->file, 0xF, 1000); /* longer than any probe head */
	tb_lz4_skippable(&f->file, 0x0, 0);
	tb_lz4_header(&f->file, &p);
	tb_put_le32(&f->file, 0);				     /* EndMark: an empty frame */
	assert_false(bfs_codec_lz4.probe(f->file.p, BFS_PROBE_LEN)); /* magic only */
	assert_ptr_equal(sniff_file(f), &bfs_codec_lz4);
	/* ...and scan serves it */
	assert_int_equal(scan(f), 0);
	assert_false(f->idx.broken);
	assert_int_equal(f->idx.n, 0);
}

static void test_sniff_skippable_then_not_lz4(void **state)
{
	static const uint8_t gz[] = { 0x1f, 0x8b, 8, 4,	  0,   0, 0, 0,	 0,
				      0xff, 6,	  0, 'B', 'C', 2, 0, 27, 0 };
	struct fx *f = *state;

	tb_lz4_skippable(&f->file, 0x3, 40);
	tb_put(&f->file, gz, sizeof(gz));
	assert_null(sniff_file(f)); /* only LZ4 may follow an LZ4 prelude */
}

static void test_sniff_skippable_only(void **state)
{
	struct fx *f = *state;

	tb_lz4_skippable(&f->file, 0x1, 100);
	assert_null(sniff_file(f));
}

static void test_sniff_skippable_past_eof(void **state)
{
	struct fx *f = *state;

	tb_lz4_skippable(&f->file, 0x1, 100);
	f->file.len -= 50; /* the frame claims more than there is */
	assert_null(sniff_file(f));
}

/* ---- scan + decode of well-formed files ---- */

static void test_roundtrip_block_64k(void **state)
{
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	roundtrip(*state, 300 * KIB + 17, &p);
	assert_int_equal(((struct fx *)*state)->idx.block_size, 64 * KIB);
	assert_int_equal(((struct fx *)*state)->idx.n, 5);
}

static void test_roundtrip_block_256k(void **state)
{
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max256KB, false, false, false, 0);

	roundtrip(*state, MIB + 3, &p);
	assert_int_equal(((struct fx *)*state)->idx.block_size, 256 * KIB);
	assert_int_equal(((struct fx *)*state)->idx.n, 5);
}

static void test_roundtrip_block_1m(void **state)
{
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max1MB, false, false, false, 0);

	roundtrip(*state, 2 * MIB + 100, &p);
	assert_int_equal(((struct fx *)*state)->idx.block_size, MIB);
	assert_int_equal(((struct fx *)*state)->idx.n, 3);
}

static void test_roundtrip_block_4m(void **state)
{
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max4MB, false, false, false, 0);

	roundtrip(*state, 9 * MIB, &p);
	assert_int_equal(((struct fx *)*state)->idx.block_size, 4 * MIB);
	assert_int_equal(((struct fx *)*state)->idx.n, 3);
}

/* Middle blocks are guessed at the block max; the last one is measured. */
static void test_scan_guesses_middle_blocks_only(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	f->in = tb_text(200 * KIB, 1);
	tb_lz4_frame(&f->file, f->in, 200 * KIB, &p);
	assert_int_equal(scan(f), 0);
	assert_int_equal(f->idx.n, 4);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(f->idx.blk[i].flags, BFS_BLK_GUESS);
		assert_int_equal(f->idx.blk[i].usize, 64 * KIB);
		assert_int_equal(f->idx.blk[i].aux, 64 * KIB);
	}
	assert_int_equal(f->idx.blk[3].flags, 0);
	assert_int_equal(f->idx.blk[3].usize, 8 * KIB);
	assert_int_equal(atomic_load(&f->idx.nexact), 0);
	/* the first block header follows the 7-byte frame header */
	assert_int_equal(f->idx.blk[0].coff, HLEN_PLAIN);
	assert_int_equal(f->idx.blk[1].coff, f->idx.blk[0].coff + f->idx.blk[0].clen);
}

static void test_content_size_single_block_is_exact(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max256KB, true, false, false, 100 * KIB);

	roundtrip(f, 100 * KIB, &p);
	assert_int_equal(f->idx.n, 1);
	assert_int_equal(f->idx.blk[0].coff, HLEN_CSIZE);
	assert_int_equal(f->idx.blk[0].flags, 0);
}

static void test_content_size_many_blocks(void **state)
{
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, true, false, false, 500 * KIB);

	roundtrip(*state, 500 * KIB, &p);
}

static void test_block_checksums(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, false, 0);

	roundtrip(f, 150 * KIB, &p);
	assert_int_equal(f->idx.n, 3);
	for (size_t i = 0; i < f->idx.n; i++) {
		const struct bfs_blk *b = &f->idx.blk[i];

		assert_int_equal(b->flags, BFS_BLK_CSUM);
		/* size word + data + checksum */
		assert_int_equal(b->clen, 4 + (bfs_le32(f->file.p + b->coff) & 0x7FFFFFFF) + 4);
	}
}

static void test_content_checksum_is_skipped(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, true, 0);
	uint8_t *both;

	/* two frames: the second is found only if the 4-byte checksum is skipped */
	f->in = tb_text(70 * KIB, 2);
	tb_lz4_frame(&f->file, f->in, 70 * KIB, &p);
	tb_lz4_frame(&f->file, f->in, 70 * KIB, &p);
	assert_int_equal(scan(f), 0);
	assert_false(f->idx.broken);
	settle_all(f);
	both = malloc(140 * KIB);
	assert_non_null(both);
	memcpy(both, f->in, 70 * KIB);
	memcpy(both + 70 * KIB, f->in, 70 * KIB);
	assert_decodes_to(f, both, 140 * KIB);
	free(both);
}

static void test_all_flags_together(void **state)
{
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max256KB, true, true, true, 600 * KIB + 1);

	roundtrip(*state, 600 * KIB + 1, &p);
}

static void test_concatenated_frames(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p1 = tb_lz4_prefs(LZ4F_max64KB, true, false, false, 100 * KIB);
	LZ4F_preferences_t p2 = tb_lz4_prefs(LZ4F_max1MB, false, true, true, 0);
	LZ4F_preferences_t p3 = tb_lz4_prefs(LZ4F_max256KB, true, true, false, 50);
	size_t n = 100 * KIB + 1500 * KIB + 50;

	f->in = tb_text(n, 3);
	tb_lz4_frame(&f->file, f->in, 100 * KIB, &p1);
	tb_lz4_frame(&f->file, f->in + 100 * KIB, 1500 * KIB, &p2);
	tb_lz4_frame(&f->file, f->in + 1600 * KIB, 50, &p3);
	assert_int_equal(scan(f), 0);
	assert_false(f->idx.broken);
	assert_int_equal(f->idx.block_size, MIB);
	assert_int_equal(f->idx.n, 2 + 2 + 1);
	settle_all(f);
	assert_decodes_to(f, f->in, n);
}

static void test_skippable_frames_start_middle_end(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	f->in = tb_text(2 * 80 * KIB, 4);
	tb_lz4_skippable(&f->file, 0, 12);
	tb_lz4_skippable(&f->file, 0xF, 0);
	tb_lz4_frame(&f->file, f->in, 80 * KIB, &p);
	tb_lz4_skippable(&f->file, 7, 33);
	tb_lz4_frame(&f->file, f->in + 80 * KIB, 80 * KIB, &p);
	tb_lz4_skippable(&f->file, 1, 64);
	assert_int_equal(scan(f), 0);
	assert_false(f->idx.broken);
	assert_int_equal(f->idx.blk[0].coff, 8 + 12 + 8 + HLEN_PLAIN);
	settle_all(f);
	assert_decodes_to(f, f->in, 2 * 80 * KIB);
}

static void test_stored_blocks_are_exact(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, false, 0);

	f->in = tb_random(130 * KIB, 5);
	f->n = 130 * KIB;
	tb_lz4_frame(&f->file, f->in, f->n, &p);
	assert_int_equal(scan(f), 0);
	assert_int_equal(f->idx.n, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_true(bfs_le32(f->file.p + f->idx.blk[i].coff) & 0x80000000u);
		assert_int_equal(f->idx.blk[i].flags, BFS_BLK_CSUM); /* no guess */
	}
	assert_int_equal(atomic_load(&f->idx.nexact), 3);
	assert_decodes_to(f, f->in, f->n);
}

static void test_empty_input(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, true, true, true, 0);

	tb_lz4_frame(&f->file, NULL, 0, &p);
	assert_true(bfs_codec_lz4.probe(f->file.p, f->file.len));
	assert_int_equal(scan(f), 0);
	assert_false(f->idx.broken);
	assert_int_equal(f->idx.n, 0);
	assert_int_equal(f->idx.usize, 0);
	assert_int_equal(f->idx.block_size, 64 * KIB);
}

static void test_empty_file(void **state)
{
	struct fx *f = *state;

	assert_int_equal(scan(f), 0);
	assert_false(f->idx.broken);
	assert_int_equal(f->idx.n, 0);
}

static void test_one_byte(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max4MB, true, false, true, 1);

	roundtrip(f, 1, &p);
	assert_int_equal(f->idx.n, 1);
	assert_int_equal(f->idx.blk[0].usize, 1);
}

static void test_exact_multiple_of_block_size(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	roundtrip(f, 4 * 64 * KIB, &p);
	assert_int_equal(f->idx.n, 4);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(f->idx.blk[i].usize, 64 * KIB);
}

/* LZ4F_flush ends blocks early: the guesses are wrong until settled. */
static void test_short_middle_blocks_settle(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	size_t n = 250 * KIB;

	f->in = tb_text(n, 6);
	tb_lz4_frame_chunked(&f->file, f->in, n, &p, 10 * KIB + 3);
	assert_int_equal(scan(f), 0);
	assert_false(f->idx.broken);
	assert_int_equal(f->idx.n, 25);
	assert_int_equal(f->idx.blk[0].flags, BFS_BLK_GUESS);
	assert_int_equal(f->idx.blk[0].usize, 64 * KIB);
	assert_int_equal(f->idx.usize, 24 * 64 * KIB + (n - 24 * (10 * KIB + 3)));

	/* settling up to byte 25 000 fixes blocks 0..2 only */
	assert_int_equal(bfs_settle(&f->idx, &f->io, &bfs_codec_lz4, 25000), 0);
	assert_int_equal(atomic_load(&f->idx.nexact), 3);
	assert_int_equal(f->idx.blk[2].usize, 10 * KIB + 3);
	assert_int_equal(f->idx.blk[3].flags, BFS_BLK_GUESS);

	settle_all(f);
	for (size_t i = 0; i < 24; i++)
		assert_int_equal(f->idx.blk[i].usize, 10 * KIB + 3);
	assert_decodes_to(f, f->in, n);
}

/* What bfs_file_open() does after the scan: the size is exact from here on. */
static void measure(struct fx *f)
{
	assert_int_equal(bfs_measure(&f->idx, &f->io, &bfs_codec_lz4, NULL), 0);
}

/* A flushing writer without a content size: measured right after the scan. */
static void test_short_middle_blocks_measured(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, true, 0);
	size_t n = 250 * KIB;

	f->in = tb_text(n, 7);
	tb_lz4_frame_chunked(&f->file, f->in, n, &p, 3 * KIB + 1);
	assert_int_equal(scan(f), 0);
	assert_true(f->idx.usize > n); /* the guesses */
	measure(f);
	assert_int_equal(f->idx.usize, n); /* before anything is read */
	assert_int_equal(atomic_load(&f->idx.nexact), f->idx.n);
	assert_decodes_to(f, f->in, n);
}

/* A content size that the guesses add up to proves them: nothing is measured. */
static void test_content_size_proves_full_blocks(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, true, false, false, 5 * 64 * KIB + 100);

	f->n = 5 * 64 * KIB + 100;
	f->in = tb_text(f->n, 8);
	tb_lz4_frame(&f->file, f->in, f->n, &p);
	assert_int_equal(scan(f), 0);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(f->idx.blk[i].flags, BFS_BLK_GUESS | BFS_BLK_CLAIMED);
	measure(f);
	assert_int_equal(f->idx.usize, f->n);
	assert_int_equal(atomic_load(&f->idx.nexact), 0); /* checked as reads need it */
	settle_all(f);
	assert_decodes_to(f, f->in, f->n);
}

/* Short blocks under a content size: measured, and the total checked. */
static void test_content_size_with_short_blocks(void **state)
{
	struct fx *f = *state;
	size_t n = 200 * KIB + 17;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max256KB, true, true, true, n);

	f->in = tb_text(n, 9);
	tb_lz4_frame_chunked(&f->file, f->in, n, &p, 5000);
	assert_int_equal(scan(f), 0);
	assert_int_equal(f->idx.nsums, 1);
	measure(f);
	assert_false(f->idx.broken);
	assert_int_equal(f->idx.usize, n);
	assert_int_equal(atomic_load(&f->idx.nexact), f->idx.n);
	assert_decodes_to(f, f->in, n);
}

/* A content size that the measured blocks do not hold: damage after the frame. */
static void test_content_size_lie_with_short_blocks(void **state)
{
	struct fx *f = *state;
	size_t n = 100 * KIB;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, true, false, false, n);
	uint8_t *h;
	size_t nblk;

	f->in = tb_text(n, 10);
	tb_lz4_frame_chunked(&f->file, f->in, n, &p, 7000);
	/* the header says 64 bytes more; reseal its checksum so only the size lies */
	h = f->file.p;
	bfs_put_le64(h + 6, n + 64);
	h[14] = (uint8_t)(bfs_xxh32(h + 4, 10, 0) >> 8);
	assert_int_equal(scan(f), 0);
	nblk = f->idx.n;
	measure(f);
	assert_true(f->idx.broken);
	assert_non_null(strstr(f->idx.why, "its header says"));
	assert_int_equal(f->idx.n, nblk + 1); /* every block, then the poison */
	assert_int_equal(f->idx.usize, n + 1);
	assert_blocks_decode_to(f, nblk, f->in, n);
}

/* ---- verify ---- */

static void test_verify_catches_flipped_checksum(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, false, 0);
	const struct bfs_blk *b;
	uint8_t *out = malloc(64 * KIB);
	const char *why = NULL;

	f->in = tb_text(10 * KIB, 7);
	tb_lz4_frame(&f->file, f->in, 10 * KIB, &p);
	assert_int_equal(scan(f), 0);
	b = &f->idx.blk[0];
	f->file.p[b->coff + b->clen - 1] ^= 0x01;
	assert_int_equal(tb_decode(&bfs_codec_lz4, b, f->file.p + b->coff, out, true, &why),
			 -EILSEQ);
	assert_string_equal(why, "block checksum mismatch");
	/* without verify the data itself is fine */
	assert_int_equal(tb_decode(&bfs_codec_lz4, b, f->file.p + b->coff, out, false, &why), 0);
	assert_memory_equal(out, f->in, 10 * KIB);
	free(out);
}

static void test_verify_catches_flipped_data_byte(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, false, 0);
	const struct bfs_blk *b;
	uint8_t *out = malloc(64 * KIB);
	const char *why = NULL;

	f->in = tb_text(10 * KIB, 8);
	tb_lz4_frame(&f->file, f->in, 10 * KIB, &p);
	assert_int_equal(scan(f), 0);
	b = &f->idx.blk[0];
	f->file.p[b->coff + 4 + 100] ^= 0x20;
	assert_int_equal(tb_decode(&bfs_codec_lz4, b, f->file.p + b->coff, out, true, &why),
			 -EILSEQ);
	free(out);
}

/* decode() of a prefix: the first n bytes, exactly what a whole decode gives there. */
static void test_decode_prefix_matches_decode(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max256KB, false, true, false, 0);
	static const uint32_t ns[] = { 1, 4096, 65536, 100000, 256 * KIB - 1 };
	const struct bfs_blk *b;
	const char *why = NULL;

	f->n = 300 * KIB;
	f->in = tb_text(f->n, 11);
	tb_lz4_frame(&f->file, f->in, f->n, &p);
	assert_int_equal(scan(f), 0);
	b = &f->idx.blk[0];
	assert_int_equal(b->usize, 256 * KIB);
	for (size_t i = 0; i < BFS_ARRAY_SIZE(ns); i++) {
		/* exactly n bytes, so that ASan sees a write past them */
		uint8_t *out = malloc(ns[i]);

		assert_non_null(out);
		assert_int_equal(tb_decode_prefix(&bfs_codec_lz4, b, f->file.p + b->coff, out,
						  ns[i], true, &why),
				 0);
		assert_memory_equal(out, f->in, ns[i]);
		free(out);
	}
}

/* ... of a stored block too, and its checksum is checked all the same. */
static void test_decode_prefix_stored_and_checked(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, false, 0);
	uint8_t *in = malloc(64 * KIB), out[5000];
	const struct bfs_blk *b;
	const char *why = NULL;

	assert_non_null(in);
	for (uint64_t i = 0, x = 88172645463325252ull; i < 64 * KIB; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		in[i] = (uint8_t)(x >> 32); /* incompressible: stored */
	}
	f->in = in;
	f->n = 64 * KIB;
	tb_lz4_frame(&f->file, in, f->n, &p);
	assert_int_equal(scan(f), 0);
	b = &f->idx.blk[0];
	assert_true(bfs_le32(f->file.p + b->coff) & 0x80000000u);
	assert_int_equal(tb_decode_prefix(&bfs_codec_lz4, b, f->file.p + b->coff, out, sizeof(out),
					  true, &why),
			 0);
	assert_memory_equal(out, in, sizeof(out));
	/* a byte flipped far past the prefix still fails the checksum */
	f->file.p[b->coff + b->clen - 100] ^= 0x10;
	assert_int_equal(tb_decode_prefix(&bfs_codec_lz4, b, f->file.p + b->coff, out, sizeof(out),
					  true, &why),
			 -EILSEQ);
	/* a prefix longer than the block is refused, before writing a byte */
	assert_int_equal(tb_decode_prefix(&bfs_codec_lz4, b, f->file.p + b->coff, out, b->usize + 1,
					  false, &why),
			 -EBADMSG);
}

/* A corrupt stored block without checksums still cannot change length. */
static void test_decode_rejects_header_unlike_index(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	struct bfs_blk b;
	uint8_t *out = malloc(64 * KIB);
	const char *why = NULL;

	f->in = tb_text(10 * KIB, 9);
	tb_lz4_frame(&f->file, f->in, 10 * KIB, &p);
	assert_int_equal(scan(f), 0);
	b = f->idx.blk[0];
	b.clen -= 1; /* the file changed since the scan */
	assert_int_equal(tb_decode(&bfs_codec_lz4, &b, f->file.p + b.coff, out, false, &why),
			 -EBADMSG);
	assert_string_equal(why, "block header does not match the index");
	b = f->idx.blk[0];
	b.usize -= 1;
	assert_int_equal(tb_decode(&bfs_codec_lz4, &b, f->file.p + b.coff, out, false, &why),
			 -EBADMSG);
	assert_string_equal(why, "block decodes to a different length");
	b = f->idx.blk[0];
	b.usize += 1;
	assert_int_equal(tb_decode(&bfs_codec_lz4, &b, f->file.p + b.coff, out, false, &why),
			 -EBADMSG);
	assert_string_equal(why, "block decodes to a different length");
	free(out);
}

/* ---- measure ---- */

/* A raw block as scan would index it: size word then the LZ4 data. */
static struct bfs_blk raw_block(struct tb_buf *b, const uint8_t *data, size_t len, uint32_t bmax)
{
	struct bfs_blk blk = { .coff = 0, .clen = (uint32_t)(4 + len), .aux = bmax };

	b->len = 0;
	tb_put_le32(b, (uint32_t)len);
	tb_put(b, data, len);
	return blk;
}

static void test_measure_agrees_with_lz4(void **state)
{
	struct fx *f = *state;
	uint64_t seed = 11;
	char *c = malloc((size_t)LZ4_compressBound(64 * KIB));

	f->in = tb_text(64 * KIB, 10);
	for (int i = 0; i < 300; i++) {
		int n = 1 + (int)(tb_rng(&seed) % (64 * KIB));
		int accel = 1 + (int)(tb_rng(&seed) % 20);
		int clen =
			LZ4_compress_fast((const char *)f->in, c, n, LZ4_compressBound(n), accel);
		struct bfs_blk b = raw_block(&f->file, (const uint8_t *)c, (size_t)clen, 64 * KIB);
		const char *why = NULL;
		uint32_t usize = 0;

		assert_true(clen > 0);
		assert_int_equal(bfs_codec_lz4.measure(&b, f->file.p, &usize, &why), 0);
		assert_int_equal(usize, n);
	}
	free(c);
}

static void test_measure_stored_block(void **state)
{
	struct fx *f = *state;
	uint8_t data[100] = { 0 };
	struct bfs_blk b = raw_block(&f->file, data, sizeof(data), 64 * KIB);
	const char *why = NULL;
	uint32_t usize = 0;

	f->file.p[3] |= 0x80;
	assert_int_equal(bfs_codec_lz4.measure(&b, f->file.p, &usize, &why), 0);
	assert_int_equal(usize, 100);
}

static void expect_measure_fails(struct fx *f, const uint8_t *data, size_t len, uint32_t bmax,
				 const char *want)
{
	struct bfs_blk b = raw_block(&f->file, data, len, bmax);
	const char *why = NULL;
	uint32_t usize = 12345;

	assert_int_equal(bfs_codec_lz4.measure(&b, f->file.p, &usize, &why), -EBADMSG);
	assert_int_equal(usize, 12345);
	assert_string_equal(why, want);
}

static void test_measure_rejects_offset_zero(void **state)
{
	/* 4 literals, match at offset 0, then 5 literals */
	static const uint8_t d[] = { 0x40, 'a', 'b', 'c', 'd', 0, 0, 0x50, 1, 2, 3, 4, 5 };

	expect_measure_fails(*state, d, sizeof(d), 64 * KIB, "lz4 match offset out of range");
}

static void test_measure_rejects_offset_before_start(void **state)
{
	static const uint8_t d[] = { 0x40, 'a', 'b', 'c', 'd', 5, 0, 0x50, 1, 2, 3, 4, 5 };

	expect_measure_fails(*state, d, sizeof(d), 64 * KIB, "lz4 match offset out of range");
}

static void test_measure_rejects_truncated_sequences(void **state)
{
	struct fx *f = *state;
	static const uint8_t lit_overrun[] = { 0x50, 'a', 'b' };
	static const uint8_t lit_ext_cut[] = { 0xF0, 255 };
	static const uint8_t offset_cut[] = { 0x10, 'a', 1 };
	static const uint8_t match_ext_cut[] = { 0x1F, 'a', 1, 0, 255 };
	static const uint8_t ends_after_match[] = { 0x10, 'a', 1, 0 };

	expect_measure_fails(f, lit_overrun, sizeof(lit_overrun), 64 * KIB,
			     "lz4 block ends inside a sequence");
	expect_measure_fails(f, lit_ext_cut, sizeof(lit_ext_cut), 64 * KIB,
			     "lz4 block ends inside a sequence");
	expect_measure_fails(f, offset_cut, sizeof(offset_cut), 64 * KIB,
			     "lz4 block ends inside a sequence");
	expect_measure_fails(f, match_ext_cut, sizeof(match_ext_cut), 64 * KIB,
			     "lz4 block ends inside a sequence");
	expect_measure_fails(f, ends_after_match, sizeof(ends_after_match), 64 * KIB,
			     "lz4 block ends inside a sequence");
}

static void test_measure_rejects_output_above_block_max(void **state)
{
	struct fx *f = *state;
	/* 1 literal, then one match of 15 + 255 * 300 + 4 bytes (> 64 KiB) */
	uint8_t *d = malloc(400);
	size_t n = 0;

	d[n++] = 0x1F;
	d[n++] = 'x';
	d[n++] = 1;
	d[n++] = 0;
	for (int i = 0; i < 300; i++)
		d[n++] = 255;
	d[n++] = 0;
	d[n++] = 0x00; /* last sequence: no literals */
	expect_measure_fails(f, d, n, 64 * KIB, "lz4 block decodes past the block max size");
	free(d);
}

static void test_measure_rejects_block_of_nothing(void **state)
{
	static const uint8_t d[] = { 0x00 };

	expect_measure_fails(*state, d, sizeof(d), 64 * KIB, "lz4 block decodes to nothing");
}

/*
 * A block whose last match starts 9 bytes before its end breaks the
 * format's end-of-block rule; liblz4 decodes it only with room to spare,
 * and lz4 -d gives it that room. So do we.
 */
static void test_decode_block_that_bends_end_rules(void **state)
{
	struct fx *f = *state;
	static const uint8_t d[] = { 0x50, 'a',	 'b', 'c', 'd', 'e', 5,
				     0,	   0x50, 'f', 'g', 'h', 'i', 'j' };
	static const char want[] = "abcdeabcdfghij";
	struct bfs_blk b = raw_block(&f->file, d, sizeof(d), 64 * KIB);
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	char tight[14], out[64];
	const char *why = NULL;
	uint32_t usize = 0;
	struct tb_buf frame = { 0 };
	LZ4F_dctx *dc;
	size_t outlen = sizeof(out), inlen;

	assert_true(LZ4_decompress_safe((const char *)d, tight, sizeof(d), sizeof(tight)) < 0);
	assert_int_equal(bfs_codec_lz4.measure(&b, f->file.p, &usize, &why), 0);
	assert_int_equal(usize, 14);
	b.usize = usize;
	assert_int_equal(tb_decode(&bfs_codec_lz4, &b, f->file.p, (uint8_t *)tight, true, &why), 0);
	assert_memory_equal(tight, want, 14);

	/* and the frame decoder does accept it */
	tb_lz4_header(&frame, &p);
	tb_put_le32(&frame, sizeof(d));
	tb_put(&frame, d, sizeof(d));
	tb_put_le32(&frame, 0);
	assert_false(LZ4F_isError(LZ4F_createDecompressionContext(&dc, LZ4F_VERSION)));
	inlen = frame.len;
	assert_int_equal(LZ4F_decompress(dc, out, &outlen, frame.p, &inlen, NULL), 0);
	assert_int_equal(outlen, 14);
	assert_memory_equal(out, want, 14);
	LZ4F_freeDecompressionContext(dc);
	free(frame.p);
}

/* ---- hostile and damaged files ---- */

/* Every proper prefix of a file is damage at an exactly known place. */
static void test_truncated_at_every_length(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, true, false, true, 300);
	struct tb_buf full = { 0 };
	size_t blk_end, clen;

	f->in = tb_text(300, 12);
	tb_lz4_frame(&full, f->in, 300, &p);
	clen = 4 + bfs_le32(full.p + HLEN_CSIZE);
	blk_end = HLEN_CSIZE + clen;
	assert_int_equal(full.len, blk_end + 4 + 4); /* EndMark, content checksum */
	for (size_t len = 1; len <= full.len; len++) {
		f->file.len = 0;
		tb_put(&f->file, full.p, len);
		assert_int_equal(scan(f), 0);
		if (len < HLEN_CSIZE + clen) {
			/* header, block header or block data cut short */
			assert_broken_at(f, 1, len < HLEN_CSIZE ? 0 : HLEN_CSIZE,
					 len < 4 ? "not an lz4 frame" : "past end of file");
		} else if (len < blk_end + 4) {
			/* no EndMark: the block is kept, size unknown */
			assert_broken_at(f, 2, blk_end, "block header past end of file");
			assert_int_equal(f->idx.blk[0].flags, BFS_BLK_GUESS);
		} else if (len < full.len) {
			assert_broken_at(f, 2, blk_end + 4, "content checksum past end of file");
			assert_int_equal(f->idx.blk[0].flags, 0);
			assert_int_equal(f->idx.blk[0].usize, 300);
		} else {
			assert_false(f->idx.broken);
			assert_int_equal(f->idx.n, 1);
		}
	}
	free(full.p);
}

static void test_block_size_past_eof(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	uint32_t word;

	f->in = tb_text(100 * KIB, 13);
	tb_lz4_frame(&f->file, f->in, 100 * KIB, &p);
	/* second block claims more than is left (but no more than the block max) */
	word = bfs_le32(f->file.p + HLEN_PLAIN);
	word = (uint32_t)(f->file.len - (HLEN_PLAIN + 4 + word + 4) + 1);
	assert_true(word <= 64 * KIB);
	bfs_put_le32(f->file.p + HLEN_PLAIN + 4 + bfs_le32(f->file.p + HLEN_PLAIN), word);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 2, HLEN_PLAIN + f->idx.blk[0].clen, "block runs past end of file");
	assert_int_equal(f->idx.blk[0].flags, BFS_BLK_GUESS);
}

static void test_zero_size_stored_block(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	tb_lz4_header(&f->file, &p);
	tb_put_le32(&f->file, 0x80000000u);
	tb_put_le32(&f->file, 0);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 1, HLEN_PLAIN, "empty stored block");
}

static void test_last_block_of_nothing(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	tb_lz4_header(&f->file, &p);
	tb_put_le32(&f->file, 1);
	tb_put(&f->file, "", 1); /* token 0: no literals, no match */
	tb_put_le32(&f->file, 0);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 1, HLEN_PLAIN, "lz4 block decodes to nothing");
}

static void test_wrong_magic(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	f->in = tb_text(1000, 14);
	tb_lz4_frame(&f->file, f->in, 1000, &p);
	f->file.p[0] ^= 0xFF;
	assert_false(bfs_codec_lz4.probe(f->file.p, f->file.len));
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 1, 0, "not an lz4 frame at offset 0");
}

static void test_wrong_header_checksum(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, true, false, false, 1000);

	f->in = tb_text(1000, 15);
	tb_lz4_frame(&f->file, f->in, 1000, &p);
	tb_lz4_frame(&f->file, f->in, 1000, &p);
	/* the same frame twice: damage the second one's HC */
	f->file.p[f->file.len / 2 + HLEN_CSIZE - 1] ^= 0x10;
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 2, f->file.len / 2, "frame header checksum mismatch");
	assert_int_equal(f->idx.blk[0].usize, 1000);
}

static void test_huge_size_word(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max4MB, false, false, false, 0);

	tb_lz4_header(&f->file, &p);
	tb_put_le32(&f->file, 0x7FFFFFFFu);
	tb_put_le32(&f->file, 0);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 1, HLEN_PLAIN, "block size above the frame's block max");
	/* one bigger than the block max is refused too */
	f->file.len = 0;
	tb_lz4_header(&f->file, &p);
	tb_put_le32(&f->file, 4 * MIB + 1);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 1, HLEN_PLAIN, "block size above the frame's block max");
}

static void test_reserved_bits_set(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	tb_lz4_header(&f->file, &p);
	tb_put_le32(&f->file, 0);
	f->file.p[OFF_FLG] |= 0x02;
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 1, 0, "reserved FLG bit set");
	f->file.p[OFF_FLG] &= (uint8_t)~0x02;
	f->file.p[OFF_BD] |= 0x08;
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 1, 0, "reserved BD bits set");
}

/* Linked frames are served (test_codec_lz4_linked.c has the rest). */
static void test_linked_blocks_first_frame_is_served(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	p.frameInfo.blockMode = LZ4F_blockLinked;
	f->in = tb_text(100 * KIB, 16);
	tb_lz4_frame(&f->file, f->in, 100 * KIB, &p);
	assert_true(bfs_codec_lz4.probe(f->file.p, f->file.len));
	assert_int_equal(scan(f), 0);
	assert_false(f->idx.broken);
	assert_int_equal(f->idx.usize, 100 * KIB);
}

static void test_linked_blocks_later_frame_is_served(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	uint8_t *out;

	f->in = tb_text(100 * KIB, 17);
	tb_lz4_frame(&f->file, f->in, 100 * KIB, &p);
	p.frameInfo.blockMode = LZ4F_blockLinked;
	tb_lz4_frame(&f->file, f->in, 100 * KIB, &p);
	assert_int_equal(scan(f), 0);
	assert_false(f->idx.broken);
	settle_all(f);
	assert_int_equal(f->idx.usize, 200 * KIB);
	out = malloc(200 * KIB);
	assert_non_null(out);
	for (size_t k = 0; k < f->idx.n; k++) {
		const struct bfs_blk *b = &f->idx.blk[k];
		const char *why = NULL;

		assert_int_equal(bfs_codec_lz4.decode(&f->idx, k, f->file.p + b->coff,
						      out + b->uoff, f->idx.blk[k].usize, true,
						      &why),
				 0);
	}
	assert_memory_equal(out, f->in, 100 * KIB);
	assert_memory_equal(out + 100 * KIB, f->in, 100 * KIB);
	free(out);
}

static void test_dict_id_later_frame_is_damage(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	size_t first;

	f->in = tb_text(1000, 18);
	tb_lz4_frame(&f->file, f->in, 1000, &p);
	first = f->file.len;
	p.frameInfo.dictID = 99;
	tb_lz4_header(&f->file, &p);
	tb_put_le32(&f->file, 0);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 2, first, "frame needs a dictionary");
}

/* Legacy frames are served (test_codec_lz4_linked.c); a block of size 0 is damage. */
static void test_legacy_magic(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	size_t first;

	tb_put_le32(&f->file, 0x184C2102u);
	tb_put_le32(&f->file, 0);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 1, 4, "empty legacy block");

	/* after a good frame too */
	f->file.len = 0;
	f->in = tb_text(1000, 19);
	tb_lz4_frame(&f->file, f->in, 1000, &p);
	first = f->file.len;
	tb_put_le32(&f->file, 0x184C2102u);
	tb_put_le32(&f->file, 0);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 2, first + 4, "empty legacy block");
}

static void test_trailing_junk(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, true, 0);
	size_t end;

	f->in = tb_text(70 * KIB, 20);
	tb_lz4_frame(&f->file, f->in, 70 * KIB, &p);
	end = f->file.len;
	tb_put(&f->file, "\0\0junk", 6);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 3, end, "not an lz4 frame");
	/* the blocks before the junk still read */
	settle_all(f);
	assert_int_equal(f->idx.blk[2].uoff, 70 * KIB);
	assert_blocks_decode_to(f, 2, f->in, 70 * KIB);
}

static void test_trailing_partial_magic(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	size_t end;

	f->in = tb_text(100, 21);
	tb_lz4_frame(&f->file, f->in, 100, &p);
	end = f->file.len;
	tb_put(&f->file, "\x04\x22", 2);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 2, end, "not an lz4 frame");
}

static void test_skippable_frame_past_eof(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	size_t end;

	f->in = tb_text(100, 22);
	tb_lz4_frame(&f->file, f->in, 100, &p);
	end = f->file.len;
	tb_put_le32(&f->file, 0x184D2A53u);
	tb_put_le32(&f->file, 0xFFFFFFF0u);
	tb_put(&f->file, "abc", 3);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 2, end, "skippable frame runs past end of file");
	f->file.len = end + 6;
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 2, end, "skippable frame header past end of file");
}

static void test_content_size_mismatch(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, true, false, false, 1000);
	struct tb_buf lie = { 0 };

	f->in = tb_text(1000, 23);
	tb_lz4_frame(&f->file, f->in, 1000, &p);
	/* LZ4F refuses to write a lie: splice in a header that says 999 */
	p.frameInfo.contentSize = 999;
	assert_int_equal(tb_lz4_header(&lie, &p), HLEN_CSIZE);
	memcpy(f->file.p, lie.p, HLEN_CSIZE);
	free(lie.p);
	assert_int_equal(scan(f), 0);
	assert_broken_at(f, 2, f->file.len, "its header says 999");
	assert_int_equal(f->idx.blk[0].usize, 1000);
}

/*
 * Block @k failed to measure: it keeps its guess (the block max) and is
 * poison; every other block is exact and in place, and decodes.
 */
static void assert_poisoned(struct fx *f, size_t k, const char *why)
{
	uint8_t *out = malloc(f->idx.max_usize);
	const char *w = NULL;

	assert_non_null(out);
	assert_false(f->idx.broken);
	assert_non_null(strstr(f->idx.why, why));
	assert_int_equal(atomic_load(&f->idx.nexact), f->idx.n);
	for (size_t i = 0; i < f->idx.n; i++) {
		const struct bfs_blk *b = &f->idx.blk[i];

		assert_int_equal(b->uoff, i * 64 * KIB);
		if (i == k) {
			assert_int_equal(b->flags & (BFS_BLK_BAD | BFS_BLK_GUESS), BFS_BLK_BAD);
			continue;
		}
		assert_int_equal(b->flags & (BFS_BLK_BAD | BFS_BLK_GUESS), 0);
		assert_int_equal(tb_decode(&bfs_codec_lz4, b, f->file.p + b->coff, out, true, &w),
				 0);
		assert_memory_equal(out, f->in + b->uoff, b->usize);
	}
	free(out);
}

static void test_corrupt_guess_poisoned_by_settle(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	const struct bfs_blk *b;

	f->in = tb_text(200 * KIB, 24);
	tb_lz4_frame(&f->file, f->in, 200 * KIB, &p);
	assert_int_equal(scan(f), 0);
	b = &f->idx.blk[1];
	/* a literal run longer than the block: measure must refuse it */
	f->file.p[b->coff + 4] = 0xF0;
	memset(f->file.p + b->coff + 5, 0xFF, b->clen - 5);
	settle_all(f);
	assert_poisoned(f, 1, "lz4 block ends inside a sequence");
}

/*
 * A guessed block that still parses but fails its checksum must not be
 * trusted to place the blocks after it, whatever -o verify says.
 */
static void test_settle_checks_checksum_of_guess(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, false, 0);
	const struct bfs_blk *b;

	f->in = tb_text(200 * KIB, 25);
	tb_lz4_frame(&f->file, f->in, 200 * KIB, &p);
	assert_int_equal(scan(f), 0);
	b = &f->idx.blk[1];
	assert_true(b->flags & BFS_BLK_GUESS);
	f->file.p[b->coff + b->clen - 1] ^= 0x01; /* the checksum, not the data */
	settle_all(f);
	assert_poisoned(f, 1, "block checksum mismatch");
}

static ssize_t failing_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	(void)io;
	(void)buf;
	(void)len;
	(void)off;
	return -EIO;
}

static void test_io_error_is_returned(void **state)
{
	struct fx *f = *state;
	static const struct bfs_io_ops failing = { .name = "failing", .read = failing_read };
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	f->in = tb_text(100, 25);
	tb_lz4_frame(&f->file, f->in, 100, &p);
	bfs_io_init_mem(&f->io, f->file.p, f->file.len);
	f->io.ops = &failing;
	bfs_index_init(&f->idx, f->file.len);
	f->have_idx = true;
	assert_int_equal(bfs_codec_lz4.scan(&f->io, NULL, &f->idx), -EIO);
}

/* ---- seek table (seektable.h) ---- */

/* Walk the file as it is, then append a table made from the settled index. */
static void append_table(struct fx *f, uint32_t block_size)
{
	struct bfs_seektable_writer w = { 0 };
	const uint8_t *tab;
	size_t len;

	assert_int_equal(scan(f), 0);
	settle_all(f);
	for (size_t i = 0; i < f->idx.n; i++) {
		const struct bfs_blk *b = &f->idx.blk[i];
		struct bfs_seektable_entry e = { .coff = b->coff,
						 .clen = b->clen,
						 .usize = b->usize,
						 .bmax = b->aux,
						 .csum = b->flags & BFS_BLK_CSUM };

		assert_int_equal(bfs_seektable_writer_add(&w, &e), 0);
	}
	assert_int_equal(bfs_seektable_writer_finish(&w, f->file.len, block_size, &tab, &len), 0);
	tb_put(&f->file, tab, len);
	bfs_seektable_writer_release(&w);
}

static int st_reads;

static ssize_t st_counting_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	st_reads++;
	return bfs_io_mem_ops.read(io, buf, len, off);
}

static int counted_scan(struct fx *f)
{
	static const struct bfs_io_ops counting = { .name = "counting", .read = st_counting_read };

	if (f->have_idx)
		bfs_index_destroy(&f->idx);
	bfs_io_init_mem(&f->io, f->file.p, f->file.len);
	f->io.ops = &counting;
	bfs_index_init(&f->idx, f->file.len);
	f->have_idx = true;
	st_reads = 0;
	return bfs_codec_lz4.scan(&f->io, NULL, &f->idx);
}

/*
 * The table builds an exact index: no guesses, same blocks. Three reads:
 * the table, the frame header before the first block and the EndMark
 * after the last (a table may not leave blocks out).
 */
static void test_seek_table_is_used(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, true, 0);
	struct bfs_blk walked[8];
	size_t n;

	f->in = tb_text(300 * KIB + 5, 40);
	f->n = 300 * KIB + 5;
	tb_lz4_frame(&f->file, f->in, f->n, &p);
	append_table(f, 64 * KIB);
	n = f->idx.n;
	assert_int_equal(n, 5);
	memcpy(walked, f->idx.blk, n * sizeof(walked[0]));

	assert_int_equal(counted_scan(f), 0);
	assert_int_equal(st_reads, 3);
	assert_int_equal(f->idx.n, n);
	assert_int_equal(atomic_load(&f->idx.nexact), n);
	assert_int_equal(f->idx.block_size, 64 * KIB);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(f->idx.blk[i].coff, walked[i].coff);
		assert_int_equal(f->idx.blk[i].clen, walked[i].clen);
		assert_int_equal(f->idx.blk[i].usize, walked[i].usize);
		assert_int_equal(f->idx.blk[i].flags, BFS_BLK_CSUM);
		assert_int_equal(f->idx.blk[i].aux, 64 * KIB);
	}
	assert_decodes_to(f, f->in, f->n);
}

/* Short blocks in the middle (flushes) need no settling with a table. */
static void test_seek_table_exact_for_short_middle_blocks(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	f->in = tb_text(200 * KIB, 41);
	f->n = 200 * KIB;
	tb_lz4_frame_chunked(&f->file, f->in, f->n, &p, 10 * KIB);
	append_table(f, 0);
	assert_int_equal(counted_scan(f), 0);
	assert_int_equal(f->idx.n, 20);
	assert_int_equal(atomic_load(&f->idx.nexact), 20);
	assert_int_equal(f->idx.usize, f->n);
	assert_int_equal(f->idx.block_size, 64 * KIB); /* unknown: the block max */
	assert_decodes_to(f, f->in, f->n);
}

static void test_seek_table_over_frames_and_skippables(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p1 = tb_lz4_prefs(LZ4F_max64KB, true, true, false, 0);
	LZ4F_preferences_t p2 = tb_lz4_prefs(LZ4F_max256KB, false, false, true, 0);

	f->in = tb_text(400 * KIB, 42);
	f->n = 400 * KIB;
	tb_lz4_skippable(&f->file, 3, 10);
	tb_lz4_frame(&f->file, f->in, 100 * KIB, &p1);
	tb_lz4_skippable(&f->file, 0, 100);
	tb_lz4_frame(&f->file, f->in + 100 * KIB, 300 * KIB, &p2);
	append_table(f, 0);
	assert_int_equal(counted_scan(f), 0);
	/* the table; skippable + header; EndMark + skippable + header; EndMark */
	assert_int_equal(st_reads, 7);
	assert_int_equal(f->idx.n, 4);
	assert_int_equal(f->idx.blk[0].flags, BFS_BLK_CSUM);
	assert_int_equal(f->idx.blk[3].flags, 0);
	assert_int_equal(f->idx.blk[3].aux, 256 * KIB);
	assert_int_equal(f->idx.block_size, 256 * KIB);
	/* the end of the first frame places the second: measured before use */
	assert_true(f->idx.blk[1].flags & BFS_BLK_GUESS);
	assert_false(f->idx.blk[2].flags & BFS_BLK_GUESS);
	settle_all(f);
	assert_false(f->idx.blk[1].flags & BFS_BLK_BAD);
	assert_decodes_to(f, f->in, f->n);
}

static void test_seek_table_of_empty_frame(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	tb_lz4_frame(&f->file, NULL, 0, &p);
	append_table(f, 64 * KIB);
	assert_int_equal(counted_scan(f), 0);
	assert_int_equal(st_reads, 3); /* the table, the header, the EndMark */
	assert_int_equal(f->idx.n, 0);
	assert_int_equal(f->idx.usize, 0);
	assert_false(f->idx.broken);
}

/* cat packed.lz4 other.lz4: the table is not at the end; walk. */
static void test_seek_table_followed_by_a_frame_is_walked(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	f->in = tb_text(200 * KIB, 43);
	f->n = 200 * KIB;
	tb_lz4_frame(&f->file, f->in, 100 * KIB, &p);
	append_table(f, 64 * KIB);
	tb_lz4_frame(&f->file, f->in + 100 * KIB, 100 * KIB, &p);
	assert_int_equal(scan(f), 0);
	settle_all(f);
	assert_decodes_to(f, f->in, f->n);
}

/* cat other.lz4 packed.lz4: the table's offset no longer matches; walk. */
static void test_seek_table_moved_by_concatenation_is_walked(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	struct tb_buf both = { 0 };

	f->in = tb_text(200 * KIB, 44);
	f->n = 200 * KIB;
	tb_lz4_frame(&f->file, f->in + 100 * KIB, 100 * KIB, &p);
	append_table(f, 64 * KIB);
	tb_lz4_frame(&both, f->in, 100 * KIB, &p);
	tb_put(&both, f->file.p, f->file.len);
	free(f->file.p);
	f->file = both;
	assert_int_equal(scan(f), 0);
	assert_int_equal(f->idx.n, 4);
	settle_all(f);
	assert_decodes_to(f, f->in, f->n);
}

static void test_damaged_seek_table_is_walked(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);

	f->in = tb_text(200 * KIB, 45);
	f->n = 200 * KIB;
	tb_lz4_frame(&f->file, f->in, f->n, &p);
	append_table(f, 64 * KIB);
	f->file.p[f->file.len - BFS_SEEK_FOOTER_LEN - 3] ^= 0x40; /* an entry byte */
	assert_int_equal(counted_scan(f), 0);
	assert_true(st_reads > 2);
	assert_true(f->idx.blk[1].flags & BFS_BLK_GUESS);
	settle_all(f);
	assert_decodes_to(f, f->in, f->n);
}

/* Edit entry @i of the table at the end of @f and fix the checksum: a lie. */
static uint8_t *lie_entry(struct fx *f, size_t nent, size_t i)
{
	return f->file.p + f->file.len - BFS_SEEK_FOOTER_LEN - (nent - i) * BFS_SEEK_ENTRY_LEN;
}

static void reseal(struct fx *f, size_t nent)
{
	uint8_t *tab = f->file.p + f->file.len - bfs_seektable_size(nent);

	bfs_put_le32(f->file.p + f->file.len - 8,
		     bfs_xxh32(tab + BFS_SEEK_HDR_LEN, (size_t)bfs_seektable_size(nent) - 16, 0));
}

static void decode_expect(struct fx *f, size_t k, int want)
{
	const struct bfs_blk *b = &f->idx.blk[k];
	uint8_t *dst = malloc(b->usize);
	const char *why = NULL;

	assert_non_null(dst);
	assert_int_equal(tb_decode(&bfs_codec_lz4, b, f->file.p + b->coff, dst, true, &why), want);
	if (want)
		assert_non_null(why);
	free(dst);
}

/* A table whose sizes lie passes the table checks; decode catches it. */
static void test_lying_usize_caught_by_decode(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, false, 0);
	uint8_t *e;

	f->in = tb_text(200 * KIB, 46);
	f->n = 200 * KIB;
	tb_lz4_frame(&f->file, f->in, f->n, &p);
	append_table(f, 64 * KIB);
	/* block 1 one byte short, block 3 (the last, 8 KiB) one byte long */
	e = lie_entry(f, 4, 1);
	bfs_put_le32(e + 12, bfs_le32(e + 12) - 1);
	e = lie_entry(f, 4, 3);
	bfs_put_le32(e + 12, bfs_le32(e + 12) + 1);
	reseal(f, 4);
	assert_int_equal(scan(f), 0);
	assert_int_equal(f->idx.n, 4);
	assert_int_equal(f->idx.blk[1].usize, 64 * KIB - 1);
	decode_expect(f, 0, 0);
	decode_expect(f, 1, -EBADMSG);
	decode_expect(f, 2, 0);
	decode_expect(f, 3, -EBADMSG);
}

static void test_lying_usize_of_stored_block_caught_by_decode(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	uint8_t *e;

	f->in = tb_random(100 * KIB, 47);
	f->n = 100 * KIB;
	tb_lz4_frame(&f->file, f->in, f->n, &p);
	append_table(f, 64 * KIB);
	e = lie_entry(f, 2, 1);
	bfs_put_le32(e + 12, bfs_le32(e + 12) - 1);
	e = f->file.p + f->file.len - BFS_SEEK_FOOTER_LEN + 8; /* the total, to match */
	bfs_put_le64(e, bfs_le64(e) - 1);
	reseal(f, 2);
	assert_int_equal(scan(f), 0);
	decode_expect(f, 0, 0);
	decode_expect(f, 1, -EBADMSG);
}

/*
 * An offset into the middle of a block, or a wrong clen, leaves bytes
 * between two entries that are no frame boundary: the table is refused
 * and the blocks walked (the lies keep the table's own order and gap rules).
 */
static void test_lying_offset_and_clen_refuse_the_table(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	uint8_t *e;

	f->in = tb_text(200 * KIB, 48);
	f->n = 200 * KIB;
	tb_lz4_frame(&f->file, f->in, f->n, &p);
	append_table(f, 64 * KIB);
	e = lie_entry(f, 4, 1);
	bfs_put_le64(e, bfs_le64(e) + 16);
	bfs_put_le32(e + 8, bfs_le32(e + 8) - 16);
	e = lie_entry(f, 4, 3);
	bfs_put_le32(e + 8, bfs_le32(e + 8) - 1);
	reseal(f, 4);
	assert_int_equal(scan(f), 0);
	assert_true(f->idx.blk[1].flags & BFS_BLK_GUESS); /* walked */
	settle_all(f);
	assert_decodes_to(f, f->in, f->n);
}

/* Entries claiming checksums the frame header does not announce: refused. */
static void test_lying_checksum_flag_refuses_the_table(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, false, false, 0);
	uint8_t *e;

	f->in = tb_text(100 * KIB, 49);
	f->n = 100 * KIB;
	tb_lz4_frame(&f->file, f->in, f->n, &p);
	append_table(f, 64 * KIB);
	for (size_t i = 0; i < 2; i++) {
		e = lie_entry(f, 2, i);
		bfs_put_le32(e + 12, bfs_le32(e + 12) | 0x80000000u);
	}
	reseal(f, 2);
	assert_int_equal(scan(f), 0);
	assert_int_equal(f->idx.blk[0].flags, BFS_BLK_GUESS); /* walked: no checksum */
	settle_all(f);
	assert_decodes_to(f, f->in, f->n);
}

/*
 * A table that leaves a block out, its total and checksum redone, would
 * make the block's bytes vanish from the file: refused, walked. Likewise
 * without the first block, without the last, or with no entry at all.
 */
static void test_table_leaving_blocks_out_is_walked(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, false, 0);
	static const size_t drop[] = { 0, 2, 3, SIZE_MAX };

	f->in = tb_text(200 * KIB, 50);
	f->n = 200 * KIB;
	for (size_t d = 0; d < BFS_ARRAY_SIZE(drop); d++) {
		struct bfs_seektable_writer w = { 0 };
		const uint8_t *tab;
		size_t len, n;

		f->file.len = 0;
		tb_lz4_frame(&f->file, f->in, f->n, &p);
		assert_int_equal(scan(f), 0);
		settle_all(f);
		n = f->idx.n;
		assert_int_equal(n, 4);
		for (size_t i = 0; i < n; i++) {
			const struct bfs_blk *b = &f->idx.blk[i];
			struct bfs_seektable_entry e = { .coff = b->coff,
							 .clen = b->clen,
							 .usize = b->usize,
							 .bmax = b->aux,
							 .csum = b->flags & BFS_BLK_CSUM };

			if (i != drop[d] && drop[d] != SIZE_MAX)
				assert_int_equal(bfs_seektable_writer_add(&w, &e), 0);
		}
		assert_int_equal(bfs_seektable_writer_finish(&w, f->file.len, 64 * KIB, &tab, &len),
				 0);
		tb_put(&f->file, tab, len);
		bfs_seektable_writer_release(&w);
		assert_int_equal(scan(f), 0);
		assert_int_equal(f->idx.n, n);
		assert_true(f->idx.blk[0].flags & BFS_BLK_GUESS); /* walked */
		settle_all(f);
		assert_decodes_to(f, f->in, f->n);
	}
}

/*
 * A size the table states but the block does not have is measured before
 * a read relies on the blocks after it: they stay where their data puts
 * them, and only the lying block is poisoned.
 */
static void test_lying_usize_does_not_move_later_blocks(void **state)
{
	struct fx *f = *state;
	LZ4F_preferences_t p = tb_lz4_prefs(LZ4F_max64KB, false, true, false, 0);
	uint8_t *e;

	f->in = tb_text(300 * KIB, 51);
	f->n = 300 * KIB;
	tb_lz4_frame(&f->file, f->in, f->n, &p);
	append_table(f, 64 * KIB);
	e = lie_entry(f, 5, 1);
	bfs_put_le32(e + 12, bfs_le32(e + 12) - 100);
	e = f->file.p + f->file.len - BFS_SEEK_FOOTER_LEN + 8; /* the total, to match */
	bfs_put_le64(e, bfs_le64(e) - 100);
	reseal(f, 5);
	assert_int_equal(scan(f), 0);
	assert_false(f->idx.blk[0].flags & BFS_BLK_GUESS); /* the table is used */
	assert_int_equal(f->idx.blk[1].flags & (BFS_BLK_GUESS | BFS_BLK_CLAIMED),
			 BFS_BLK_GUESS | BFS_BLK_CLAIMED);
	assert_int_equal(atomic_load(&f->idx.nexact), 1);
	settle_all(f);
	assert_true(f->idx.blk[1].flags & BFS_BLK_BAD);
	assert_int_equal(f->idx.blk[1].usize, 64 * KIB);
	assert_int_equal(f->idx.usize, f->n - 100); /* shown size: damaged, not resized */
	assert_true(f->idx.blk[f->idx.n - 1].flags & BFS_BLK_BAD);
	assert_non_null(strstr(f->idx.why, "the index says"));
	for (size_t k = 2; k < f->idx.n; k++)
		assert_int_equal(f->idx.blk[k].uoff, k * 64 * KIB);
	decode_expect(f, 2, 0);
	decode_expect(f, 4, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_probe_default_frame),
		T(test_probe_short_prefixes),
		T(test_probe_claims_linked_blocks),
		T(test_probe_rejects_dict_id),
		T(test_probe_claims_legacy_magic),
		T(test_probe_rejects_bad_flg_bd),
		T(test_probe_rejects_other_data),
		T(test_sniff_sees_past_skippable_frames),
		T(test_sniff_skippable_then_not_lz4),
		T(test_sniff_skippable_only),
		T(test_sniff_skippable_past_eof),
		T(test_roundtrip_block_64k),
		T(test_roundtrip_block_256k),
		T(test_roundtrip_block_1m),
		T(test_roundtrip_block_4m),
		T(test_scan_guesses_middle_blocks_only),
		T(test_content_size_single_block_is_exact),
		T(test_content_size_many_blocks),
		T(test_block_checksums),
		T(test_content_checksum_is_skipped),
		T(test_all_flags_together),
		T(test_concatenated_frames),
		T(test_skippable_frames_start_middle_end),
		T(test_stored_blocks_are_exact),
		T(test_empty_input),
		T(test_empty_file),
		T(test_one_byte),
		T(test_exact_multiple_of_block_size),
		T(test_short_middle_blocks_settle),
		T(test_short_middle_blocks_measured),
		T(test_content_size_proves_full_blocks),
		T(test_content_size_with_short_blocks),
		T(test_content_size_lie_with_short_blocks),
		T(test_verify_catches_flipped_checksum),
		T(test_decode_prefix_matches_decode),
		T(test_decode_prefix_stored_and_checked),
		T(test_verify_catches_flipped_data_byte),
		T(test_decode_rejects_header_unlike_index),
		T(test_measure_agrees_with_lz4),
		T(test_measure_stored_block),
		T(test_measure_rejects_offset_zero),
		T(test_measure_rejects_offset_before_start),
		T(test_measure_rejects_truncated_sequences),
		T(test_measure_rejects_output_above_block_max),
		T(test_measure_rejects_block_of_nothing),
		T(test_decode_block_that_bends_end_rules),
		T(test_truncated_at_every_length),
		T(test_block_size_past_eof),
		T(test_zero_size_stored_block),
		T(test_last_block_of_nothing),
		T(test_wrong_magic),
		T(test_wrong_header_checksum),
		T(test_huge_size_word),
		T(test_reserved_bits_set),
		T(test_linked_blocks_first_frame_is_served),
		T(test_linked_blocks_later_frame_is_served),
		T(test_dict_id_later_frame_is_damage),
		T(test_legacy_magic),
		T(test_trailing_junk),
		T(test_trailing_partial_magic),
		T(test_skippable_frame_past_eof),
		T(test_content_size_mismatch),
		T(test_corrupt_guess_poisoned_by_settle),
		T(test_settle_checks_checksum_of_guess),
		T(test_io_error_is_returned),
		T(test_seek_table_is_used),
		T(test_seek_table_exact_for_short_middle_blocks),
		T(test_seek_table_over_frames_and_skippables),
		T(test_seek_table_of_empty_frame),
		T(test_seek_table_followed_by_a_frame_is_walked),
		T(test_seek_table_moved_by_concatenation_is_walked),
		T(test_damaged_seek_table_is_walked),
		T(test_lying_usize_caught_by_decode),
		T(test_lying_usize_of_stored_block_caught_by_decode),
		T(test_lying_offset_and_clen_refuse_the_table),
		T(test_lying_checksum_flag_refuses_the_table),
		T(test_table_leaving_blocks_out_is_walked),
		T(test_lying_usize_does_not_move_later_blocks),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
