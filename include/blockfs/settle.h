// SPDX-License-Identifier: MIT
/*
 * Settling an index: the sizes of blocks a scan could only guess, made
 * exact with the codec's measure() (settle.c). The layer above the
 * codecs: index.h is the data structure the codecs fill.
 */
#ifndef BLOCKFS_SETTLE_H
#define BLOCKFS_SETTLE_H

#include <stdint.h>

#include "blockfs/common.h"

struct bfs_codec;
struct bfs_index;
struct bfs_io;
struct bfs_workq;

/**
 * bfs_measure() - make every guess the file does not vouch for exact.
 * Measures, with @codec's measure(), every BFS_BLK_GUESS block that is not
 * BFS_BLK_CLAIMED, in parallel on @wq (NULL: in the caller), one backing
 * read per run of neighbouring blocks; then places the blocks and checks
 * the totals of bfs_index_expect_sum(). A block that fails to measure
 * keeps its guess and becomes BFS_BLK_BAD (as bfs_settle() does).
 * It then seals the walk's spill (index.h's kept), if the scan began one.
 * After it usize is final. Call once, after the scan, before anyone reads.
 * Return: 0, or -errno from the I/O or memory (the index is then unusable).
 * Context: any thread but a @wq worker; does I/O and waits for @wq.
 */
BFS_MUST_CHECK int bfs_measure(struct bfs_index *idx, struct bfs_io *io,
			       const struct bfs_codec *codec, struct bfs_workq *wq);

/**
 * bfs_settle() - make sizes exact up to the block holding @uoff.
 * Reads and measures guessed blocks in order with @codec's measure(). A
 * guessed block that fails to measure keeps its guess and becomes
 * BFS_BLK_BAD (reads of it fail; idx->why says why); settling goes on. A
 * BFS_BLK_CLAIMED block that measures other than its claim takes the
 * measured size, so later blocks stay where the data puts them, and
 * becomes BFS_BLK_BAD; usize does not change, and the last block becomes
 * BFS_BLK_BAD too, so the end of the damaged file reads as an error, not
 * as bytes from another place. (An unclaimed guess, which only a caller
 * that skipped bfs_measure() leaves, moves usize instead.)
 * Return: 0, or -errno from the I/O (nothing is changed for that block).
 * Context: any thread; takes settle_lock, does I/O.
 */
BFS_MUST_CHECK int bfs_settle(struct bfs_index *idx, struct bfs_io *io,
			      const struct bfs_codec *codec, uint64_t uoff);

#endif
