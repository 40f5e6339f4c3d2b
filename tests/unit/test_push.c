// SPDX-License-Identifier: MIT
/*
 * Unit tests of the pure parts of pushing ahead: cutting decoded blocks
 * into the page-aligned, one-buffer slices notify_store needs (block edges
 * that fall inside a page, blocks smaller than a page, the partial last
 * page at the end of the file, the tripwire page left out), and the
 * window's arithmetic (when a batch is queued, where it starts, where its
 * tripwire lies, what a jump and a full queue do).
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

#include "blockfs/push.h"
#include "blockfs/stream.h"

#define P      BFS_PAGE
#define MAXSEG 64

/* A decoded range: segments cut from one source buffer, copied apart. */
struct range {
	uint8_t *src; /* the file's bytes from at[0] */
	uint64_t at[MAXSEG + 1];
	uint8_t *buf[MAXSEG];
	size_t n;
	/* what the emits did */
	uint8_t *seen; /* times each byte was emitted */
	uint8_t *bounce;
	size_t emits, fail_at; /* fail the emit numbered fail_at (1-based), 0: never */
	int bad;
};

static struct range *range_new(uint64_t from, const size_t *len, size_t n)
{
	struct range *r = calloc(1, sizeof(*r));
	size_t total = 0;

	assert_non_null(r);
	assert_true(n <= MAXSEG);
	for (size_t i = 0; i < n; i++)
		total += len[i];
	r->src = malloc(total);
	r->seen = calloc(total, 1);
	r->bounce = malloc(P);
	assert_non_null(r->src);
	assert_non_null(r->seen);
	assert_non_null(r->bounce);
	for (size_t i = 0; i < total; i++)
		r->src[i] = (uint8_t)(i * 131 + i / 977);
	r->n = n;
	r->at[0] = from;
	for (size_t i = 0; i < n; i++) {
		r->at[i + 1] = r->at[i] + len[i];
		r->buf[i] = malloc(len[i]);
		assert_non_null(r->buf[i]);
		memcpy(r->buf[i], r->src + (r->at[i] - from), len[i]);
	}
	return r;
}

static void range_free(struct range *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->buf[i]);
	free(r->src);
	free(r->seen);
	free(r->bounce);
	free(r);
}

/* The kernel's rules for one notify_store, and the bytes against the source. */
static int emit(void *ctx, uint64_t off, const uint8_t *p, size_t len)
{
	struct range *r = ctx;
	uint64_t from = r->at[0], end = r->at[r->n];
	bool in_one = p == r->bounce && len <= P;

	r->emits++;
	if (r->fail_at && r->emits == r->fail_at)
		return -ENOENT;
	for (size_t i = 0; !in_one && i < r->n; i++)
		in_one = p >= r->buf[i] && p + len <= r->buf[i] + (r->at[i + 1] - r->at[i]);
	if (off % P || len == 0 || off < from || off + len > end || (len % P && off + len != end) ||
	    !in_one || memcmp(p, r->src + (off - from), len)) {
		r->bad++;
		return 0;
	}
	for (size_t k = 0; k < len; k++)
		r->seen[off - from + k]++;
	return 0;
}

/* Every byte emitted exactly once, but the page at @skip never. */
static void assert_covered(struct range *r, ssize_t got, uint64_t skip)
{
	uint64_t from = r->at[0], end = r->at[r->n], want = 0;

	assert_int_equal(r->bad, 0);
	for (uint64_t o = from; o < end; o++) {
		bool skipped = skip != UINT64_MAX && o >= skip && o < skip + P;

		assert_int_equal(r->seen[o - from], skipped ? 0 : 1);
		want += !skipped;
	}
	assert_int_equal(got, (ssize_t)want);
}

static ssize_t slice(struct range *r, uint64_t skip)
{
	return bfs_push_slice(r->at, r->buf, r->n, skip, skip == UINT64_MAX ? skip : skip + P,
			      r->bounce, emit, r);
}

