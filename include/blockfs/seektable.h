/* SPDX-License-Identifier: MIT */
/*
 * The LZ4 seek table that blockfs-pack appends to a file, so that blockfs
 * opens a file of any size with two small reads instead of walking its
 * blocks. Encoding and decoding of the table bytes only; the one I/O is
 * through a struct bfs_io. Byte layout (all little-endian; man 5 blockfs):
 *
 *   skippable frame, last in the file:
 *   0        4   magic 0x184D2A5B         LZ4 skippable range 184D2A50..5F
 *   4        4   frame size               = 16 * count + 36
 *   8        16 * count entries, one per LZ4 data block, in file order:
 *              +0  8  coff                offset of the block's size word
 *              +8  4  clen                size word + data + block checksum
 *              +12 4  info                bits 0-22: decompressed bytes (1..4 MiB)
 *                                         bits 24-26: the frame's block max id (4..7)
 *                                         bit 31: a block checksum follows the data
 *                                         other bits: 0
 *   footer (the last 36 bytes of the file):
 *   +0       8   table offset             where this skippable frame starts
 *   +8       8   decompressed bytes       sum of the entries' sizes
 *   +16      4   count
 *   +20      4   block size               nominal decompressed block size, 0 = unknown
 *   +24      4   version                  1
 *   +28      4   checksum                 XXH32 (seed 0) of entries and footer +0..+27
 *   +32      4   footer magic 0xB10C5EEC
 *
 * The table offset ties the table to its file: one moved by concatenation
 * (cat a.lz4 b.lz4) no longer matches and is ignored.
 */
#ifndef BLOCKFS_SEEKTABLE_H
#define BLOCKFS_SEEKTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"

struct bfs_io;

#define BFS_SEEK_MAGIC	      0x184D2A5Bu /* skippable frame magic, nibble B */
#define BFS_SEEK_FOOTER_MAGIC 0xB10C5EECu /* "BLOC SEEC" */
#define BFS_SEEK_VERSION      1u
#define BFS_SEEK_HDR_LEN      8
#define BFS_SEEK_ENTRY_LEN    16
#define BFS_SEEK_FOOTER_LEN   36
#define BFS_SEEK_OVERHEAD     (BFS_SEEK_HDR_LEN + BFS_SEEK_FOOTER_LEN)
/* Bytes the reader takes from the end of a file in its first read. */
#define BFS_SEEK_TAIL_LEN     4096

/* One LZ4 data block as the table records it. */
struct bfs_seektable_entry {
	uint64_t coff;	/* the block's 4-byte size word */
	uint32_t clen;	/* size word + data + block checksum */
	uint32_t usize; /* exact decompressed bytes, 1..bmax */
	uint32_t bmax;	/* block max size of its frame: 64K, 256K, 1M or 4M */
	bool csum;	/* a block checksum (XXH32) follows the data */
};

/* A table being built; zero-initialise, add in file order, finish, release. */
struct bfs_seektable_writer {
	uint8_t *buf; /* header room + entries, grown as needed */
	size_t n, cap;
	uint64_t usize;
	struct bfs_seektable_entry last; /* the last block added */
	int err; /* sticky: -EINVAL (out of order, bad entry), -EFBIG, -ENOMEM */
};

/* Bytes of a table of @n entries, header to footer. */
static inline uint64_t bfs_seektable_size(uint64_t n)
{
	return BFS_SEEK_OVERHEAD + n * BFS_SEEK_ENTRY_LEN;
}

/**
 * bfs_seektable_writer_add() - record the next block. Blocks must come in file
 * order without overlap; sizes within the format's limits.
 * Return: 0, or the writer's sticky error.
 */
int bfs_seektable_writer_add(struct bfs_seektable_writer *w, const struct bfs_seektable_entry *e);

/**
 * bfs_seektable_writer_finish() - complete the table for a file whose table will
 * start at byte @table_off, nominal block size @block_size (0: unknown).
 * @out, @len: the table bytes, owned by @w until bfs_seektable_writer_release().
 * Return: 0, or the sticky error (then nothing should be written).
 */
BFS_MUST_CHECK int bfs_seektable_writer_finish(struct bfs_seektable_writer *w, uint64_t table_off,
					       uint32_t block_size, const uint8_t **out,
					       size_t *len);

void bfs_seektable_writer_release(struct bfs_seektable_writer *w);

/* What a file's table says, after every check passed. */
struct bfs_seektable {
	struct bfs_seektable_entry *e; /* n entries, caller frees */
	size_t n;
	uint64_t table_off; /* where the table frame starts: the end of the frames */
	uint64_t usize;
	uint32_t block_size;
};

/**
 * bfs_seektable_load() - find and check the seek table at the end of @io.
 * Reads the last min(size, BFS_SEEK_TAIL_LEN) bytes with one read, and the
 * rest of the table with a second one only when it is bigger than that.
 * @max_entries: refuse tables with more entries (the index's limit).
 * Checks: footer magic and version, table offset == where the table
 * really starts, header magic and frame size, checksum, and each entry
 * (sizes within limits, in order, no overlap, all before the table,
 * sizes adding up to the footer's).
 * Return: 0 with @t filled; 1 when the file has no table (no footer
 * magic); -EBADMSG when there is one but it fails a check (*@why says
 * which); -ENOMEM; or -errno from the read.
 */
BFS_MUST_CHECK int bfs_seektable_load(struct bfs_io *io, size_t max_entries,
				      struct bfs_seektable *t, const char **why);

/**
 * bfs_seektable_decode() - the same checks on a table already in memory: @buf
 * holds the last @len bytes of a file of @file_size bytes.
 * Return: as bfs_seektable_load(), plus -EAGAIN with *@need (bytes from the end)
 * when @buf does not hold the whole table.
 */
BFS_MUST_CHECK int bfs_seektable_decode(const uint8_t *buf, size_t len, uint64_t file_size,
					size_t max_entries, struct bfs_seektable *t, size_t *need,
					const char **why);

#endif
