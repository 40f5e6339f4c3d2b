/* SPDX-License-Identifier: MIT */
/*
 * The block index of one compressed file: where each block starts in the
 * backing file and in the decompressed file. Built once per file version
 * by a codec's scan, then searched by every read.
 *
 * Exactness: a scan may not know a block's decompressed size without
 * reading the whole block (LZ4 frames record only compressed sizes). It
 * then records a guess and sets BFS_BLK_GUESS. Two kinds of guess:
 *
 *  - a size nothing in the file states (an LZ4 block, when the frame has
 *    no content size that proves it): bfs_measure() measures every
 *    such block right after the scan, before the file's size is shown, so
 *    that st_size is exact from the first stat(2);
 *  - a size the file states but its blocks do not prove (BFS_BLK_CLAIMED:
 *    a seek table, a BGZF ISIZE, an LZ4 content size): trusted for the
 *    file's size, and checked by bfs_settle(), in order, before any
 *    read relies on where the blocks after it start.
 *
 * usize, the size readers see, is fixed once bfs_measure() returns.
 * A claim that turns out false makes the file damaged, never resized.
 * Blocks [0, nexact) are exact and never change again, so readers search
 * them without a lock.
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
struct bfs_codec_conf;
struct bfs_workq;

enum {
	BFS_BLK_CSUM = 1u << 0,	   /* LZ4: a block checksum (xxh32) follows the data */
	BFS_BLK_GUESS = 1u << 1,   /* usize is a guess until settled */
	BFS_BLK_BAD = 1u << 2,	   /* poison: reads of it fail (corrupt, or damage here) */
	BFS_BLK_CLAIMED = 1u << 3, /* with GUESS: usize is what the file states, not proven */
	BFS_BLK_CHAIN = 1u << 4,   /* decodes only after the block before it (codec->resume) */
	/*
	 * With CHAIN: where its input starts and ends is not known until the
	 * span before it has been decoded; coff and clen hold the input of
	 * the whole chain (one zstd frame, one xz block), and the read path
	 * decodes it with codec->decode_open.
	 */
	BFS_BLK_OPEN = 1u << 5,
};

/* Where an index came from: user.blockfs.index_source. */
enum bfs_index_source {
	BFS_SRC_WALK,	   /* the codec walked the file ("lz4-walk", "bgzf-walk", ...) */
	BFS_SRC_SEEKTABLE, /* blockfs-pack's seek table (LZ4) */
	BFS_SRC_GZI,	   /* a .gzi sidecar (BGZF) */
	BFS_SRC_CACHE,	   /* an index cache entry (index_cache.h) */
};

/* Upper bound on blocks in one file: 16 Mi entries, 512 MiB of index. */
#define BFS_INDEX_MAX_BLOCKS (1u << 24)

struct bfs_blk {
	uint64_t coff;	/* first byte of the block in the backing file */
	uint64_t uoff;	/* first byte of its data in the decompressed file */
	uint32_t clen;	/* backing bytes the codec needs, from coff */
	uint32_t usize; /* decompressed bytes */
	uint32_t flags; /* BFS_BLK_* */
	uint32_t aux;	/* codec-private */
};

/* Blocks [first, last] must hold @total bytes: an LZ4 frame's content size. */
struct bfs_sum {
	size_t first, last;
	uint64_t total;
};

struct bfs_index {
	struct bfs_blk *blk; /* n entries, uoff ascending and contiguous */
	size_t n, cap;
	_Atomic uint64_t usize; /* decompressed bytes of the whole file; fixed by measure */
	uint32_t max_usize;	/* largest usize: a buffer this big decodes any block */
	uint32_t block_size;	/* nominal block size the file declares */
	size_t max_blocks;	/* scan may add no more (bounded by the file's size) */
	bool broken;		/* scan stopped at damage; blk[n-1] is BFS_BLK_BAD */
	char why[128];		/* what was wrong: damage, or the last block poisoned */
	atomic_size_t nexact;	/* blocks [0, nexact) have exact sizes */
	struct bfs_sum *sums;	/* totals to check once measured; scan-time only */
	size_t nsums;
	pthread_mutex_t settle_lock; /* serialises bfs_settle() */
	uint8_t source;		     /* enum bfs_index_source; set by scan (0: a walk) */
	/*
	 * The codec settings of whoever builds the index (a mount's, codec.h),
	 * set after bfs_index_init() and before scan or cache_load; NULL: the
	 * defaults. Codecs read it through bfs_codec_config().
	 */
	const struct bfs_codec_conf *conf;
	/*
	 * Codec-private data the index owns, for formats whose blocks need
	 * more than their own bytes to decode (gzip: the checkpoints' bit
	 * offsets and windows). Set by the codec's scan or cache_load with
	 * the function that frees it; read-only once the index is built;
	 * bfs_index_destroy() frees it. priv_bytes: its heap size, counted
	 * in user.blockfs.index_bytes.
	 */
	void *priv;
	void (*priv_free)(void *priv);
	size_t priv_bytes;
	/*
	 * What a walk decoded to learn sizes, kept in the spill (spill.h,
	 * pieces) so that reads need not decode it again: block k's bytes are
	 * at kept_off[k] of kept when k < kept_n and that is not
	 * BFS_KEPT_NONE. Filled by the scan (bfs_index_keep_begin() and the
	 * rest, below), read-only once it ends; bfs_index_destroy() drops
	 * the spill.
	 */
	struct bfs_spill *kept;
	uint64_t *kept_off;
	size_t kept_n, kept_cap;
};