/* Page-multiple blocks (lz4 -B4): one slice per block, no bounce. */
static void test_slice_aligned_blocks(void **state)
{
	static const size_t len[] = { 65536, 65536, 65536 };
	struct range *r = range_new(5 * 65536, len, 3);

	(void)state;
	assert_covered(r, slice(r, UINT64_MAX), UINT64_MAX);
	assert_int_equal(r->emits, 3);
	range_free(r);
}

/* BGZF's 65280-byte blocks: every edge falls inside a page. */
static void test_slice_block_edges_inside_pages(void **state)
{
	static const size_t len[] = { 65280 - 4096 * 3, 65280, 65280, 65280, 66560 };
	struct range *r = range_new(1 << 20, len, 5);

	(void)state;
	assert_int_equal((r->at[5]) % P, 0);
	assert_covered(r, slice(r, UINT64_MAX), UINT64_MAX);
	assert_true(r->emits <= 2 * 5); /* a run and a bounce page per block */
	range_free(r);
}

/* Blocks smaller than a page (a writer that flushes): pages gather many. */
static void test_slice_tiny_blocks(void **state)
{
	size_t len[40];
	struct range *r;

	(void)state;
	for (size_t i = 0; i < 40; i++)
		len[i] = 100 + i * 37;
	len[39] += P - (100 * 40 + 37 * 39 * 40 / 2) % P; /* whole pages in all */
	r = range_new(0, len, 40);
	assert_covered(r, slice(r, UINT64_MAX), UINT64_MAX);
	range_free(r);
}

/* The end of the file: the last slice ends in a partial page, in a block or across two. */
static void test_slice_partial_last_page(void **state)
{
	static const size_t in_one[] = { 65536, 10000 };
	static const size_t across[] = { 65536 + 3000, 2000 };
	struct range *r = range_new(0, in_one, 2);

	(void)state;
	assert_covered(r, slice(r, UINT64_MAX), UINT64_MAX);
	range_free(r);
	r = range_new(4096, across, 2);
	assert_covered(r, slice(r, UINT64_MAX), UINT64_MAX);
	range_free(r);
}

/* The tripwire: left out wherever it falls, all else pushed. */
static void test_slice_skips_tripwire(void **state)
{
	static const size_t len[] = { 65280, 65280, 65280, 65280 + 1024 };
	uint64_t from = 1 << 20,
		 skips[] = { 1 << 20, (1 << 20) + 16 * P, (1 << 20) + 15 * P, (1 << 20) + 63 * P };

	(void)state;
	for (size_t i = 0; i < BFS_ARRAY_SIZE(skips); i++) {
		struct range *r = range_new(from, len, 4);

		assert_covered(r, slice(r, skips[i]), skips[i]);
		range_free(r);
	}
}

/* A tripwire's page across two buffers, kept; READs inside it get its bytes, others nothing. */
static void test_window_keeps_tripwire(void **state)
{
	static const size_t len[] = { 65280, 65280, 65280 };
	uint64_t from = 1 << 20, trip = from + 15 * P; /* 61440: the first buffer ends inside it */
	struct range *r = range_new(from, len, 3);
	struct bfs_push_window *w = bfs_push_window_new();
	uint8_t got[P];

	(void)state;
	assert_non_null(w);
	assert_false(bfs_push_window_trip(w, trip, P, got)); /* nothing kept yet */
	/* a tripwire outside the range is not kept */
	bfs_push_window_keep(w, r->at, r->buf, r->n, r->at[r->n], r->at[r->n] + P);
	assert_false(bfs_push_window_trip(w, r->at[r->n], 1, got));
	bfs_push_window_keep(w, r->at, r->buf, r->n, trip, trip + P);
	assert_true(bfs_push_window_trip(w, trip, P, got));
	assert_memory_equal(got, r->src + (trip - from), P);
	assert_true(bfs_push_window_trip(w, trip + 100, 200, got));
	assert_memory_equal(got, r->src + (trip + 100 - from), 200);
	assert_false(bfs_push_window_trip(w, trip - 1, 2, got));
	assert_false(bfs_push_window_trip(w, trip + P - 1, 2, got));
	assert_false(bfs_push_window_trip(w, trip + P, 1, got));
	bfs_push_window_put(w);
	range_free(r);
}

