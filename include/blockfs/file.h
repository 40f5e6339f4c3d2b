/* SPDX-License-Identifier: MIT */
/*
 * One version of one backing file, as readers see it: its descriptor, its
 * codec and block index, and the identity (inode, size, times) it was
 * built from. A version never changes once built; when the backing file
 * changes, a new version replaces it and the old one lives until its last
 * reader lets go. Knows nothing of FUSE.
 */
#ifndef BLOCKFS_FILE_H
#define BLOCKFS_FILE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "blockfs/common.h"
#include "blockfs/index.h"
#include "blockfs/io.h"

struct bfs_codec;

struct bfs_file {
	atomic_uint refs;
	uint64_t id;			/* unique per version: a cache key */
	int fd;				/* O_RDONLY backing descriptor, owned */
	struct bfs_io io;
	const struct bfs_codec *codec;	/* NULL: served unchanged */
	struct bfs_index idx;		/* empty when codec is NULL */
	struct stat st;			/* the backing file when this version was built */
	bool verify;			/* check block checksums */
	atomic_size_t last_bad;		/* last block logged as bad: one line per block */
	char *name;			/* for log lines */
};

/**
 * bfs_file_open() - build a version from an open backing descriptor.
 * @fd:     O_RDONLY descriptor; owned by the version on success.
 * @side:   sidecar index descriptor (BGZF .gzi) or -1; only read here.
 * @codec:  how to decode it, or NULL for a file shown unchanged.
 * @name:   what log lines call the file (copied).
 * @out:    on success, one reference owned by the caller.
 * Scans the file (a codec walk, or the seek table) unless @codec is NULL.
 * Return: 0 or -errno (-ENOMEM, -EIO, -EFBIG, -ENOTSUP).
 */
BFS_MUST_CHECK int bfs_file_open(struct bfs_file **out, int fd, int side,
				 const struct bfs_codec *codec, const char *name, bool verify);

static inline struct bfs_file *bfs_file_get(struct bfs_file *f)
{
	atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
	return f;
}

/* Drop one reference; the last one closes and frees. NULL is a no-op. */
void bfs_file_put(struct bfs_file *f);

/* Bytes a reader sees: the decompressed size, or the backing size. */
uint64_t bfs_file_size(const struct bfs_file *f);

/* Did the backing file change since @f was built? @now: fstat of it now. */
bool bfs_file_stale(const struct bfs_file *f, const struct stat *now);

/**
 * bfs_file_read() - read @size bytes at @off into @buf.
 * Return: bytes read (short only at end of file), or -errno: -EBADMSG or
 * -EILSEQ when a block the range touches is corrupt (logged once per
 * block), -EIO when the backing file shrank, other -errno from the I/O.
 * Never a short count on error: the kernel would take it for end of file.
 * Context: any thread, concurrently on one @f.
 */
ssize_t bfs_file_read(struct bfs_file *f, void *buf, size_t size, uint64_t off);

#endif
