/* SPDX-License-Identifier: MIT */
/* blockfs's FUSE session loop (loop.c): one reader of /dev/fuse at a time. */
#ifndef BLOCKFS_LOOP_H
#define BLOCKFS_LOOP_H

#include <fuse_lowlevel.h>
#include <stdbool.h>

/* libfuse's own default for its multi-threaded loop */
#define BFS_LOOP_MAX_THREADS 10

struct bfs_loop_conf {
	unsigned int max_threads;  /* threads answering requests, at most */
	unsigned int busy_poll_us; /* the longest the reader polls before it sleeps */
	bool remote;		   /* SOURCE's filesystem may make any access wait
					   (NFS, FUSE): every request hands over */
	/*
	 * On SIGINT, SIGTERM or SIGHUP, called with @stop_arg while requests
	 * are still answered, before the loop ends; or NULL.
	 */
	void (*on_stop)(void *stop_arg);
	void *stop_arg;
};

/**
 * bfs_loop_run() - answer @se's requests until it is unmounted or the
 * process gets SIGINT, SIGTERM or SIGHUP.
 * Return: 0, or -errno from reading /dev/fuse (-ECONNABORTED: see main.c).
 * Context: the calling thread waits for signals; requests are answered
 * by threads the loop starts and joins.
 */
int bfs_loop_run(struct fuse_session *se, const struct bfs_loop_conf *conf);

#endif
