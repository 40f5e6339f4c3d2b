// SPDX-License-Identifier: MIT
/*
 * The work queue (contract in workq.h): a FIFO of embedded jobs under one
 * mutex, and a fixed pool of threads. The lock is held only to link and
 * unlink jobs, never while one runs.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "blockfs/workq.h"

struct bfs_workq {
	pthread_mutex_t lock;	       /* protects everything below but threads */
	pthread_cond_t work;	       /* a job was queued, or stop */
	struct bfs_work *head, **tail; /* FIFO; tail points at the last next */
	size_t count, cap;
	bool stop;
	unsigned int nthreads;
	pthread_t *threads;
	void (*on_start)(void);
};

static void *worker(void *arg)
{
	struct bfs_workq *wq = arg;
	struct bfs_work *w;

	if (wq->on_start)
		wq->on_start();
	bfs_mutex_lock(&wq->lock);
	for (;;) {
		while (!wq->head && !wq->stop)
			pthread_cond_wait(&wq->work, &wq->lock);
		w = wq->head;
		if (!w)
			break; /* stopping, and drained */
		wq->head = w->next;
		if (!wq->head)
			wq->tail = &wq->head;
		wq->count--;
		bfs_mutex_unlock(&wq->lock);
		w->fn(w); /* may free w */
		bfs_mutex_lock(&wq->lock);
	}
	bfs_mutex_unlock(&wq->lock);
	return NULL;
}

int bfs_workq_new(struct bfs_workq **out, unsigned int nthreads, size_t cap, void (*on_start)(void))
{
	struct bfs_workq *wq = calloc(1, sizeof(*wq));
	int rc = -ENOMEM;

	if (!wq)
		return -ENOMEM;
	bfs_mutex_init(&wq->lock);
	pthread_cond_init(&wq->work, NULL);
	wq->tail = &wq->head;
	wq->cap = cap ? cap : 1;
	wq->on_start = on_start;
	wq->threads = calloc(nthreads ? nthreads : 1, sizeof(*wq->threads));
	if (!wq->threads)
		goto out_free;
	for (; wq->nthreads < nthreads; wq->nthreads++) {
		if (pthread_create(&wq->threads[wq->nthreads], NULL, worker, wq) != 0) {
			rc = -EAGAIN;
			goto out_free;
		}
	}
	*out = wq;
	return 0;

out_free:
	bfs_workq_free(wq);
	return rc;
}

void bfs_workq_free(struct bfs_workq *wq)
{
	if (!wq)
		return;
	bfs_mutex_lock(&wq->lock);
	wq->stop = true;
	pthread_cond_broadcast(&wq->work);
	bfs_mutex_unlock(&wq->lock);
	for (unsigned int i = 0; i < wq->nthreads; i++)
		pthread_join(wq->threads[i], NULL);
	pthread_cond_destroy(&wq->work);
	pthread_mutex_destroy(&wq->lock);
	free(wq->threads);
	free(wq);
}

/* Queue @w if there is room; the queue's lock held. */
static bool enqueue(struct bfs_workq *wq, struct bfs_work *w)
{
	if (wq->stop || !wq->nthreads || wq->count >= wq->cap)
		return false;
	w->next = NULL;
	*wq->tail = w;
	wq->tail = &w->next;
	wq->count++;
	pthread_cond_signal(&wq->work);
	return true;
}

bool bfs_workq_offer(struct bfs_workq *wq, struct bfs_work *w)
{
	bool queued;

	if (!wq || pthread_mutex_trylock(&wq->lock) != 0)
		return false;
	queued = enqueue(wq, w);
	bfs_mutex_unlock(&wq->lock);
	return queued;
}

bool bfs_workq_try(struct bfs_workq *wq, struct bfs_work *w)
{
	bool queued;

	if (!wq)
		return false;
	bfs_mutex_lock(&wq->lock);
	queued = enqueue(wq, w);
	bfs_mutex_unlock(&wq->lock);
	return queued;
}

bool bfs_workq_cancel(struct bfs_workq *wq, struct bfs_work *w)
{
	struct bfs_work **pp;
	bool found = false;

	if (!wq)
		return false;
	bfs_mutex_lock(&wq->lock);
	for (pp = &wq->head; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			if (wq->tail == &w->next)
				wq->tail = pp;
			wq->count--;
			found = true;
			break;
		}
	}
	bfs_mutex_unlock(&wq->lock);
	return found;
}

unsigned int bfs_workq_threads(const struct bfs_workq *wq)
{
	return wq ? wq->nthreads : 0;
}

/* --- parallel for ------------------------------------------------------- */

/* Helpers offered to idle workers; more would only wait for items. */
#define FOR_HELPERS_MAX 16

struct par_for;

struct par_helper {
	struct bfs_work work;
	struct par_for *pf;
};

struct par_for {
	void (*fn)(void *arg, size_t i);
	void *arg;
	size_t n;
	atomic_size_t next; /* the next item nobody has taken */
	pthread_mutex_t lock;
	pthread_cond_t idle;  /* a helper finished */
	unsigned int running; /* helpers that started; protected by lock */
	struct par_helper helper[FOR_HELPERS_MAX];
};

static void take_items(struct par_for *pf)
{
	size_t i;

	while ((i = atomic_fetch_add_explicit(&pf->next, 1, memory_order_relaxed)) < pf->n)
		pf->fn(pf->arg, i);
}

static void helper_run(struct bfs_work *w)
{
	struct par_for *pf = ((struct par_helper *)w)->pf;

	take_items(pf);
	bfs_mutex_lock(&pf->lock);
	pf->running--;
	pthread_cond_signal(&pf->idle);
	bfs_mutex_unlock(&pf->lock);
}

void bfs_workq_for(struct bfs_workq *wq, size_t n, void (*fn)(void *arg, size_t i), void *arg)
{
	struct par_for pf = { .fn = fn, .arg = arg, .n = n };
	unsigned int offered = bfs_workq_threads(wq);

	if (offered > FOR_HELPERS_MAX)
		offered = FOR_HELPERS_MAX;
	if (n < 2)
		offered = 0;
	else if (offered > n - 1)
		offered = (unsigned int)(n - 1); /* the caller takes one too */
	atomic_init(&pf.next, 0);
	bfs_mutex_init(&pf.lock);
	pthread_cond_init(&pf.idle, NULL);
	/*
	 * running counts a helper from before it is queued, so that one that
	 * starts and finishes at once cannot be missed; cancel gives it back.
	 */
	for (unsigned int h = 0; h < offered; h++) {
		pf.helper[h] = (struct par_helper){ .work.fn = helper_run, .pf = &pf };
		bfs_mutex_lock(&pf.lock);
		pf.running++;
		bfs_mutex_unlock(&pf.lock);
		if (!bfs_workq_try(wq, &pf.helper[h].work)) {
			bfs_mutex_lock(&pf.lock);
			pf.running--;
			bfs_mutex_unlock(&pf.lock);
			offered = h;
			break;
		}
	}
	take_items(&pf);
	for (unsigned int h = 0; h < offered; h++) {
		if (bfs_workq_cancel(wq, &pf.helper[h].work)) {
			bfs_mutex_lock(&pf.lock);
			pf.running--;
			bfs_mutex_unlock(&pf.lock);
		}
	}
	bfs_mutex_lock(&pf.lock);
	while (pf.running)
		pthread_cond_wait(&pf.idle, &pf.lock);
	bfs_mutex_unlock(&pf.lock);
	pthread_cond_destroy(&pf.idle);
	pthread_mutex_destroy(&pf.lock);
}
