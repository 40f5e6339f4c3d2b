// SPDX-License-Identifier: MIT
/* The block cache: bound, eviction order, references, single flight, failures. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockfs/cache.h"

struct fx {
	struct bfs_cache *c;
	struct bfs_counters *mount, *file;
};

static int setup_with(void **state, uint64_t limit)
{
	static struct fx f;

	memset(&f, 0, sizeof(f));
	f.mount = bfs_counters_new(NULL);
	f.file = bfs_counters_new(f.mount);
	assert_int_equal(bfs_cache_new(&f.c, limit), 0);
	*state = &f;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, 4096); /* four 1 KiB blocks */
}

static int setup_off(void **state)
{
	return setup_with(state, 0);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	bfs_cache_free(f->c);
	assert_int_equal(atomic_load(&f->file->cached), 0);
	bfs_counters_put(f->file);
	bfs_counters_put(f->mount);
	return 0;
}

/* Load block @k of file 1 (1 KiB of byte @k) and drop our reference. */
static void load(struct fx *f, size_t k)
{
	struct bfs_block *b;

	assert_int_equal(bfs_cache_get(f->c, 1, k, 1024, f->file, &b), 1);
	memset(b->data, (int)k, 1024);
	bfs_cache_done(f->c, b, 0);
	bfs_block_put(b);
}

static void test_miss_then_hit(void **state)
{
	struct fx *f = *state;
	struct bfs_block *b;

	load(f, 7);
	assert_int_equal(bfs_cache_get(f->c, 1, 7, 1024, f->file, &b), 0);
	assert_int_equal(b->data[1023], 7);
	bfs_block_put(b);
	assert_int_equal(bfs_cache_bytes(f->c), 1024);
	assert_int_equal(atomic_load(&f->file->cached), 1024);
	assert_int_equal(atomic_load(&f->mount->cached), 1024); /* parent counts too */
}

static void test_bound_evicts_least_recent(void **state)
{
	struct fx *f = *state;
	struct bfs_block *b;

	for (size_t k = 0; k < 4; k++)
		load(f, k);
	/* use block 0 again: block 1 is now the least recent */
	assert_int_equal(bfs_cache_get(f->c, 1, 0, 1024, f->file, &b), 0);
	bfs_block_put(b);
	load(f, 4);
	assert_true(bfs_cache_bytes(f->c) <= bfs_cache_limit(f->c));
	assert_true(bfs_cache_contains(f->c, 1, 0));
	assert_false(bfs_cache_contains(f->c, 1, 1));
	assert_true(bfs_cache_contains(f->c, 1, 2));
	assert_true(bfs_cache_contains(f->c, 1, 4));
}

static void test_demoted_goes_first_until_used(void **state)
{
	struct fx *f = *state;
	struct bfs_block *b;

	for (size_t k = 0; k < 4; k++)
		load(f, k);
	bfs_cache_demote(f->c, 1, 2); /* the newest but one */
	bfs_cache_demote(f->c, 1, 9); /* not cached: nothing happens */
	load(f, 4);
	assert_false(bfs_cache_contains(f->c, 1, 2)); /* went before 0, the oldest */
	assert_true(bfs_cache_contains(f->c, 1, 0));
	/* Demoted, then used: recent again, so the oldest (0) goes instead. */
	bfs_cache_demote(f->c, 1, 3);
	assert_int_equal(bfs_cache_get(f->c, 1, 3, 1024, f->file, &b), 0);
	bfs_block_put(b);
	load(f, 5);
	assert_true(bfs_cache_contains(f->c, 1, 3));
	assert_false(bfs_cache_contains(f->c, 1, 0));
	/* A demoted block a reader holds is not evicted while held. */
	assert_int_equal(bfs_cache_get(f->c, 1, 4, 1024, f->file, &b), 0);
	bfs_cache_demote(f->c, 1, 4);
	load(f, 6);
	assert_true(bfs_cache_contains(f->c, 1, 4));
	assert_int_equal(b->data[0], 4);
	bfs_block_put(b);
	assert_true(bfs_cache_bytes(f->c) <= bfs_cache_limit(f->c));
}