/* A READ's pages, several of them, left out of a block pushed whole. */
static void test_slice_skips_read_range(void **state)
{
	static const size_t len[] = { 65280, 65280, 65280, 65280 + 1024 };
	uint64_t from = 1 << 20;
	struct range *r = range_new(from, len, 4);
	ssize_t got = bfs_push_slice(r->at, r->buf, r->n, from + 15 * P, from + 18 * P, r->bounce,
				     emit, r);

	(void)state;
	assert_int_equal(r->bad, 0);
	for (uint64_t o = from; o < r->at[4]; o++)
		assert_int_equal(r->seen[o - from],
				 o >= from + 15 * P && o < from + 18 * P ? 0 : 1);
	assert_int_equal(got, (ssize_t)(r->at[4] - from - 3 * P));
	range_free(r);
}

/* A push that fails (the kernel forgot the inode) stops the job. */
static void test_slice_stops_on_failure(void **state)
{
	static const size_t len[] = { 65536, 65536, 65536 };
	struct range *r = range_new(0, len, 3);

	(void)state;
	r->fail_at = 2;
	assert_int_equal(slice(r, UINT64_MAX), -ENOENT);
	assert_int_equal(r->emits, 2);
	range_free(r);
}

/* --- the window ----------------------------------------------------------- */

#define MIB (1u << 20)

static const struct bfs_window_cfg cfg8 = {
	.size = 8 * MIB,
	.gap = 1 * MIB,
	.eof = 512 * MIB,
	.run_min = 2,
};

static void test_window_starts_past_kernel_readahead(void **state)
{
	struct bfs_window w;
	struct bfs_window_plan p;

	(void)state;
	bfs_window_init(&w);
	assert_false(bfs_window_step(&w, &cfg8, 0, 128 << 10, &p)); /* run 1 of 2 */
	assert_true(bfs_window_step(&w, &cfg8, 128 << 10, 1 * MIB, &p));
	assert_int_equal(p.from, 2 * MIB); /* the kernel reads [1M, 2M) itself */
	assert_int_equal(p.to, 9 * MIB);
	assert_int_equal(p.trip, 5 * MIB); /* half a window before the end */
	assert_int_equal(w.pushed, 9 * MIB);
}

static void test_window_moves_on_at_tripwire(void **state)
{
	struct bfs_window w;
	struct bfs_window_plan p;

	(void)state;
	bfs_window_init(&w);
	assert_false(bfs_window_step(&w, &cfg8, 0, 1 * MIB, &p)); /* run 1 of 2 */
	assert_true(bfs_window_step(&w, &cfg8, 1 * MIB, 2 * MIB, &p));
	/* the kernel's own READs in the gap: half a window is still ahead */
	assert_false(bfs_window_step(&w, &cfg8, 2 * MIB, 3 * MIB, &p));
	assert_int_equal(p.trip, 6 * MIB);
	/* the reader reaches the tripwire: one page READ; half a window more */
	assert_true(bfs_window_step(&w, &cfg8, p.trip, p.trip + P, &p));
	assert_int_equal(p.from, 10 * MIB);
	assert_int_equal(p.to, 14 * MIB + P);
	assert_int_equal(p.trip, 10 * MIB + P);
	assert_true(bfs_window_step(&w, &cfg8, p.trip, p.trip + P, &p));
	assert_int_equal(p.from, 14 * MIB + P);
	assert_int_equal(p.to, 18 * MIB + 2 * P);
	assert_int_equal(w.run, 5);
}

