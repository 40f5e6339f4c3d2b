/* SPDX-License-Identifier: MIT */
/*
 * What the files of a file version's read path share beyond
 * blockfs/file.h: read.c (the requests) calls down into decode.c (the
 * backing bytes and the codecs) and unit.c (costly blocks kept in the
 * spill). Nothing else includes this.
 */
#ifndef BLOCKFS_READ_I_H
#define BLOCKFS_READ_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "blockfs/file.h"

struct bfs_block;

/* Per thread: the compressed bytes being decoded, reused by every request (decode.c). */
struct bfs_read_tls {
	uint8_t *cbuf;
	size_t ccap;
	bool quiet; /* decoding ahead: failures are for the reader to report */
};

/* This thread's, made at its first use; NULL when there is no memory. */
struct bfs_read_tls *bfs_read_tls(void);

/*
 * A backing read of @f failed with @rc: open the file again by name if it
 * is still this version's (a network filesystem's handle can die while
 * the file lives on). Return: 0 to read again; else @rc.
 */
int bfs_read_revive(struct bfs_file *f, int rc);

/* What a failed backing read met, for the log ("backing file shrank", or strerror). */
const char *bfs_read_failure(struct bfs_file *f, int rc);

/* Block @k is BFS_BLK_BAD: its failure, logged once unless quiet. Return: -EBADMSG. */
int bfs_decode_poisoned(struct bfs_file *f, size_t k);

/* Does a block of [d0, d1] of @f decode only after the one before it (BFS_BLK_CHAIN)? */
bool bfs_decode_chained(const struct bfs_file *f, size_t d0, size_t d1);

/*
 * Decode blocks [d0, d1] of @f into @out[0..] (cache blocks of their
 * usize), as @t's quiet says for failures: the walk's kept bytes, the
 * mapping, or the compressed bytes of the run by pread. *@done: how many
 * blocks from @d0 on are decoded (all on success); on failure, block
 * @d0 + *@done is one that failed, and those after it may not be decoded.
 * Return: 0, or a failure (-EBADMSG, -EILSEQ, -EIO, -ENOMEM).
 */
int bfs_decode_run(struct bfs_file *f, struct bfs_read_tls *t, size_t d0, size_t d1,
		   struct bfs_block **out, size_t *done);

/* Decode the first @n bytes of block @k into @dst: from the mapping, or one pread. */
int bfs_decode_prefix(struct bfs_file *f, size_t k, uint32_t n, uint8_t *dst);

/*
 * Spilled units (unit.c): blocks that cost much to decode, kept in the
 * spill once decoded whole.
 *
 * bfs_unit_worth: is block @k of @f one to serve from a unit's spill?
 * bfs_unit_claim: block @k decoded whole (it passed its check): is it
 *   ours to spill? Then readers of it wait for bfs_unit_put().
 * bfs_unit_put: spill block @k's @len bytes at @data, as claimed; wakes
 *   its waiters.
 * bfs_unit_fill: block @k's @len bytes from its spill into @dst.
 *   Return: 0, or -ENOENT: not spilled.
 * bfs_unit_serve: [@off, @off + @size), all in block @k, from its spill
 *   when there is one and the block cache does not hold it.
 *   Return: bytes served; 0 for the common path.
 */
bool bfs_unit_worth(const struct bfs_file *f, size_t k);
bool bfs_unit_claim(struct bfs_file *f, size_t k);
void bfs_unit_put(struct bfs_file *f, size_t k, const uint8_t *data, uint32_t len);
int bfs_unit_fill(struct bfs_file *f, size_t k, uint8_t *dst, uint32_t len);
ssize_t bfs_unit_serve(struct bfs_file *f, size_t k, uint64_t off, size_t size,
		       struct bfs_readv *rv);

#endif