static void test_held_block_never_evicted(void **state)
{
	struct fx *f = *state;
	struct bfs_block *held;

	load(f, 0);
	assert_int_equal(bfs_cache_get(f->c, 1, 0, 1024, f->file, &held), 0);
	for (size_t k = 1; k < 10; k++)
		load(f, k);
	assert_true(bfs_cache_contains(f->c, 1, 0)); /* a reader holds it */
	assert_int_equal(held->data[0], 0);
	bfs_block_put(held);
	for (size_t k = 10; k < 14; k++)
		load(f, k);
	assert_false(bfs_cache_contains(f->c, 1, 0)); /* released, then evicted */
	assert_true(bfs_cache_bytes(f->c) <= bfs_cache_limit(f->c));
}

static void test_drop_keeps_readers_copy(void **state)
{
	struct fx *f = *state;
	struct bfs_block *b;

	load(f, 3);
	assert_int_equal(bfs_cache_get(f->c, 1, 3, 1024, f->file, &b), 0);
	bfs_cache_drop(f->c, 1, 3);
	assert_false(bfs_cache_contains(f->c, 1, 3));
	assert_int_equal(bfs_cache_bytes(f->c), 0);
	assert_int_equal(b->data[5], 3); /* still ours */
	bfs_block_put(b);
}

static void test_failed_load_reaches_waiter_and_is_forgotten(void **state)
{
	struct fx *f = *state;
	struct bfs_block *b, *again;

	assert_int_equal(bfs_cache_get(f->c, 1, 9, 1024, f->file, &b), 1);
	bfs_cache_done(f->c, b, -EBADMSG);
	bfs_block_put(b);
	assert_false(bfs_cache_contains(f->c, 1, 9));
	assert_int_equal(bfs_cache_bytes(f->c), 0);
	/* the next reader tries again itself */
	assert_int_equal(bfs_cache_get(f->c, 1, 9, 1024, f->file, &again), 1);
	bfs_cache_done(f->c, again, 0);
	bfs_block_put(again);
}

static void test_files_are_distinct(void **state)
{
	struct fx *f = *state;
	struct bfs_block *b;

	load(f, 1);
	assert_int_equal(bfs_cache_get(f->c, 2, 1, 1024, f->file, &b), 1); /* file 2 */
	bfs_cache_done(f->c, b, 0);
	bfs_block_put(b);
}

static void test_try_new_for_prefetch(void **state)
{
	struct fx *f = *state;
	struct bfs_block *b, *got;

	assert_int_equal(bfs_cache_try_new(f->c, 1, 5, 1024, f->file, &b), 1);
	assert_int_equal(bfs_cache_try_new(f->c, 1, 5, 1024, f->file, &got), 0); /* loading */
	assert_null(got);
	bfs_cache_done(f->c, b, 0);
	bfs_block_put(b);
	assert_int_equal(bfs_cache_try_new(f->c, 1, 5, 1024, f->file, &got), 0); /* cached */
	assert_int_equal(atomic_load(&f->file->prefetch_used), 0);
	assert_int_equal(bfs_cache_get(f->c, 1, 5, 1024, f->file, &got), 0);
	bfs_block_put(got);
	assert_int_equal(bfs_cache_get(f->c, 1, 5, 1024, f->file, &got), 0);
	bfs_block_put(got);
	assert_int_equal(atomic_load(&f->file->prefetch_used), 1); /* counted once */
	assert_int_equal(atomic_load(&f->mount->prefetch_used), 1);
}