/* Big blocks: a READ tops the window up once a block's worth can be added, not half a window. */
static void test_window_tops_up_by_step(void **state)
{
	const uint64_t b = 24 * MIB;
	struct bfs_window_cfg half = { .size = 3 * b, .eof = 20 * b }, step = half;
	struct bfs_window wh, ws;
	struct bfs_window_plan p;

	(void)state;
	step.step = b;
	bfs_window_init(&wh);
	bfs_window_init(&ws);
	assert_true(bfs_window_step(&wh, &half, 0, MIB, &p));
	assert_true(bfs_window_step(&ws, &step, 0, MIB, &p));
	assert_int_equal(p.to, MIB + 3 * b);
	/* two and a half blocks ahead: neither moves */
	assert_false(bfs_window_step(&ws, &step, b / 2, b / 2 + MIB, &p));
	assert_false(bfs_window_step(&wh, &half, b / 2, b / 2 + MIB, &p));
	/* just under two blocks ahead: a block can be added, but not half a window */
	assert_false(bfs_window_step(&wh, &half, b + MIB, b + 2 * MIB, &p));
	assert_true(bfs_window_step(&ws, &step, b + MIB, b + 2 * MIB, &p));
	assert_int_equal(p.from, MIB + 3 * b);
	assert_int_equal(p.to, 4 * b + 2 * MIB);
}

/* A reader reads once only after SEQ_ONCE_MIN READs each past all before; going back resets it. */
static void test_window_once_after_forward_run(void **state)
{
	/* READs as long as the window: every one of them plans */
	struct bfs_window_cfg c = { .size = 4 * MIB, .eof = 1024 * MIB };
	struct bfs_window w;
	struct bfs_window_plan p;
	uint64_t off = 32 * MIB;

	(void)state;
	bfs_window_init(&w);
	for (unsigned int i = 0; i < 7; i++, off += 4 * MIB) {
		assert_true(bfs_window_step(&w, &c, off, off + 4 * MIB, &p));
		assert_false(bfs_window_once(&w));
	}
	/* back 3 MiB, inside the window: the same run (still ahead), but not forward */
	assert_false(bfs_window_step(&w, &c, off - 3 * MIB, off + MIB, &p));
	assert_int_equal(w.fwd, 0);
	for (unsigned int i = 0; i < 7; i++, off += 4 * MIB) {
		assert_true(bfs_window_step(&w, &c, off, off + 4 * MIB, &p));
		assert_false(bfs_window_once(&w));
	}
	/* the eighth READ forward: what is decoded for it from now on is read once */
	assert_true(bfs_window_step(&w, &c, off, off + 4 * MIB, &p));
	assert_true(bfs_window_once(&w));
}

static void test_window_jump_starts_over(void **state)
{
	struct bfs_window w;
	struct bfs_window_plan p;
	unsigned int gen;

	(void)state;
	bfs_window_init(&w);
	assert_false(bfs_window_step(&w, &cfg8, 0, 1 * MIB, &p)); /* run 1 of 2 */
	assert_true(bfs_window_step(&w, &cfg8, 1 * MIB, 2 * MIB, &p));
	gen = w.gen;
	assert_false(bfs_window_step(&w, &cfg8, 300 * MIB, 301 * MIB, &p));
	assert_int_equal(w.gen, gen + 1); /* queued jobs of the old window stop */
	assert_int_equal(w.pushed, 0);
	assert_int_equal(w.trip, UINT64_MAX);
	assert_true(bfs_window_step(&w, &cfg8, 301 * MIB, 302 * MIB, &p));
	assert_int_equal(p.from, 303 * MIB);
}

