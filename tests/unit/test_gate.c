// SPDX-License-Identifier: MIT
/*
 * Unit tests of the gate: entering while open, refused once shut, and
 * shutting waits for whoever is inside, also while threads keep trying
 * to enter. Threaded: tools/test.sh also runs this under ThreadSanitizer.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "blockfs/gate.h"

static void test_open_then_shut(void **state)
{
	struct bfs_gate g = { 0 };

	(void)state;
	assert_true(bfs_gate_enter(&g));
	assert_true(bfs_gate_enter(&g));
	bfs_gate_leave(&g);
	bfs_gate_leave(&g);
	bfs_gate_shut(&g, "tests");
	assert_false(bfs_gate_enter(&g));
	assert_false(bfs_gate_enter(&g));
	bfs_gate_shut(&g, "tests"); /* again: nobody inside, returns */
	assert_int_equal(atomic_load(&g.n), BFS_GATE_SHUT);
}

struct visitor {
	struct bfs_gate *g;
	atomic_int inside; /* visitors between enter and leave */
	atomic_int passed, refused;
	atomic_bool entered_once;
	int stay_ms;
};

static void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* Enter and leave until refused, staying @stay_ms inside each time. */
static void *visit(void *arg)
{
	struct visitor *v = arg;

	while (bfs_gate_enter(v->g)) {
		atomic_fetch_add(&v->inside, 1);
		atomic_store(&v->entered_once, true);
		sleep_ms(v->stay_ms);
		atomic_fetch_add(&v->passed, 1);
		atomic_fetch_sub(&v->inside, 1);
		bfs_gate_leave(v->g);
	}
	atomic_fetch_add(&v->refused, 1);
	return NULL;
}

static void test_shut_waits_for_those_inside(void **state)
{
	struct bfs_gate g = { 0 };
	struct visitor v = { .g = &g, .stay_ms = 20 };
	pthread_t t[4];

	(void)state;
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, visit, &v), 0);
	while (!atomic_load(&v.entered_once))
		sleep_ms(1);
	bfs_gate_shut(&g, "tests");
	assert_int_equal(atomic_load(&v.inside), 0); /* nobody left inside */
	for (size_t i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&v.refused), 4); /* each thread was turned away */
	assert_true(atomic_load(&v.passed) >= 1);
	assert_false(bfs_gate_enter(&g));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_then_shut),
		cmocka_unit_test(test_shut_waits_for_those_inside),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
