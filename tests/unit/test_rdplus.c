// SPDX-License-Identifier: MIT
/*
 * Unit tests of the READDIRPLUS policy (rdplus.c): names alone until half
 * the files listed were used, the window that halves both counts, the
 * bound on uses, readdirplus other than auto, which never says names
 * suffice, and when replies of names alone look for big files to walk. Threaded counting for TSan.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "rdplus.h"

static void test_off_never_names_alone(void **state)
{
	struct bfs_rdplus r;

	(void)state;
	bfs_rdplus_init(&r, false);
	assert_false(bfs_rdplus_names_suffice(&r));
	bfs_rdplus_listed(&r, 1000);
	assert_false(bfs_rdplus_names_suffice(&r));
	assert_int_equal(atomic_load(&r.listed), 0); /* not even counted */
	bfs_rdplus_used(&r, 5);
	assert_int_equal(atomic_load(&r.used), 0);
}

static void test_fresh_mount_names_alone(void **state)
{
	struct bfs_rdplus r;

	(void)state;
	bfs_rdplus_init(&r, true);
	/* nothing listed yet: a find's first listing pays for no attributes */
	assert_true(bfs_rdplus_names_suffice(&r));
	bfs_rdplus_used(&r, 3); /* uses alone do not turn it */
	assert_true(bfs_rdplus_names_suffice(&r));
}

static void test_half_used_gives_attributes(void **state)
{
	struct bfs_rdplus r;

	(void)state;
	bfs_rdplus_init(&r, true);
	bfs_rdplus_listed(&r, 100);
	bfs_rdplus_used(&r, 49);
	assert_true(bfs_rdplus_names_suffice(&r));
	bfs_rdplus_used(&r, 1); /* 50 of 100: at least half */
	assert_false(bfs_rdplus_names_suffice(&r));
	bfs_rdplus_listed(&r, 1); /* 50 of 101: half, rounded down */
	assert_false(bfs_rdplus_names_suffice(&r));
	bfs_rdplus_listed(&r, 1); /* 50 of 102: less */
	assert_true(bfs_rdplus_names_suffice(&r));
	bfs_rdplus_listed(&r, 0); /* no-op */
	assert_int_equal(atomic_load(&r.listed), 102);
}

static void test_window_halves_both(void **state)
{
	struct bfs_rdplus r;

	(void)state;
	bfs_rdplus_init(&r, true);
	bfs_rdplus_listed(&r, BFS_RDPLUS_WINDOW);
	bfs_rdplus_used(&r, 1000);
	assert_int_equal(atomic_load(&r.listed), BFS_RDPLUS_WINDOW); /* at the window: kept */
	bfs_rdplus_listed(&r, 2);
	assert_int_equal(atomic_load(&r.listed), (BFS_RDPLUS_WINDOW + 2) / 2);
	assert_int_equal(atomic_load(&r.used), 500);
}

static void test_reader_change_followed(void **state)
{
	struct bfs_rdplus r;

	(void)state;
	bfs_rdplus_init(&r, true);
	/* grep -r: every file listed is opened */
	for (int i = 0; i < 100; i++) {
		bfs_rdplus_listed(&r, 50);
		bfs_rdplus_used(&r, 50);
	}
	assert_false(bfs_rdplus_names_suffice(&r));
	/* then find: names only; within a few windows the mount gives names alone */
	for (int i = 0; i < 4 * (int)BFS_RDPLUS_WINDOW / 50 && !bfs_rdplus_names_suffice(&r); i++)
		bfs_rdplus_listed(&r, 50);
	assert_true(bfs_rdplus_names_suffice(&r));
}

static void test_uses_bounded(void **state)
{
	struct bfs_rdplus r;

	(void)state;
	bfs_rdplus_init(&r, true);
	for (int i = 0; i < 100; i++)
		bfs_rdplus_used(&r, 1000);
	/* counted while below twice the window, then not at all */
	assert_true(atomic_load(&r.used) >= 2 * BFS_RDPLUS_WINDOW);
	assert_true(atomic_load(&r.used) < 2 * BFS_RDPLUS_WINDOW + 1000);
	/* so a long run of opens alone is forgotten within a few windows of listings */
	for (int i = 0; i < 3; i++)
		bfs_rdplus_listed(&r, BFS_RDPLUS_WINDOW);
	assert_true(atomic_load(&r.used) <= (2 * BFS_RDPLUS_WINDOW + 1000) / 4);
}

static void *count_thread(void *arg)
{
	struct bfs_rdplus *r = arg;

	for (int i = 0; i < 20000; i++) {
		bfs_rdplus_listed(r, 3);
		bfs_rdplus_used(r, 2);
		(void)bfs_rdplus_names_suffice(r);
	}
	return NULL;
}

/* Names-only replies look for big files to walk on a young mount or one whose files are used. */
static void test_walk_ahead(void **state)
{
	struct bfs_rdplus r;

	(void)state;
	bfs_rdplus_init(&r, true);
	assert_true(bfs_rdplus_walk_ahead(&r)); /* ls -l of a first directory */
	bfs_rdplus_listed(&r, BFS_RDPLUS_WINDOW / 4 - 1);
	assert_true(bfs_rdplus_walk_ahead(&r));
	bfs_rdplus_listed(&r, 1); /* a find's first thousand files */
	assert_false(bfs_rdplus_walk_ahead(&r));
	bfs_rdplus_used(&r, 1); /* someone opens what is listed */
	assert_true(bfs_rdplus_walk_ahead(&r));
}

static void test_threads(void **state)
{
	struct bfs_rdplus r;
	pthread_t t[4];

	(void)state;
	bfs_rdplus_init(&r, true);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, count_thread, &r), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	/* racing halvings forget a little more, never count past the bounds */
	assert_true(atomic_load(&r.listed) <= 2 * BFS_RDPLUS_WINDOW);
	assert_true(atomic_load(&r.used) <= 2 * BFS_RDPLUS_WINDOW + 2 * 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_off_never_names_alone),
		cmocka_unit_test(test_fresh_mount_names_alone),
		cmocka_unit_test(test_half_used_gives_attributes),
		cmocka_unit_test(test_window_halves_both),
		cmocka_unit_test(test_reader_change_followed),
		cmocka_unit_test(test_uses_bounded),
		cmocka_unit_test(test_walk_ahead),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
