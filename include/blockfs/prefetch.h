/* SPDX-License-Identifier: MIT */
/*
 * Read-ahead: a fixed pool of worker threads that decode blocks into the
 * cache before a reader asks for them. FUSE threads only ever *try* to
 * queue work: a full queue means the work is skipped, never waited for.
 */
#ifndef BLOCKFS_PREFETCH_H
#define BLOCKFS_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"

struct bfs_prefetch;
struct bfs_file;

/* @workers threads (0: read-ahead off), a queue of @queue_len blocks. */
BFS_MUST_CHECK int bfs_prefetch_new(struct bfs_prefetch **out, unsigned int workers,
				    size_t queue_len);
/* Stop the workers, drop queued work. NULL is a no-op. */
void bfs_prefetch_free(struct bfs_prefetch *p);

/**
 * bfs_prefetch_range() - queue the blocks of @f covering [@off, @off + @len).
 * Skips blocks already cached or loading. Never blocks; stops at the first
 * block the queue has no room for.
 * Return: blocks queued.
 * Context: any thread, FUSE threads included.
 */
size_t bfs_prefetch_range(struct bfs_prefetch *p, struct bfs_file *f, uint64_t off, uint64_t len);

/**
 * bfs_prefetch_willneed() - decode all of [@off, @off + @len) of @f ahead.
 * Unlike bfs_prefetch_range(), covers a range of any length: the workers
 * queue it a part at a time. With @push_ino, each decoded block goes to
 * the kernel's page cache of that FUSE inode (env->push) instead of
 * staying in blockfs's cache. Never blocks. Return: 1 if queued.
 */
size_t bfs_prefetch_willneed(struct bfs_prefetch *p, struct bfs_file *f, uint64_t off,
			     uint64_t len, uint64_t push_ino);

/* Queue pre-faulting @f's mapping (populate=async). Never blocks. */
bool bfs_prefetch_populate(struct bfs_prefetch *p, struct bfs_file *f);

#endif
