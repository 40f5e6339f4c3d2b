// SPDX-License-Identifier: MIT
/* The block index: appending, lookup, bounds, damage, and settling guesses. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/settle.h"
#include "blockfs/io.h"
#include "blockfs/workq.h"

/* A codec whose blocks state their exact size in their first 4 bytes; 0 = corrupt. */
static int fake_measure(const struct bfs_blk *blk, const uint8_t *src, uint32_t *usize,
			const char **why)
{
	(void)blk;
	*usize = bfs_le32(src);
	if (*usize == 0) {
		*why = "fake corruption";
		return -EBADMSG;
	}
	return 0;
}

static const struct bfs_codec fake = { .name = "fake", .measure = fake_measure };

static void setup_index(struct bfs_index *idx, uint64_t file_size)
{
	bfs_index_init(idx, file_size);
}

static void expect_find(const struct bfs_index *idx, uint64_t uoff, int rc, size_t blkno)
{
	size_t k = SIZE_MAX;

	assert_int_equal(bfs_index_find(idx, uoff, &k), rc);
	if (rc == 0)
		assert_int_equal(k, blkno);
}

static void test_find_across_blocks(void **state)
{
	struct bfs_index idx;

	(void)state;
	setup_index(&idx, 1000);
	assert_int_equal(bfs_index_add(&idx, 0, 10, 100, 0), 0);
	assert_int_equal(bfs_index_add(&idx, 10, 10, 50, 0), 0);
	assert_int_equal(bfs_index_add(&idx, 20, 10, 200, 0), 0);
	assert_int_equal(idx.usize, 350);
	assert_int_equal(idx.max_usize, 200);
	assert_int_equal(atomic_load(&idx.nexact), 3);
	expect_find(&idx, 0, 0, 0);
	expect_find(&idx, 99, 0, 0);
	expect_find(&idx, 100, 0, 1);
	expect_find(&idx, 149, 0, 1);
	expect_find(&idx, 150, 0, 2);
	expect_find(&idx, 349, 0, 2);
	expect_find(&idx, 350, -ENXIO, 0);
	bfs_index_destroy(&idx);
}

static void test_empty_index_finds_nothing(void **state)
{
	struct bfs_index idx;

	(void)state;
	setup_index(&idx, 0);
	expect_find(&idx, 0, -ENXIO, 0);
	bfs_index_destroy(&idx);
}

static void test_empty_block_refused(void **state)
{
	struct bfs_index idx;

	(void)state;
	setup_index(&idx, 100);
	assert_int_equal(bfs_index_add(&idx, 0, 10, 0, 0), -EINVAL);
	assert_int_equal(idx.n, 0);
	bfs_index_destroy(&idx);
}

static void test_block_count_bounded_by_file_size(void **state)
{
	struct bfs_index idx;

	(void)state;
	setup_index(&idx, 8); /* room for at most 8 / 4 + 1 blocks */
	for (int i = 0; i < 3; i++)
		assert_int_equal(bfs_index_add(&idx, (uint64_t)i * 4, 4, 1, 0), 0);
	assert_int_equal(bfs_index_add(&idx, 12, 4, 1, 0), -EFBIG);
	assert_int_equal(idx.n, 3);
	bfs_index_destroy(&idx);
}

static void test_many_blocks_grow(void **state)
{
	struct bfs_index idx;

	(void)state;
	setup_index(&idx, 1 << 20);
	for (uint32_t i = 0; i < 10000; i++)
		assert_int_equal(bfs_index_add(&idx, i * 8ull, 8, 3, 0), 0);
	expect_find(&idx, 3 * 9999 + 2, 0, 9999);
	expect_find(&idx, 3 * 5000, 0, 5000);
	bfs_index_destroy(&idx);
}

static void test_mark_broken_adds_poison(void **state)
{
	struct bfs_index idx;

	(void)state;
	setup_index(&idx, 100);
	assert_int_equal(bfs_index_add(&idx, 0, 10, 100, 0), 0);
	bfs_index_mark_broken(&idx, 10, "bad magic at byte %d", 10);
	assert_true(idx.broken);
	assert_string_equal(idx.why, "bad magic at byte 10");
	assert_int_equal(idx.n, 2);
	assert_int_equal(idx.blk[1].flags, BFS_BLK_BAD);
	assert_int_equal(idx.blk[1].usize, 1);
	assert_int_equal(idx.usize, 101);
	expect_find(&idx, 100, 0, 1);
	bfs_index_destroy(&idx);
}

