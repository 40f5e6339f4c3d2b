// SPDX-License-Identifier: MIT
/*
 * Unit tests of the parked-decoder budget (park.h): charges and releases
 * add up, over() compares the count plus what is asked for with the
 * budget, and set_budget() returns the budget it replaces. Threads that
 * charge and release at once leave the count where it started.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "blockfs/park.h"

static void test_default_budget(void **state)
{
	(void)state;
	assert_int_equal(bfs_parked_bytes(), 0);
	assert_false(bfs_park_over(BFS_PARK_BUDGET));
	assert_true(bfs_park_over(BFS_PARK_BUDGET + 1));
}

static void test_charge_release(void **state)
{
	size_t old;

	(void)state;
	old = bfs_park_set_budget(100);
	assert_int_equal(old, BFS_PARK_BUDGET);
	bfs_park_charge(60);
	assert_int_equal(bfs_parked_bytes(), 60);
	assert_false(bfs_park_over(0));
	assert_false(bfs_park_over(40));
	assert_true(bfs_park_over(41));
	bfs_park_charge(50);
	assert_int_equal(bfs_parked_bytes(), 110);
	assert_true(bfs_park_over(0));
	bfs_park_release(60);
	assert_int_equal(bfs_parked_bytes(), 50);
	assert_false(bfs_park_over(0));
	bfs_park_release(50);
	assert_int_equal(bfs_parked_bytes(), 0);
	/* A budget of 0: nothing more fits, an empty count is not over. */
	assert_int_equal(bfs_park_set_budget(0), 100);
	assert_false(bfs_park_over(0));
	assert_true(bfs_park_over(1));
	assert_int_equal(bfs_park_set_budget(old), 0);
}

static void *churn(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100000; i++) {
		bfs_park_charge(7);
		bfs_park_release(7);
	}
	return NULL;
}

static void test_threads(void **state)
{
	pthread_t t[4];

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, churn, NULL), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(bfs_parked_bytes(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_budget),
		cmocka_unit_test(test_charge_release),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
