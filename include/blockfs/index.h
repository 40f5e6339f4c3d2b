/* SPDX-License-Identifier: MIT */
/*
 * The block index of one compressed file: where each block starts in the
 * backing file and in the decompressed file. Built once per file version
 * by a codec's scan, then searched by every read.
 *
 * Exactness: a scan may not know a block's decompressed size without
 * reading the whole block (LZ4 frames record only compressed sizes). It
 * then records a guess and sets BFS_BLK_GUESS; bfs_index_settle() makes
 * sizes exact, in order, before any read relies on them. Blocks
 * [0, nexact) are exact and never change again, so readers search them
 * without a lock.
 */
#ifndef BLOCKFS_INDEX_H
#define BLOCKFS_INDEX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "blockfs/common.h"

struct bfs_io;
struct bfs_codec;

enum {
	BFS_BLK_CSUM = 1u << 0,		/* LZ4: a block checksum (xxh32) follows the data */
	BFS_BLK_GUESS = 1u << 1,	/* usize is a guess until settled */
	BFS_BLK_BAD = 1u << 2,		/* poison: reads of it fail (corrupt, or damage here) */
};

/* Upper bound on blocks in one file: 16 Mi entries, 512 MiB of index. */
#define BFS_INDEX_MAX_BLOCKS (1u << 24)

struct bfs_blk {
	uint64_t coff;		/* first byte of the block in the backing file */
	uint64_t uoff;		/* first byte of its data in the decompressed file */
	uint32_t clen;		/* backing bytes the codec needs, from coff */
	uint32_t usize;		/* decompressed bytes */
	uint32_t flags;		/* BFS_BLK_* */
	uint32_t aux;		/* codec-private */
};

struct bfs_index {
	struct bfs_blk *blk;	/* n entries, uoff ascending and contiguous */
	size_t n, cap;
	_Atomic uint64_t usize;	/* decompressed bytes of the whole file; settle may shrink it */
	uint32_t max_usize;	/* largest usize: a buffer this big decodes any block */
	uint32_t block_size;	/* nominal block size the file declares */
	size_t max_blocks;	/* scan may add no more (bounded by the file's size) */
	bool broken;		/* scan stopped at damage; blk[n-1] is BFS_BLK_BAD */
	char why[128];		/* what was wrong: damage, or the last block poisoned */
	atomic_size_t nexact;	/* blocks [0, nexact) have exact sizes */
	pthread_mutex_t settle_lock;	/* serialises bfs_index_settle() */
};

/* Prepare an empty index for a backing file of @file_size bytes. */
void bfs_index_init(struct bfs_index *idx, uint64_t file_size);
/* Release the entries; @idx may be re-initialised. */
void bfs_index_destroy(struct bfs_index *idx);

/**
 * bfs_index_add() - append a block after the last one.
 * @usize: decompressed bytes; 0 is refused (an empty block carries nothing).
 * Return: 0, -EFBIG past max_blocks or a 2^63 total, -ENOMEM.
 */
BFS_MUST_CHECK int bfs_index_add(struct bfs_index *idx, uint64_t coff, uint32_t clen,
				 uint32_t usize, uint32_t flags);

/**
 * bfs_index_mark_broken() - record that the file's structure broke at @coff.
 * Appends a one-byte BFS_BLK_BAD block, so that a reader who reaches the
 * damage gets EIO instead of a silently short file. printf-style reason.
 */
void bfs_index_mark_broken(struct bfs_index *idx, uint64_t coff, const char *fmt, ...)
	BFS_PRINTF(3, 4);

/**
 * bfs_index_find() - the block holding decompressed byte @uoff.
 * Searches exact blocks only: call bfs_index_settle() first.
 * Return: 0 and *@blkno, or -ENXIO when @uoff is at or past the exact end.
 */
int bfs_index_find(const struct bfs_index *idx, uint64_t uoff, size_t *blkno);

/**
 * bfs_index_settle() - make sizes exact up to the block holding @uoff.
 * Reads and measures guessed blocks in order with @codec's measure(). A
 * guessed block that fails to measure keeps its guess and becomes
 * BFS_BLK_BAD (reads of it fail; idx->why says why); settling goes on.
 * Return: 0, or -errno from the I/O (nothing is changed for that block).
 * Context: any thread; takes settle_lock, does I/O.
 */
BFS_MUST_CHECK int bfs_index_settle(struct bfs_index *idx, struct bfs_io *io,
				    const struct bfs_codec *codec, uint64_t uoff);

#endif
