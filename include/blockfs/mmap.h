/* SPDX-License-Identifier: MIT */
/*
 * The mmap read path: one persistent read-only mapping per file version,
 * made on first need and shared by every open and thread, never one per
 * block. Live mappings are bounded; the least recently used idle one is
 * unmapped when the bound is reached. Knows mappings, not file versions:
 * the caller passes the descriptor, and logs and counts.
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
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"

struct bfs_maps;

enum bfs_populate { BFS_POPULATE_OFF, BFS_POPULATE_ON, BFS_POPULATE_ASYNC };

/*
 * One backing file's mapping, embedded in whatever owns the file (a file
 * version, file.h). mmap.c knows mappings, descriptors and lengths only.
 */
struct bfs_map {
	_Atomic(const uint8_t *) base; /* NULL while unmapped */
	atomic_int users;	       /* threads inside it; negative while being unmapped */
	atomic_uint_fast64_t used;     /* tick of the last entry, for eviction */
	atomic_bool failed;	       /* faulted, or could not be made: pread from now on */
	size_t len;		       /* bytes to map */
	struct bfs_map *prev, *next;   /* live list; protected by the maps lock */
};

BFS_MUST_CHECK int bfs_maps_new(struct bfs_maps **out, size_t max_live, int populate);
void bfs_maps_free(struct bfs_maps *m); /* NULL is a no-op; every mapping is dropped */
/* Is pre-faulting asked for in the background (populate=async)? */
bool bfs_maps_populate_async(const struct bfs_maps *m);

/* An unmapped mapping of @len bytes. */
void bfs_map_init(struct bfs_map *map, size_t len);

/**
 * bfs_map_enter() - the @map->len bytes of @fd, mapped on first use.
 * @advice: madvise(2) advice for a new mapping (-1: MADV_NORMAL).
 * @made:   set to 1 when this call made the mapping (the caller counts the
 *          system call, and may queue pre-faulting), to -errno when this
 *          call failed to make it (the caller logs why), else to 0.
 * Return: the mapping's base, to be paired with bfs_map_exit(); NULL when
 * it cannot be mapped (empty, failed before): read with pread.
 * Context: any thread; takes the maps lock only to map or unmap.
 */
const uint8_t *bfs_map_enter(struct bfs_maps *m, struct bfs_map *map, int fd, int advice,
			     int *made);
void bfs_map_exit(struct bfs_map *map);

/* Is @map mapped now? (A hint is no reason to map a file.) */
bool bfs_map_live(struct bfs_map *map);

/* @map faulted: use pread from now on. Return: true the first time (log it). */
bool bfs_map_fail(struct bfs_map *map);
/* The owner of @map is going: unmap it. */
void bfs_map_drop(struct bfs_maps *m, struct bfs_map *map);
/**
 * bfs_map_populate() - pre-fault the mapping at @base (entered) in order.
 * Return: 0, or -EIO when a page was lost (SIGBUS: the file shrank).
 */
BFS_MUST_CHECK int bfs_map_populate(struct bfs_map *map, const uint8_t *base);

/* Live mappings now (for tests and stats). */
size_t bfs_maps_live(struct bfs_maps *m);

/* The SIGBUS guard of the calling thread. */
struct bfs_guard {
	sigjmp_buf env;
	const volatile uint8_t *lo, *hi; /* faults in [lo, hi) jump to env */
	volatile sig_atomic_t armed;
};

struct bfs_guard *bfs_guard_get(void);
/* Install the SIGBUS handler once per process. 0 or -errno. */
BFS_MUST_CHECK int bfs_sigbus_init(void);

#endif
