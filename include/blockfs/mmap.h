/* SPDX-License-Identifier: MIT */
/*
 * The mmap read path: one persistent read-only mapping per file version,
 * made on first need and shared by every open and thread, never one per
 * block. Live mappings are bounded; the least recently used idle one is
 * unmapped when the bound is reached.
 *
 * A backing file that shrinks under its mapping turns the next touch of a
 * lost page into SIGBUS. Decoding from a mapping is therefore done under a
 * per-thread guard: the handler jumps back to the guard only when the
 * fault lies in the range the guard covers, and anything else still
 * crashes as it should.
 */
#ifndef BLOCKFS_MMAP_H
#define BLOCKFS_MMAP_H

#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"

struct bfs_file;
struct bfs_maps;

enum bfs_populate { BFS_POPULATE_OFF, BFS_POPULATE_ON, BFS_POPULATE_ASYNC };

BFS_MUST_CHECK int bfs_maps_new(struct bfs_maps **out, size_t max_live, int populate);
void bfs_maps_free(struct bfs_maps *m);	/* NULL is a no-op; every version is gone */

/**
 * bfs_map_enter() - the bytes of @f's backing file, mapped on first use.
 * Return: the mapping's base, to be paired with bfs_map_exit(); NULL when
 * the file cannot be mapped (empty, failed before): read with pread.
 * Context: any thread; takes the maps lock only to map or unmap.
 */
const uint8_t *bfs_map_enter(struct bfs_maps *m, struct bfs_file *f);
void bfs_map_exit(struct bfs_file *f);

/* @f's mapping faulted: use pread for it from now on. */
void bfs_map_fail(struct bfs_file *f);
/* @f is being freed: unmap it. */
void bfs_map_drop(struct bfs_maps *m, struct bfs_file *f);
/* Pre-fault @f's mapping in order (populate=async; a worker thread). */
void bfs_map_populate(struct bfs_file *f);

/* Live mappings now (for tests and stats). */
size_t bfs_maps_live(struct bfs_maps *m);

/* The SIGBUS guard of the calling thread. */
struct bfs_guard {
	sigjmp_buf env;
	const volatile uint8_t *lo, *hi;	/* faults in [lo, hi) jump to env */
	volatile sig_atomic_t armed;
};

struct bfs_guard *bfs_guard_get(void);
/* Install the SIGBUS handler once per process. 0 or -errno. */
int bfs_sigbus_init(void);

#endif