/* Backing bytes: at offset 16*i a block whose first 4 bytes give its size. */
static void fill_sizes(uint8_t *file, const uint32_t *sizes, size_t n)
{
	memset(file, 0xee, 16 * n);
	for (size_t i = 0; i < n; i++)
		bfs_put_le32(file + 16 * i, sizes[i]);
}

static void add_guessed(struct bfs_index *idx, const uint32_t *guess, const uint32_t *flags,
			size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(bfs_index_add(idx, 16 * i, 16, guess[i], flags[i]), 0);
}

static void test_settle_fixes_short_guess(void **state)
{
	static const uint32_t real[] = { 100, 300, 1000, 10 };
	static const uint32_t guess[] = { 100, 1000, 1000, 10 };
	static const uint32_t flags[] = { 0, BFS_BLK_GUESS, BFS_BLK_GUESS, 0 };
	uint8_t file[64];
	struct bfs_index idx;
	struct bfs_io io;

	(void)state;
	fill_sizes(file, real, 4);
	bfs_io_init_mem(&io, file, sizeof(file));
	setup_index(&idx, sizeof(file));
	add_guessed(&idx, guess, flags, 4);
	assert_int_equal(atomic_load(&idx.nexact), 1);
	expect_find(&idx, 150, -ENXIO, 0); /* not exact yet: not searchable */

	assert_int_equal(bfs_settle(&idx, &io, &fake, 150), 0);
	assert_int_equal(atomic_load(&idx.nexact), 2);
	assert_int_equal(idx.blk[1].usize, 300);
	assert_int_equal(idx.blk[1].flags & BFS_BLK_GUESS, 0);
	assert_int_equal(idx.blk[2].uoff, 400); /* later guesses moved */
	assert_int_equal(idx.blk[3].uoff, 1400);
	assert_int_equal(idx.usize, 1410);
	expect_find(&idx, 150, 0, 1);

	assert_int_equal(bfs_settle(&idx, &io, &fake, 1409), 0);
	assert_int_equal(atomic_load(&idx.nexact), 4);
	expect_find(&idx, 1409, 0, 3);
	expect_find(&idx, 1410, -ENXIO, 0);
	bfs_index_destroy(&idx);
}

static void test_settle_poisons_corrupt_guess_in_place(void **state)
{
	static const uint32_t real[] = { 100, 0, 1000 }; /* block 1 is corrupt */
	static const uint32_t guess[] = { 100, 1000, 1000 };
	static const uint32_t flags[] = { 0, BFS_BLK_GUESS, BFS_BLK_GUESS };
	uint8_t file[48];
	struct bfs_index idx;
	struct bfs_io io;

	(void)state;
	fill_sizes(file, real, 3);
	bfs_io_init_mem(&io, file, sizeof(file));
	setup_index(&idx, sizeof(file));
	add_guessed(&idx, guess, flags, 3);

	assert_int_equal(bfs_settle(&idx, &io, &fake, 2099), 0);
	assert_false(idx.broken); /* the structure is intact */
	assert_non_null(strstr(idx.why, "block 1: fake corruption"));
	assert_int_equal(idx.n, 3);
	assert_int_equal(idx.blk[1].flags, BFS_BLK_BAD); /* keeps its guess ... */
	assert_int_equal(idx.blk[1].usize, 1000);
	assert_int_equal(idx.blk[2].flags, 0); /* ... and what follows is settled */
	assert_int_equal(idx.blk[2].uoff, 1100);
	assert_int_equal(atomic_load(&idx.nexact), 3);
	assert_int_equal(idx.usize, 2100);
	expect_find(&idx, 99, 0, 0);
	expect_find(&idx, 100, 0, 1);
	expect_find(&idx, 1100, 0, 2);
	bfs_index_destroy(&idx);
}

