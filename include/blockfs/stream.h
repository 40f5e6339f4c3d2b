/* SPDX-License-Identifier: MIT */
/*
 * One reader of one file (an open handle): the read-ahead policy. It
 * serves the reader's READs through the block fetch (read.c) and, when
 * the reader is sequential, keeps a window of decoded pages ahead of it
 * in the kernel's page cache (push.h), so that its read(2) calls are page
 * cache hits that never reach the daemon.
 *
 * The daemon sees no READ for pushed pages, so it learns where the reader
 * is from a tripwire: the first page of each batch of pushes is left out,
 * and the READ the kernel sends for it when the reader gets there moves
 * the window on. A READ elsewhere (a jump) ends the window: jobs of the
 * old one push nothing more.
 *
 * The first time the reader is sequential, the pushes start one kernel
 * read-ahead window past its READ, because the kernel is already reading
 * up to there and holds those pages locked.
 */
#ifndef BLOCKFS_STREAM_H
#define BLOCKFS_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "blockfs/common.h"

struct bfs_file;
struct bfs_readv;
struct bfs_stream;

/**
 * bfs_stream_new() - a reader of @f, whose pages are FUSE inode @ino's.
 * Takes its own reference to @f. Return: 0 or -ENOMEM.
 */
BFS_MUST_CHECK int bfs_stream_new(struct bfs_stream **out, struct bfs_file *f, uint64_t ino);
/* The handle is done with @s: its pushes stop; freed once no READ holds it. NULL: no-op. */
void bfs_stream_free(struct bfs_stream *s);
/*
 * A READ's hold on @s, taken before its reply: once answered, the READ no
 * longer keeps the kernel from sending the RELEASE that frees the handle,
 * and bfs_stream_ahead() still has to run.
 */
void bfs_stream_hold(struct bfs_stream *s);
void bfs_stream_put(struct bfs_stream *s);
/*
 * A hold on @s and a use of its version's descriptor, for a request on a
 * stream whose handle may be closed while the request runs (-o
 * kernel_open's shared handles; an open handle cannot be, it needs only
 * the hold): the handle's own use must still be there when this is
 * called. bfs_stream_drop() ends both.
 */
void bfs_stream_take(struct bfs_stream *s);
void bfs_stream_drop(struct bfs_stream *s);

/* The file version @s reads. */
struct bfs_file *bfs_stream_file(const struct bfs_stream *s);

/* What to queue after a READ: [from, to) in chunks, leaving out @trip. */
struct bfs_window_plan {
	uint64_t from, to, trip;
};

/* What a READ leaves for after its reply: the pushes it decided on. */
struct bfs_stream_next {
	bool go; /* queue plan, of window generation gen */
	unsigned int gen;
	struct bfs_window_plan plan;
	uint64_t again_from, again_to; /* blocks a reader came back to, to push whole */
	uint64_t rfrom, rto;	       /* but the READ's own bytes */
};

/**
 * bfs_stream_read() - serve a READ of @size bytes at @off (bfs_file_readv()
 * semantics for @rv and the result), and move the read-ahead window: the
 * pushes that follow from it go in @next, for bfs_stream_ahead() once the
 * READ is answered.
 * Context: a FUSE thread; never waits for a push.
 */
BFS_MUST_CHECK ssize_t bfs_stream_read(struct bfs_stream *s, uint64_t off, size_t size,
				       struct bfs_readv *rv, struct bfs_stream_next *next);

/**
 * bfs_stream_ahead() - queue the pushes @next holds. After the reply:
 * waking a read-ahead worker at nice 19 (pthread_cond_signal) can cost
 * the waker a reschedule, and the reader would wait for that on every
 * tripwire READ.
 * Context: the FUSE thread that served the READ, before it lets go of
 * the READ's blocks.
 */
void bfs_stream_ahead(struct bfs_stream *s, const struct bfs_stream_next *next);

/* --- the window's arithmetic (stream.c; exposed for the unit tests) ------- */

struct bfs_window {
	uint64_t next;	  /* where the reader's next READ is expected */
	unsigned int run; /* READs in a row that went on from the last one */
	uint64_t pushed;  /* pushes are queued up to here */
	uint64_t trip;	  /* the page left out as the tripwire, or UINT64_MAX */
	unsigned int gen; /* bumped by a jump */
	unsigned int fwd; /* READs in a row that went past every READ before them */
};

struct bfs_window_cfg {
	uint64_t size;	      /* bytes to keep ahead of the reader */
	uint64_t gap;	      /* the kernel's read-ahead: the first pushes start past it */
	uint64_t eof;	      /* the file's size */
	unsigned int run_min; /* sequential READs before pushing starts (0: at once) */
	uint64_t step; /* a READ moves the window once it can add this much (0: half of it) */
};

void bfs_window_init(struct bfs_window *w);

/**
 * bfs_window_step() - the reader's READ [@off, @end) was served.
 * Return: true with *@plan set when a batch of pushes should be queued
 * (the window's pushed mark already covers it; bfs_window_retreat() if
 * some of it could not be queued).
 */
BFS_MUST_CHECK bool bfs_window_step(struct bfs_window *w, const struct bfs_window_cfg *cfg,
				    uint64_t off, uint64_t end, struct bfs_window_plan *plan);

/* Queuing stopped at @at (a full queue): the next READ tries from there. */
void bfs_window_retreat(struct bfs_window *w, uint64_t at);

/* The reader went only forward for a while: what is decoded for it, it reads once. */
bool bfs_window_once(const struct bfs_window *w);

#endif
