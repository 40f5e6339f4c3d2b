/* SPDX-License-Identifier: MIT */
/* The inode table within -o max_inodes (trim.c). Private to the mount's modules. */
#ifndef BLOCKFS_TRIM_H
#define BLOCKFS_TRIM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "blockfs/common.h"

struct bfs_fs;
struct bfs_inode;

/* Directories recently looked in, oldest forgotten first past -o max_inodes (trim.c). */
#define BFS_TRIM_RING 1024

struct bfs_trim {
	bool running; /* set before the session runs, cleared after */
	pthread_t thread;
	pthread_mutex_t lock; /* a leaf: the ring and the flags below */
	pthread_cond_t cond;
	bool want, stop;
	atomic_uint_fast64_t lookups; /* counted to look at the table's size now and then */
	struct {
		dev_t dev;
		ino_t ino;
	} ring[BFS_TRIM_RING];
	size_t next, n; /* the slot the next one takes; how many are there */
};

/* Start the thread that keeps the table within max_inodes (none when 0). */
BFS_MUST_CHECK int bfs_trim_start(struct bfs_fs *fs);
/* Stop it: before the table is freed. */
void bfs_trim_stop(struct bfs_fs *fs);
/* A LOOKUP or a listing in directory @dir: the newest in the ring now. */
void bfs_trim_note(struct bfs_fs *fs, struct bfs_inode *dir);
/* After a LOOKUP added to the table: wake the thread if it is over the bound. */
void bfs_trim_poke(struct bfs_fs *fs);

#endif