static void test_settle_io_error_changes_nothing(void **state)
{
	static const uint32_t guess[] = { 100, 1000 };
	static const uint32_t flags[] = { 0, BFS_BLK_GUESS };
	uint8_t file[20] = { 0 };
	struct bfs_index idx;
	struct bfs_io io;

	(void)state;
	bfs_io_init_mem(&io, file, sizeof(file)); /* block 1 would need bytes 16..31 */
	setup_index(&idx, 64);
	add_guessed(&idx, guess, flags, 2);
	assert_int_equal(bfs_settle(&idx, &io, &fake, 500), -EIO);
	assert_int_equal(atomic_load(&idx.nexact), 1);
	assert_int_equal(idx.blk[1].flags, BFS_BLK_GUESS);
	assert_false(idx.broken);
	bfs_index_destroy(&idx);
}

/* Sizes only metadata states: the odd ones out are measured, the majority trusted. */
static void test_guess_irregular_doubts_the_odd_ones(void **state)
{
	static const uint32_t real[] = { 100, 100, 100, 100, 100, 40 };
	static const uint32_t stated[] = { 100, 101, 100, 100, 100, 40 };
	static const uint32_t none[6];
	uint8_t file[96];
	struct bfs_index idx;
	struct bfs_io io;

	(void)state;
	fill_sizes(file, real, 6);
	bfs_io_init_mem(&io, file, sizeof(file));
	setup_index(&idx, sizeof(file));
	add_guessed(&idx, stated, none, 6);
	bfs_index_guess_irregular(&idx, false);
	assert_int_equal(atomic_load(&idx.nexact), 1);
	assert_int_equal(idx.blk[1].flags, BFS_BLK_GUESS | BFS_BLK_CLAIMED);
	for (size_t k = 2; k < 6; k++)
		assert_int_equal(idx.blk[k].flags, 0); /* the last, 40, moves nothing */

	assert_int_equal(bfs_settle(&idx, &io, &fake, UINT64_MAX), 0);
	assert_int_equal(atomic_load(&idx.nexact), 6);
	assert_int_equal(idx.blk[1].flags, BFS_BLK_BAD); /* measured 100: it lied */
	assert_int_equal(idx.blk[1].usize, 100);
	assert_non_null(strstr(idx.why, "the index says 101"));
	assert_int_equal(idx.blk[2].uoff, 200);		 /* the others stay in place */
	assert_int_equal(idx.usize, 541);		 /* the size shown does not change ... */
	assert_int_equal(idx.blk[5].flags, BFS_BLK_BAD); /* ... so the end reads as damage */
	bfs_index_destroy(&idx);
}

/* No size shared by more than half the blocks: every one is measured. */
static void test_guess_irregular_without_majority(void **state)
{
	static const uint32_t stated[] = { 100, 200, 100, 200, 7 };
	static const uint32_t none[5];
	struct bfs_index idx;

	(void)state;
	setup_index(&idx, 1000);
	add_guessed(&idx, stated, none, 5);
	bfs_index_guess_irregular(&idx, false);
	assert_int_equal(atomic_load(&idx.nexact), 0);
	for (size_t k = 0; k < 4; k++)
		assert_true(idx.blk[k].flags & BFS_BLK_GUESS);
	assert_int_equal(idx.blk[4].flags, 0);
	bfs_index_destroy(&idx);
}

/* A block as large as its aux allows (LZ4: its frame's block max) is regular too. */
static void test_guess_irregular_trusts_full_blocks(void **state)
{
	static const uint32_t stated[] = { 64, 64, 30, 256, 256, 256, 9 };
	static const uint32_t aux[] = { 64, 64, 64, 256, 256, 256, 256 };
	static const uint32_t none[7];
	struct bfs_index idx;

	(void)state;
	setup_index(&idx, 1000);
	add_guessed(&idx, stated, none, 7);
	for (size_t k = 0; k < 7; k++)
		idx.blk[k].aux = aux[k];
	bfs_index_guess_irregular(&idx, true);
	assert_int_equal(atomic_load(&idx.nexact), 2);
	for (size_t k = 0; k < 7; k++)
		assert_int_equal(idx.blk[k].flags & BFS_BLK_GUESS, k == 2 ? BFS_BLK_GUESS : 0);
	bfs_index_destroy(&idx);
}