#define BFS_KEPT_NONE UINT64_MAX
/*
 * A walk's spill is begun only for a backing file this big: a smaller one
 * costs little to decode again, and a spill each would cost a tree of
 * small files a descriptor each.
 */
#define BFS_KEPT_MIN  (1u << 20)

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
 * bfs_index_guess_irregular() - distrust sizes that only metadata vouches for.
 * For an index whose sizes a file states but its blocks do not prove (a
 * seek table, BGZF ISIZEs, a .gzi): every block but the last whose size
 * differs from the one most of them share (more than half, else every
 * block's) becomes BFS_BLK_GUESS | BFS_BLK_CLAIMED, so bfs_settle()
 * measures it before any read relies on where the blocks after it start,
 * and poisons it if it measures otherwise. bgzip, lz4 and blockfs-pack
 * fill every block but the last, so their files get no guess and open as
 * cheaply as before; a size damaged or forged into another value costs
 * EIO for its own block instead of moving every later one. Files whose
 * writer flushes at odd sizes pay for measuring (LZ4: parsing, BGZF:
 * inflating) the blocks before the first read that needs them, once.
 * @aux_is_max: a block as large as its aux says blocks may be is regular
 * too (LZ4: aux is its frame's block max, which the writer filled).
 * Needs a codec with measure(). Call once, when the scan is done.
 */
void bfs_index_guess_irregular(struct bfs_index *idx, bool aux_is_max);

/**
 * bfs_index_expect_sum() - blocks [@first, @last] must decode to @total bytes.
 * For guessed blocks whose run the file states a total for (an LZ4 frame's
 * content size): bfs_measure() checks it, and a run that holds
 * another total ends the file there as damage.
 * Return: 0 or -ENOMEM.
 */
BFS_MUST_CHECK int bfs_index_expect_sum(struct bfs_index *idx, size_t first, size_t last,
					uint64_t total);

/*
 * The walk's spill (kept, above), for a scan that decodes every block to
 * learn its size: bfs_index_keep_begin() makes it (false: spilling is
 * off; keep nothing), the scan's threads write each block's bytes, once
 * decoded and proven (its size and checksum), with bfs_index_keep_bytes()
 * (any thread, any order, the block not yet added), and the scan's thread
 * records with bfs_index_keep() where the bytes of block k went once k is
 * added. Bytes written for a span the walk does not take are never
 * recorded, so never read. bfs_measure() seals the spill (readable from
 * then on) or drops it (nothing recorded); bfs_index_keep_seal() is its
 * end, for a caller that does not measure. Nothing kept is a failure: a
 * block without bytes kept is decoded when read.
 */
bool bfs_index_keep_begin(struct bfs_index *idx);
/* Return: 0 with *@off, where the bytes went; -errno (keep nothing for them). */
BFS_MUST_CHECK int bfs_index_keep_bytes(const struct bfs_index *idx, const void *p, size_t len,
					uint64_t *off);
void bfs_index_keep(struct bfs_index *idx, size_t k, uint64_t off);
void bfs_index_keep_seal(struct bfs_index *idx);
/* Does the walk's spill hold block @k (a hint: it may be dropped at once)? */
bool bfs_index_kept(const struct bfs_index *idx, size_t k);
/**
 * bfs_index_kept_read() - the first @n bytes of block @k from the walk's
 * spill into @dst. Any thread.
 * Return: true when served; false (nothing kept for it, or the spill was
 * dropped or failed): decode it.
 */
bool bfs_index_kept_read(const struct bfs_index *idx, size_t k, void *dst, uint32_t n);

/**
 * bfs_index_find() - the block holding decompressed byte @uoff.
 * Searches exact blocks only: call bfs_settle() first.
 * Return: 0 and *@blkno, or -ENXIO when @uoff is at or past the exact end.
 */
BFS_MUST_CHECK int bfs_index_find(const struct bfs_index *idx, uint64_t uoff, size_t *blkno);

#endif
