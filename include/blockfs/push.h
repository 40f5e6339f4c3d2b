/* SPDX-License-Identifier: MIT */
/*
 * Decoding ahead, on the work queue: a job decodes a range of a file's
 * blocks (through the block cache, so a reader asking for the same blocks
 * waits for this decode instead of doing its own) and hands the bytes to
 * the kernel's page cache of the file (env->push, notify_store), so that
 * the reader's read(2) calls find them there and never reach the daemon.
 * Without a push target the blocks stay in the block cache instead.
 *
 * The kernel marks a page up to date only when one message fills it, and
 * libfuse sends a message of one buffer without copying it: so the range
 * is cut into page-aligned slices, each inside one decoded block, and the
 * page two blocks share goes through a page-sized bounce buffer.
 *
 * Never from a READ handler, or from a thread a READ waits for: the
 * kernel holds a READ's pages locked, and a push into them waits for its
 * reply. A job marks every block it decodes ready before it pushes, so a
 * READ that waits for one of its blocks never waits for its push.
 */
#ifndef BLOCKFS_PUSH_H
#define BLOCKFS_PUSH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "blockfs/common.h"

struct bfs_file;
struct bfs_workq;

/* The page size notify_store works in. */
#define BFS_PAGE 4096u

/*
 * What a stream shares with the jobs it queued, so that they can tell
 * whether their range is still wanted. Refcounted: jobs may outlive the
 * stream.
 */
struct bfs_push_window {
	atomic_uint refs;
	atomic_uint gen;	     /* bumped when the reader jumps: older jobs stop */
	atomic_uint_fast64_t served; /* the kernel asked (READ) for bytes below this */
	/*
	 * The bytes of the last tripwire a job left out, copied as it pushed
	 * the pages around it: the READ that trips finds them here, not in a
	 * block that may have left the cache (a 24 MiB xz block would be
	 * decoded again for one page). A version's bytes at an offset never
	 * change, so the offset alone says whose they are.
	 */
	pthread_mutex_t lock; /* protects the three below; a leaf */
	uint64_t trip_off;
	uint32_t trip_len; /* 0: none */
	uint8_t trip[BFS_PAGE];
	/*
	 * The reader goes only forward, as its last READ found
	 * (bfs_window_once()): what is decoded for it now it reads once.
	 */
	atomic_bool once;
};

struct bfs_push_window *bfs_push_window_new(void);
void bfs_push_window_put(struct bfs_push_window *w); /* NULL is a no-op */

/*
 * bfs_push_window_keep() - keep in @w the bytes of the tripwire [@hole,
 * @hole_to) (at most a page) from the buffers @buf of [at[0], at[@n]), as
 * bfs_push_slice() takes them; nothing when the tripwire is not wholly
 * in that range.
 */
void bfs_push_window_keep(struct bfs_push_window *w, const uint64_t *at, uint8_t *const *buf,
			  size_t n, uint64_t hole, uint64_t hole_to);

/**
 * bfs_push_window_trip() - copy [@off, @off + @len) into @buf if @w holds
 * those bytes of the last tripwire. Return: true when it did.
 */
bool bfs_push_window_trip(struct bfs_push_window *w, uint64_t off, size_t len, void *buf);

/* One range to decode ahead. */
struct bfs_push_req {
	struct bfs_file *f;	     /* the caller holds a use of its descriptor */
	uint64_t ino;		     /* FUSE inode to push to; 0: keep in the block cache */
	uint64_t from, to;	     /* page-aligned, or @to is the file's size */
	uint64_t hole, hole_to;	     /* pages not to push: a tripwire, the pages of a READ */
	struct bfs_push_window *win; /* NULL: wanted whatever happens */
	unsigned int gen;	     /* @win's generation when queued */
};

/**
 * bfs_push_try() - queue @req on @wq. Takes a reference to the file, a use
 * of its descriptor and a reference to the window for the job.
 * Return: true when queued. Never blocks: false also when another thread
 * holds the queue (bfs_workq_offer()).
 */
BFS_MUST_CHECK bool bfs_push_try(struct bfs_workq *wq, const struct bfs_push_req *req);

/**
 * bfs_push_run() - what a job does, in the calling thread: decode
 * [@req->from, @req->to) and push it (or keep it cached).
 * Return: bytes pushed, or -errno from decoding or the push.
 */
BFS_MUST_CHECK ssize_t bfs_push_run(const struct bfs_push_req *req);

/**
 * bfs_push_block() - a random reader read blocks covering [@from, @to) of
 * @f again: decode them whole and push them to FUSE inode @ino, but the
 * pages of the READ [@rfrom, @rto) being served, so that the reads that
 * follow into those blocks never reach the daemon. Return: true if queued.
 */
bool bfs_push_block(struct bfs_workq *wq, struct bfs_file *f, uint64_t ino, uint64_t from,
		    uint64_t to, uint64_t rfrom, uint64_t rto);

/**
 * bfs_push_willneed() - decode all of [@off, @off + @len) of @f ahead and
 * push it to FUSE inode @ino (0: keep it cached), however long the range:
 * a few jobs share it, chunk by chunk. For the willneed hint.
 * Return: jobs queued. Never blocks.
 */
size_t bfs_push_willneed(struct bfs_workq *wq, struct bfs_file *f, uint64_t ino, uint64_t off,
			 uint64_t len);

/* Bytes one job decodes: whole pages, at least a block. */
uint64_t bfs_push_chunk(const struct bfs_file *f);

/* --- slicing (push.c; exposed for the unit tests) ------------------------- */

/*
 * A decoded range as segments: segment i holds bytes [at[i], at[i + 1]) of
 * the file in buf[i]. Calls @emit(@ctx, off, p, len) with page-aligned
 * slices that each lie in one buffer, or in @bounce (BFS_PAGE bytes) for
 * a page that spans buffers, covering [at[0], at[n]) but the pages in
 * [@hole, @hole_to) (page-aligned; empty when equal). at[0] is page-aligned; at[n] is too unless it is
 * the end of the file, where the last slice ends in a partial page.
 * @emit returns 0 when it pushed the slice, 1 when it let it go, -errno
 * when it failed; the first failure stops the slicing.
 * Return: bytes pushed, or that failure.
 */
BFS_MUST_CHECK ssize_t bfs_push_slice(const uint64_t *at, uint8_t *const *buf, size_t n,
				      uint64_t hole, uint64_t hole_to, uint8_t *bounce,
				      int (*emit)(void *ctx, uint64_t off, const uint8_t *p,
						  size_t len),
				      void *ctx);

#endif
