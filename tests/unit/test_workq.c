// SPDX-License-Identifier: MIT
/*
 * Unit tests of the work queue: jobs run once each, a full queue says no,
 * cancel takes back only what has not started, free runs what is still
 * queued, and bfs_workq_for() runs every item once whether or not the
 * workers are free to help. Threaded: tools/test.sh also runs this under
 * ThreadSanitizer.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/workq.h"

struct counted {
	struct bfs_work work;
	atomic_int *runs;
};

static void count_run(struct bfs_work *w)
{
	atomic_fetch_add(((struct counted *)w)->runs, 1);
}

/* A job that holds its worker until the test opens the gate. */
struct gate {
	struct bfs_work work;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool started, open;
};

static void gate_run(struct bfs_work *w)
{
	struct gate *g = (struct gate *)w;

	pthread_mutex_lock(&g->lock);
	g->started = true;
	pthread_cond_broadcast(&g->cond);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static void gate_init(struct gate *g)
{
	memset(g, 0, sizeof(*g));
	g->work.fn = gate_run;
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
}

static void gate_wait_started(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	while (!g->started)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

static void gate_destroy(struct gate *g)
{
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

static void test_every_job_runs_once(void **state)
{
	struct bfs_workq *wq;
	struct counted jobs[200];
	atomic_int runs = 0;

	(void)state;
	assert_int_equal(bfs_workq_new(&wq, 3, 1000, NULL), 0);
	for (size_t i = 0; i < 200; i++) {
		jobs[i] = (struct counted){ .work.fn = count_run, .runs = &runs };
		assert_true(bfs_workq_try(wq, &jobs[i].work));
	}
	bfs_workq_free(wq); /* runs what is left, then joins */
	assert_int_equal(atomic_load(&runs), 200);
}

/* With one worker held and room for 2, @queue takes two jobs and refuses a third. */
static void full_queue_says_no(bool (*queue)(struct bfs_workq *, struct bfs_work *))
{
	struct bfs_workq *wq;
	struct counted jobs[3];
	struct gate g;
	atomic_int runs = 0;

	gate_init(&g);
	assert_int_equal(bfs_workq_new(&wq, 1, 2, NULL), 0);
	/* try: a worker that is starting holds the lock, and offer would say no */
	assert_true(bfs_workq_try(wq, &g.work));
	gate_wait_started(&g); /* the one worker is held; the queue is empty */
	for (size_t i = 0; i < 3; i++)
		jobs[i] = (struct counted){ .work.fn = count_run, .runs = &runs };
	assert_true(queue(wq, &jobs[0].work));
	assert_true(queue(wq, &jobs[1].work));
	assert_false(queue(wq, &jobs[2].work)); /* cap 2 */
	gate_open(&g);
	bfs_workq_free(wq);
	assert_int_equal(atomic_load(&runs), 2);
	gate_destroy(&g);
}

static void test_full_queue_says_no(void **state)
{
	(void)state;
	full_queue_says_no(bfs_workq_try);
}

/*
 * offer is try without waiting for the queue's lock: the same answers when
 * nobody holds it (whether some thread does cannot be arranged from here).
 */
static void test_offer_queues_as_try(void **state)
{
	struct bfs_work w = { 0 };

	(void)state;
	assert_false(bfs_workq_offer(NULL, &w));
	full_queue_says_no(bfs_workq_offer);
}

static void test_cancel_takes_back_only_queued(void **state)
{
	struct bfs_workq *wq;
	struct counted a, b, c;
	struct gate g;
	atomic_int runs = 0;

	(void)state;
	gate_init(&g);
	assert_int_equal(bfs_workq_new(&wq, 1, 8, NULL), 0);
	assert_true(bfs_workq_try(wq, &g.work));
	gate_wait_started(&g);
	a = (struct counted){ .work.fn = count_run, .runs = &runs };
	b = a;
	c = a;
	assert_true(bfs_workq_try(wq, &a.work));
	assert_true(bfs_workq_try(wq, &b.work));
	assert_true(bfs_workq_try(wq, &c.work));
	assert_false(bfs_workq_cancel(wq, &g.work)); /* running */
	assert_true(bfs_workq_cancel(wq, &c.work));  /* the tail */
	assert_true(bfs_workq_cancel(wq, &a.work));  /* the head */
	assert_false(bfs_workq_cancel(wq, &a.work)); /* gone already */
	/* the tail moved twice: a job queued now must still run */
	assert_true(bfs_workq_try(wq, &c.work));
	gate_open(&g);
	bfs_workq_free(wq);
	assert_int_equal(atomic_load(&runs), 2); /* b and c */
	gate_destroy(&g);
}

static void test_no_workers_takes_nothing(void **state)
{
	struct bfs_workq *wq;
	struct counted a = { .work.fn = count_run };

	(void)state;
	assert_int_equal(bfs_workq_new(&wq, 0, 8, NULL), 0);
	assert_false(bfs_workq_try(wq, &a.work));
	assert_int_equal(bfs_workq_threads(wq), 0);
	bfs_workq_free(wq);
	assert_false(bfs_workq_try(NULL, &a.work));
	bfs_workq_free(NULL);
}

static atomic_int started;

static void on_start(void)
{
	atomic_fetch_add(&started, 1);
}

static void test_on_start_runs_per_worker(void **state)
{
	struct bfs_workq *wq;

	(void)state;
	atomic_store(&started, 0);
	assert_int_equal(bfs_workq_new(&wq, 4, 8, on_start), 0);
	bfs_workq_free(wq);
	assert_int_equal(atomic_load(&started), 4);
}

#define ITEMS 5000

struct marks {
	atomic_uchar seen[ITEMS];
	pthread_t caller;
	atomic_bool helped;
};

static void mark(void *arg, size_t i)
{
	struct marks *m = arg;

	atomic_fetch_add(&m->seen[i], 1);
	if (!pthread_equal(pthread_self(), m->caller))
		atomic_store(&m->helped, true);
}

static void assert_each_once(struct marks *m)
{
	for (size_t i = 0; i < ITEMS; i++)
		assert_int_equal(atomic_load(&m->seen[i]), 1);
}

static void test_for_runs_each_item_once(void **state)
{
	struct bfs_workq *wq;
	struct marks *m = calloc(1, sizeof(*m));

	(void)state;
	assert_non_null(m);
	m->caller = pthread_self();
	assert_int_equal(bfs_workq_new(&wq, 3, 16, NULL), 0);
	for (int round = 0; round < 20; round++) {
		memset(m->seen, 0, sizeof(m->seen));
		bfs_workq_for(wq, ITEMS, mark, m);
		assert_each_once(m);
	}
	bfs_workq_free(wq);
	free(m);
}

/* Every worker busy: the caller does it all and takes its offers back. */
static void test_for_with_busy_workers(void **state)
{
	struct bfs_workq *wq;
	struct marks *m = calloc(1, sizeof(*m));
	struct gate g;

	(void)state;
	assert_non_null(m);
	m->caller = pthread_self();
	gate_init(&g);
	assert_int_equal(bfs_workq_new(&wq, 1, 16, NULL), 0);
	assert_true(bfs_workq_try(wq, &g.work));
	gate_wait_started(&g);
	bfs_workq_for(wq, ITEMS, mark, m); /* must not wait for the gate */
	assert_each_once(m);
	assert_false(atomic_load(&m->helped));
	gate_open(&g);
	bfs_workq_free(wq);
	gate_destroy(&g);
	free(m);
}

static void test_for_without_queue(void **state)
{
	struct marks *m = calloc(1, sizeof(*m));

	(void)state;
	assert_non_null(m);
	m->caller = pthread_self();
	bfs_workq_for(NULL, ITEMS, mark, m);
	assert_each_once(m);
	bfs_workq_for(NULL, 0, mark, m); /* nothing, and no call */
	assert_each_once(m);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_job_runs_once),
		cmocka_unit_test(test_full_queue_says_no),
		cmocka_unit_test(test_offer_queues_as_try),
		cmocka_unit_test(test_cancel_takes_back_only_queued),
		cmocka_unit_test(test_no_workers_takes_nothing),
		cmocka_unit_test(test_on_start_runs_per_worker),
		cmocka_unit_test(test_for_runs_each_item_once),
		cmocka_unit_test(test_for_with_busy_workers),
		cmocka_unit_test(test_for_without_queue),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