/* A reader faster than the pushes reads inside or past them: still sequential. */
static void test_window_reader_outruns_pushes(void **state)
{
	struct bfs_window w;
	struct bfs_window_plan p;
	unsigned int gen;

	(void)state;
	bfs_window_init(&w);
	assert_false(bfs_window_step(&w, &cfg8, 0, 1 * MIB, &p));      /* run 1 of 2 */
	assert_true(bfs_window_step(&w, &cfg8, 1 * MIB, 2 * MIB, &p)); /* pushed to 10M */
	gen = w.gen;
	assert_true(bfs_window_step(&w, &cfg8, 7 * MIB, 8 * MIB, &p));
	assert_int_equal(w.gen, gen);
	assert_int_equal(p.from, 10 * MIB);
	assert_true(bfs_window_step(&w, &cfg8, 17 * MIB, 18 * MIB, &p)); /* past them */
	assert_int_equal(w.gen, gen);
	assert_int_equal(p.from, 19 * MIB);
}

static void test_window_ends_at_eof(void **state)
{
	struct bfs_window_cfg c = cfg8;
	struct bfs_window w;
	struct bfs_window_plan p;

	(void)state;
	c.eof = 6 * MIB + 100;
	bfs_window_init(&w);
	assert_false(bfs_window_step(&w, &c, 0, 1 * MIB, &p)); /* run 1 of 2 */
	assert_true(bfs_window_step(&w, &c, 1 * MIB, 2 * MIB, &p));
	assert_int_equal(p.to, c.eof);
	assert_true(p.trip < 6 * MIB); /* never the partial last page */
	assert_false(bfs_window_step(&w, &c, p.trip, p.trip + P, &p)); /* all queued */
}

static void test_window_retreat_after_full_queue(void **state)
{
	struct bfs_window w;
	struct bfs_window_plan p;

	(void)state;
	bfs_window_init(&w);
	assert_false(bfs_window_step(&w, &cfg8, 0, 1 * MIB, &p)); /* run 1 of 2 */
	assert_true(bfs_window_step(&w, &cfg8, 1 * MIB, 2 * MIB, &p));
	bfs_window_retreat(&w, 4 * MIB); /* chunks from 4M were not queued */
	assert_int_equal(w.pushed, 4 * MIB);
	assert_int_equal(w.trip, UINT64_MAX); /* its tripwire was not queued either */
	assert_true(bfs_window_step(&w, &cfg8, 2 * MIB, 3 * MIB, &p));
	assert_int_equal(p.from, 4 * MIB);
}

static void test_window_off_for_random_readers(void **state)
{
	struct bfs_window_cfg c = cfg8;
	struct bfs_window w;
	struct bfs_window_plan p;

	(void)state;
	c.size = 0; /* advice random */
	c.run_min = 0;
	bfs_window_init(&w);
	for (uint64_t off = 0; off < 16 * MIB; off += MIB)
		assert_false(bfs_window_step(&w, &c, off, off + MIB, &p));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slice_aligned_blocks),
		cmocka_unit_test(test_slice_block_edges_inside_pages),
		cmocka_unit_test(test_slice_tiny_blocks),
		cmocka_unit_test(test_slice_partial_last_page),
		cmocka_unit_test(test_slice_skips_tripwire),
		cmocka_unit_test(test_slice_skips_read_range),
		cmocka_unit_test(test_window_keeps_tripwire),
		cmocka_unit_test(test_slice_stops_on_failure),
		cmocka_unit_test(test_window_starts_past_kernel_readahead),
		cmocka_unit_test(test_window_moves_on_at_tripwire),
		cmocka_unit_test(test_window_tops_up_by_step),
		cmocka_unit_test(test_window_once_after_forward_run),
		cmocka_unit_test(test_window_jump_starts_over),
		cmocka_unit_test(test_window_reader_outruns_pushes),
		cmocka_unit_test(test_window_ends_at_eof),
		cmocka_unit_test(test_window_retreat_after_full_queue),
		cmocka_unit_test(test_window_off_for_random_readers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