static void test_try_new_never_evicts_held(void **state)
{
	struct fx *f = *state;
	struct bfs_block *held[4], *b;

	for (size_t k = 0; k < 4; k++) {
		load(f, k);
		assert_int_equal(bfs_cache_get(f->c, 1, k, 1024, f->file, &held[k]), 0);
	}
	assert_int_equal(bfs_cache_try_new(f->c, 1, 8, 1024, f->file, &b), 0); /* no room */
	assert_null(b);
	for (size_t k = 0; k < 4; k++)
		bfs_block_put(held[k]);
}

static void test_try_new_of_a_loading_block_evicts_nothing(void **state)
{
	struct fx *f = *state;
	struct bfs_block *loading, *b;

	for (size_t k = 0; k < 3; k++)
		load(f, k);
	assert_int_equal(bfs_cache_get(f->c, 1, 3, 1024, f->file, &loading), 1); /* full now */
	assert_int_equal(bfs_cache_try_new(f->c, 1, 3, 1024, f->file, &b), 0);
	assert_null(b);
	for (size_t k = 0; k < 3; k++)
		assert_true(bfs_cache_contains(f->c, 1, k));
	bfs_cache_done(f->c, loading, 0);
	bfs_block_put(loading);
}

static void test_size_zero_keeps_nothing(void **state)
{
	struct fx *f = *state;
	struct bfs_block *b;

	assert_int_equal(bfs_cache_get(f->c, 1, 0, 100, f->file, &b), 1);
	bfs_cache_done(f->c, b, 0);
	bfs_block_put(b);
	assert_false(bfs_cache_contains(f->c, 1, 0));
	assert_int_equal(bfs_cache_get(f->c, 1, 0, 100, f->file, &b), 1); /* decode again */
	bfs_cache_done(f->c, b, 0);
	bfs_block_put(b);
	assert_int_equal(bfs_cache_bytes(f->c), 0);
}

/* --- single flight ---------------------------------------------------------- */

struct racer {
	struct fx *f;
	atomic_int *loads;
	int rc;
	uint8_t seen;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	struct bfs_block *b;

	r->rc = bfs_cache_get(r->f->c, 1, 42, 1024, r->f->file, &b);
	if (r->rc == 1) {
		atomic_fetch_add(r->loads, 1);
		usleep(20000); /* a slow decode: the others must wait */
		memset(b->data, 0x5a, 1024);
		bfs_cache_done(r->f->c, b, 0);
	}
	if (r->rc >= 0) {
		r->seen = b->data[512];
		bfs_block_put(b);
	}
	return NULL;
}

static void test_concurrent_misses_decode_once(void **state)
{
	struct fx *f = *state;
	atomic_int loads = 0;
	struct racer r[8];
	pthread_t t[8];

	for (int i = 0; i < 8; i++) {
		r[i] = (struct racer){ .f = f, .loads = &loads };
		assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_true(r[i].rc >= 0);
		assert_int_equal(r[i].seen, 0x5a);
	}
	assert_int_equal(atomic_load(&loads), 1);
}

static void *fail_slowly(void *arg)
{
	struct racer *r = arg;
	struct bfs_block *b;

	r->rc = bfs_cache_get(r->f->c, 1, 43, 1024, r->f->file, &b);
	if (r->rc == 1) {
		usleep(20000);
		bfs_cache_done(r->f->c, b, -EILSEQ);
	}
	if (r->rc >= 0)
		bfs_block_put(b);
	return NULL;
}