/* measure: every unclaimed guess is exact before the size is shown. */
static void test_measure_makes_size_exact(void **state)
{
	static const uint32_t real[] = { 100, 300, 1000, 20, 10 };
	static const uint32_t guess[] = { 100, 1000, 1000, 1000, 10 };
	static const uint32_t flags[] = { 0, BFS_BLK_GUESS, BFS_BLK_GUESS | BFS_BLK_CLAIMED,
					  BFS_BLK_GUESS, 0 };
	uint8_t file[80];
	struct bfs_index idx;
	struct bfs_io io;

	(void)state;
	fill_sizes(file, real, 5);
	bfs_io_init_mem(&io, file, sizeof(file));
	setup_index(&idx, sizeof(file));
	add_guessed(&idx, guess, flags, 5);
	assert_int_equal(bfs_measure(&idx, &io, &fake, NULL), 0);
	assert_int_equal(idx.blk[1].usize, 300);
	assert_int_equal(idx.blk[1].flags, 0);
	/* a claim is the file's word: kept for settle to check, in order */
	assert_int_equal(idx.blk[2].usize, 1000);
	assert_int_equal(idx.blk[2].flags, BFS_BLK_GUESS | BFS_BLK_CLAIMED);
	assert_int_equal(idx.blk[3].usize, 20);
	assert_int_equal(idx.blk[3].uoff, 1400);
	assert_int_equal(idx.blk[4].uoff, 1420);
	assert_int_equal(idx.usize, 1430);
	assert_int_equal(idx.max_usize, 1000);
	assert_int_equal(atomic_load(&idx.nexact), 2);
	assert_int_equal(bfs_settle(&idx, &io, &fake, UINT64_MAX), 0);
	assert_int_equal(atomic_load(&idx.nexact), 5);
	assert_int_equal(idx.usize, 1430);
	bfs_index_destroy(&idx);
}

/* A guess that does not measure keeps its size and fails alone. */
static void test_measure_poisons_in_place(void **state)
{
	static const uint32_t real[] = { 100, 0, 50 };
	static const uint32_t guess[] = { 100, 100, 50 };
	static const uint32_t flags[] = { 0, BFS_BLK_GUESS, 0 };
	uint8_t file[48];
	struct bfs_index idx;
	struct bfs_io io;

	(void)state;
	fill_sizes(file, real, 3);
	bfs_io_init_mem(&io, file, sizeof(file));
	setup_index(&idx, sizeof(file));
	add_guessed(&idx, guess, flags, 3);
	assert_int_equal(bfs_measure(&idx, &io, &fake, NULL), 0);
	assert_int_equal(idx.blk[1].flags, BFS_BLK_BAD);
	assert_int_equal(idx.blk[1].usize, 100);
	assert_int_equal(idx.blk[2].uoff, 200);
	assert_int_equal(idx.usize, 250);
	assert_non_null(strstr(idx.why, "fake corruption"));
	assert_int_equal(atomic_load(&idx.nexact), 3);
	bfs_index_destroy(&idx);
}

/* A run that holds what the file says it does: nothing changes. */
static void test_measure_checks_sums(void **state)
{
	static const uint32_t real[] = { 100, 30, 100, 7, 40 };
	static const uint32_t guess[] = { 100, 100, 100, 7, 40 };
	static const uint32_t flags[] = { 0, BFS_BLK_GUESS, 0, 0, 0 };
	uint8_t file[80];
	struct bfs_index idx;
	struct bfs_io io;

	(void)state;
	fill_sizes(file, real, 5);
	bfs_io_init_mem(&io, file, sizeof(file));
	setup_index(&idx, sizeof(file));
	add_guessed(&idx, guess, flags, 5);
	assert_int_equal(bfs_index_expect_sum(&idx, 0, 3, 237), 0);
	assert_int_equal(bfs_index_expect_sum(&idx, 4, 4, 40), 0);
	assert_int_equal(bfs_measure(&idx, &io, &fake, NULL), 0);
	assert_false(idx.broken);
	assert_int_equal(idx.n, 5);
	assert_int_equal(idx.usize, 277);
	assert_null(idx.sums);
	bfs_index_destroy(&idx);
}

