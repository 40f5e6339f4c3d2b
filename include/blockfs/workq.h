/* SPDX-License-Identifier: MIT */
/*
 * A generic work queue: a fixed pool of threads running jobs that are a
 * function and the structure it is embedded in (erofs-utils' workqueue).
 * Knows nothing of files, blocks or FUSE; read-ahead, pushing decoded
 * pages, measuring block sizes and blockfs-pack all queue their work here.
 *
 * Submitters only *try* to queue: a full queue says no at once, so a FUSE
 * thread never waits for a worker. bfs_workq_for() is the exception that
 * proves the rule: its caller does the work itself and borrows idle
 * workers, so it never waits for a job that has not started.
 */
#ifndef BLOCKFS_WORKQ_H
#define BLOCKFS_WORKQ_H

#include <stdbool.h>
#include <stddef.h>

#include "blockfs/common.h"

struct bfs_workq;

/* One job: embed it, set fn, queue it. fn owns the job once it runs. */
struct bfs_work {
	struct bfs_work *next; /* private to workq.c */
	void (*fn)(struct bfs_work *w);
};

/**
 * bfs_workq_new() - start @nthreads workers with room for @cap queued jobs.
 * @on_start: run once in each worker before its first job (per-thread
 *            state), or NULL.
 * @nthreads 0 makes a queue that takes no jobs (every try says no).
 * Return: 0, -ENOMEM or -EAGAIN (threads).
 */
BFS_MUST_CHECK int bfs_workq_new(struct bfs_workq **out, unsigned int nthreads, size_t cap,
				 void (*on_start)(void));

/*
 * Stop: jobs still queued run first (each owns resources only fn releases),
 * then the workers exit. NULL is a no-op.
 */
void bfs_workq_free(struct bfs_workq *wq);

/**
 * bfs_workq_try() - queue @w unless the queue is full, stopping or has no
 * workers. Return: true when queued (fn will run exactly once).
 * Context: any thread; never blocks for long.
 */
BFS_MUST_CHECK bool bfs_workq_try(struct bfs_workq *wq, struct bfs_work *w);

/**
 * bfs_workq_offer() - bfs_workq_try(), but false at once, without waiting,
 * when another thread holds the queue. For a thread a reader waits on:
 * a worker at nice 19 that holds the queue while a reader's program has
 * its core can keep it for milliseconds (the tripwire READs of md5sum).
 */
BFS_MUST_CHECK bool bfs_workq_offer(struct bfs_workq *wq, struct bfs_work *w);

/**
 * bfs_workq_cancel() - take @w back out of the queue if it has not started.
 * Return: true when taken back (fn will not run); false when it has started
 * or run, or was never queued.
 */
BFS_MUST_CHECK bool bfs_workq_cancel(struct bfs_workq *wq, struct bfs_work *w);

/* Workers in the pool (0 for a NULL queue). */
unsigned int bfs_workq_threads(const struct bfs_workq *wq);

/**
 * bfs_workq_for() - run @fn(@arg, i) for every i in [0, @n), in parallel.
 * The caller runs items itself and offers the rest to idle workers; a
 * worker that has not started by the time the caller runs out of items is
 * taken back. Returns when every item has run.
 * @wq: NULL runs everything in the caller.
 * Context: any thread, but not from a job of @wq itself (it would wait for
 * its own pool).
 */
void bfs_workq_for(struct bfs_workq *wq, size_t n, void (*fn)(void *arg, size_t i), void *arg);

#endif