static void test_waiters_see_the_failure(void **state)
{
	struct fx *f = *state;
	struct racer r[4];
	pthread_t t[4];
	int loaders = 0, failed = 0;

	for (int i = 0; i < 4; i++) {
		r[i] = (struct racer){ .f = f };
		assert_int_equal(pthread_create(&t[i], NULL, fail_slowly, &r[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		loaders += r[i].rc == 1;
		failed += r[i].rc == -EILSEQ;
	}
	/* one loader; the rest either waited and got its error or loaded again */
	assert_true(loaders >= 1);
	assert_int_equal(loaders + failed, 4);
	assert_false(bfs_cache_contains(f->c, 1, 43));
}

/* --- stress: gets, fills, drops and prefetches racing on a few keys ---------- */

#define KEYS 24
#define BLK  512

static uint8_t pattern(size_t key, size_t i)
{
	return (uint8_t)(key * 31 + i * 7);
}

struct stresser {
	struct fx *f;
	unsigned int seed;
	int bad;
	uint32_t len; /* BLK, or big blocks (spares), of which one byte in STRIDE is checked */
	int ops;
};

#define STRIDE 4093

static size_t step(uint32_t len)
{
	return len > BLK ? STRIDE : 1;
}

static void fill(struct bfs_block *b)
{
	for (size_t i = 0; i < b->len; i += step(b->len))
		b->data[i] = pattern(b->blkno + b->len, i);
	b->data[b->len - 1] = pattern(b->blkno + b->len, b->len - 1);
}

static void *stress(void *arg)
{
	struct stresser *st = arg;
	struct fx *f = st->f;

	for (int op = 0; op < st->ops; op++) {
		size_t key = (size_t)rand_r(&st->seed) % KEYS;
		uint32_t len = st->len - (st->len > BLK ? (uint32_t)(key % 3) * (st->len / 16) : 0);
		struct bfs_block *b;
		int rc;

		switch (rand_r(&st->seed) % 4) {
		case 0:
			bfs_cache_drop(f->c, 1, key); /* dontneed */
			break;
		case 1:
			if (bfs_cache_try_new(f->c, 1, key, len, f->file, &b) == 1) {
				fill(b);
				bfs_cache_done(f->c, b, 0);
				bfs_block_put(b);
			}
			break;
		default:
			rc = bfs_cache_get(f->c, 1, key, len, f->file, &b);
			if (rc < 0)
				break;
			if (rc == 1) {
				fill(b);
				bfs_cache_done(f->c, b, 0);
			}
			st->bad += b->len != len;
			for (size_t i = 0; i < len; i += step(len))
				st->bad += b->data[i] != pattern(key + len, i);
			st->bad += b->data[len - 1] != pattern(key + len, len - 1);
			bfs_block_put(b);
		}
	}
	return NULL;
}

static int setup_stress(void **state)
{
	return setup_with(state, 8 * BLK); /* a third of the keys fit */
}

static void stress_with(struct fx *f, uint32_t len, int ops)
{
	struct stresser st[4];
	pthread_t t[4];

	for (int i = 0; i < 4; i++) {
		st[i] = (struct stresser){ .f = f,
					   .seed = 1234u + (unsigned int)i,
					   .len = len,
					   .ops = ops };
		assert_int_equal(pthread_create(&t[i], NULL, stress, &st[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(st[i].bad, 0);
	}
	assert_true(bfs_cache_bytes(f->c) <= bfs_cache_limit(f->c));
}

static void test_stress_contents_stay_right(void **state)
{
	stress_with(*state, BLK, 20000);
}

static int setup_stress_big(void **state)
{
	return setup_with(state, 8u * (8u << 20));
}

/* The same with blocks of 7-8 MiB: spares taken, kept and freed by four threads. */
static void test_stress_spares(void **state)
{
	struct fx *f = *state;

	stress_with(f, 8u << 20, 1500);
	assert_true(bfs_cache_bytes(f->c) + bfs_cache_spare_bytes(f->c) <= bfs_cache_limit(f->c));
}

static int setup_big(void **state)
{
	return setup_with(state, 24u << 20);
}

/* Block @k of file 1, @len bytes of byte @k, loaded; our reference kept. */
static struct bfs_block *load_big(struct fx *f, size_t k, uint32_t len)
{
	struct bfs_block *b;

	assert_int_equal(bfs_cache_get(f->c, 1, k, len, f->file, &b), 1);
	memset(b->data, (int)k, len);
	bfs_cache_done(f->c, b, 0);
	return b;
}

/*
 * A big block freed is kept as a spare and serves the next of about its
 * size; spares stay within the bound beside the blocks, and go when the
 * room is needed.
 */
static void test_spares(void **state)
{
	struct fx *f = *state;
	const uint32_t big = 8u << 20;
	struct bfs_block *b = load_big(f, 0, big), *c;
	uint8_t *was = b->data;

	bfs_block_put(b);
	bfs_cache_drop(f->c, 1, 0); /* freed: a spare */
	assert_int_equal(bfs_cache_spare_bytes(f->c), big);
	assert_int_equal(bfs_cache_bytes(f->c), 0);
	/* a block much smaller does not take it */
	b = load_big(f, 1, big / 2);
	assert_ptr_not_equal(b->data, was);
	assert_int_equal(bfs_cache_spare_bytes(f->c), big);
	/* one an eighth smaller does, and is served whole */
	c = load_big(f, 2, big - big / 8);
	assert_ptr_equal(c->data, was);
	assert_int_equal(c->len, big - big / 8);
	assert_int_equal(bfs_cache_spare_bytes(f->c), 0);
	assert_int_equal(c->data[c->len - 1], 2);
	bfs_block_put(c);
	bfs_cache_drop(f->c, 1, 2); /* a spare again: 4 + 8 MiB of 24 */
	assert_int_equal(bfs_cache_spare_bytes(f->c), big);
	/* 16 MiB more do not fit beside it: the spare goes first, the block stays */
	c = load_big(f, 3, 2 * big);
	assert_int_equal(bfs_cache_spare_bytes(f->c), 0);
	assert_true(bfs_cache_contains(f->c, 1, 1));
	assert_true(bfs_cache_bytes(f->c) <= bfs_cache_limit(f->c));
	/* freed while 16 + 4 MiB fit: kept */
	bfs_block_put(b);
	bfs_cache_drop(f->c, 1, 1);
	assert_int_equal(bfs_cache_spare_bytes(f->c), big / 2);
	/* 8 MiB held beside 16 MiB: the 4 MiB spare goes, and so would any other freed */
	b = load_big(f, 4, big);
	assert_int_equal(bfs_cache_spare_bytes(f->c), 0);
	bfs_block_put(b);
	bfs_cache_drop(f->c, 1, 4); /* 16 + 8 MiB of 24: kept */
	assert_int_equal(bfs_cache_spare_bytes(f->c), big);
	b = load_big(f, 5, big / 2); /* the 8 MiB spare goes for it (4 MiB is too small a use) */
	assert_int_equal(bfs_cache_spare_bytes(f->c), 0);
	bfs_block_put(c); /* 16 MiB block still cached: nothing freed */
	bfs_block_put(b);
	bfs_cache_drop(f->c, 1, 3); /* 4 MiB cached + 16 MiB: kept */
	assert_int_equal(bfs_cache_spare_bytes(f->c), 2 * big);
	assert_true(bfs_cache_spare_bytes(f->c) + bfs_cache_bytes(f->c) <= bfs_cache_limit(f->c));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_miss_then_hit),
		T(test_bound_evicts_least_recent),
		T(test_demoted_goes_first_until_used),
		T(test_held_block_never_evicted),
		T(test_drop_keeps_readers_copy),
		T(test_failed_load_reaches_waiter_and_is_forgotten),
		T(test_files_are_distinct),
		T(test_try_new_for_prefetch),
		T(test_try_new_never_evicts_held),
		T(test_try_new_of_a_loading_block_evicts_nothing),
		cmocka_unit_test_setup_teardown(test_size_zero_keeps_nothing, setup_off, teardown),
		T(test_concurrent_misses_decode_once),
		T(test_waiters_see_the_failure),
		cmocka_unit_test_setup_teardown(test_stress_contents_stay_right, setup_stress,
						teardown),
		cmocka_unit_test_setup_teardown(test_spares, setup_big, teardown),
		cmocka_unit_test_setup_teardown(test_stress_spares, setup_stress_big, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