/* A run that holds another total ends the file after it, as damage. */
static void test_measure_sum_mismatch_ends_file(void **state)
{
	static const uint32_t real[] = { 100, 30, 100, 40 };
	static const uint32_t guess[] = { 100, 100, 100, 40 };
	static const uint32_t flags[] = { 0, BFS_BLK_GUESS, 0, 0 };
	uint8_t file[64];
	struct bfs_index idx;
	struct bfs_io io;
	size_t k;

	(void)state;
	fill_sizes(file, real, 4);
	bfs_io_init_mem(&io, file, sizeof(file));
	setup_index(&idx, sizeof(file));
	add_guessed(&idx, guess, flags, 4);
	assert_int_equal(bfs_index_expect_sum(&idx, 0, 2, 300), 0); /* holds 230 */
	assert_int_equal(bfs_measure(&idx, &io, &fake, NULL), 0);
	assert_true(idx.broken);
	assert_non_null(strstr(idx.why, "holds 230 bytes, its header says 300"));
	assert_int_equal(idx.n, 4); /* three blocks, then the poison */
	assert_int_equal(idx.blk[3].flags, BFS_BLK_BAD);
	assert_int_equal(idx.blk[3].uoff, 230);
	assert_int_equal(idx.usize, 231);
	assert_int_equal(bfs_index_find(&idx, 229, &k), 0);
	assert_int_equal(k, 2);
	bfs_index_destroy(&idx);
}

/* On a work queue the result is the same, whoever measures what. */
static void test_measure_in_parallel(void **state)
{
	enum { N = 3000 };
	static uint8_t file[16 * N];
	static uint32_t real[N], guess[N], flags[N];
	struct bfs_workq *wq;
	struct bfs_index idx;
	struct bfs_io io;
	uint64_t total = 0;

	(void)state;
	for (size_t i = 0; i < N; i++) {
		real[i] = 1 + (uint32_t)(i * 7919 % 1000);
		guess[i] = 1000;
		flags[i] = i % 3 ? BFS_BLK_GUESS : 0;
		if (!flags[i])
			guess[i] = real[i];
		total += real[i];
	}
	fill_sizes(file, real, N);
	bfs_io_init_mem(&io, file, sizeof(file));
	assert_int_equal(bfs_workq_new(&wq, 3, 16, NULL), 0);
	setup_index(&idx, sizeof(file));
	add_guessed(&idx, guess, flags, N);
	assert_int_equal(bfs_measure(&idx, &io, &fake, wq), 0);
	assert_int_equal(idx.usize, total);
	assert_int_equal(atomic_load(&idx.nexact), N);
	for (size_t i = 0, at = 0; i < N; at += real[i++]) {
		assert_int_equal(idx.blk[i].usize, real[i]);
		assert_int_equal(idx.blk[i].uoff, at);
	}
	bfs_index_destroy(&idx);
	bfs_workq_free(wq);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_across_blocks),
		cmocka_unit_test(test_empty_index_finds_nothing),
		cmocka_unit_test(test_empty_block_refused),
		cmocka_unit_test(test_block_count_bounded_by_file_size),
		cmocka_unit_test(test_many_blocks_grow),
		cmocka_unit_test(test_mark_broken_adds_poison),
		cmocka_unit_test(test_settle_fixes_short_guess),
		cmocka_unit_test(test_settle_poisons_corrupt_guess_in_place),
		cmocka_unit_test(test_settle_io_error_changes_nothing),
		cmocka_unit_test(test_guess_irregular_doubts_the_odd_ones),
		cmocka_unit_test(test_guess_irregular_without_majority),
		cmocka_unit_test(test_guess_irregular_trusts_full_blocks),
		cmocka_unit_test(test_measure_makes_size_exact),
		cmocka_unit_test(test_measure_poisons_in_place),
		cmocka_unit_test(test_measure_checks_sums),
		cmocka_unit_test(test_measure_sum_mismatch_ends_file),
		cmocka_unit_test(test_measure_in_parallel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
