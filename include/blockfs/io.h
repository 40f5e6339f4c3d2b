/* SPDX-License-Identifier: MIT */
/*
 * Reading compressed bytes from a backing file. A struct bfs_io is a
 * small handle with an ops table, so that walkers and decoders never
 * care whether bytes come from pread(2), a mapping, or memory (tests).
 */
#ifndef BLOCKFS_IO_H
#define BLOCKFS_IO_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "blockfs/common.h"

struct bfs_io;

struct bfs_io_ops {
	const char *name;
	/* Like pread(2): bytes read (0 at end of file) or -errno. */
	ssize_t (*read)(struct bfs_io *io, void *buf, size_t len, uint64_t off);
};

struct bfs_io {
	const struct bfs_io_ops *ops;
	int fd;			    /* backing file, or -1 for memory */
	uint64_t size;		    /* bytes of the backing file when it was opened */
	const uint8_t *mem;	    /* memory-backed io: @size bytes */
	atomic_uint_fast64_t nread; /* read calls bfs_io_read() made, for the counters */
	atomic_bool no_nowait;	    /* the filesystem refuses RWF_NOWAIT (NFS, FUSE): plain reads */
};

extern const struct bfs_io_ops bfs_io_pread_ops;
extern const struct bfs_io_ops bfs_io_mem_ops;

/* Read @fd with pread(2); @size is the file's size as the caller saw it. */
void bfs_io_init_fd(struct bfs_io *io, int fd, uint64_t size);
/* Serve reads from @len bytes at @buf, which must outlive @io. */
void bfs_io_init_mem(struct bfs_io *io, const void *buf, size_t len);

/*
 * A walk's view of a backing file: the small reads a walk makes as it goes
 * through a file (LZ4 block headers, frame headers; xz indexes, backwards)
 * served from one larger request at a time, so that a walk costs one
 * request per BFS_IO_AHEAD_CHUNK bytes, not one per block. Requests grow
 * from BFS_IO_AHEAD_FIRST, so that a look at a file's head (the format, a
 * cached index) costs no more than it did. Large reads go to @under
 * directly. Counted in @under's nread.
 * Ahead of the walk, @depth threads read the next chunks in parallel once
 * its requests are full-sized (a remote SOURCE: over sshfs one pread at a
 * time is much slower than a cat of the file, whatever its size, and
 * POSIX_FADV_WILLNEED starts nothing there); with @depth 0 the kernel is
 * asked to read BFS_IO_AHEAD_DEPTH chunks ahead (POSIX_FADV_WILLNEED),
 * which local filesystems do.
 */
#define BFS_IO_AHEAD_FIRST	    (64u << 10)
#define BFS_IO_AHEAD_CHUNK	    (1u << 20)
#define BFS_IO_AHEAD_DEPTH	    4 /* chunks asked for ahead of the one read */
#define BFS_IO_AHEAD_THREADS	    8 /* most threads reading ahead (@depth) */
#define BFS_IO_AHEAD_REMOTE_THREADS 4 /* the walks' @depth on a remote SOURCE */

struct bfs_io_pool;

struct bfs_io_ahead {
	struct bfs_io io; /* what the walk reads through; first member */
	struct bfs_io *under;
	uint8_t *buf;			/* BFS_IO_AHEAD_CHUNK bytes: [off, off + len) of the file */
	uint64_t off, advised;		/* advised: asked ahead up to here */
	size_t len, want;		/* held; the next request's size */
	atomic_uint_fast64_t *progress; /* NULL, or where to say how far the walk has read */
	unsigned int depth;		/* threads to read ahead with; 0: POSIX_FADV_WILLNEED */
	struct bfs_io_pool *pool;	/* those threads, once started, or NULL */
};

/*
 * Prepare @a to read @under, which must be open on a descriptor, with
 * @depth threads ahead (at most BFS_IO_AHEAD_THREADS; 0: none); how far
 * the walk has read goes to *@progress (unless NULL). Return: &a->io, or
 * @under itself when there is no memory for the buffer.
 */
struct bfs_io *bfs_io_ahead_init(struct bfs_io_ahead *a, struct bfs_io *under,
				 atomic_uint_fast64_t *progress, unsigned int depth);
void bfs_io_ahead_destroy(struct bfs_io_ahead *a);

/**
 * bfs_io_read() - read exactly @len bytes at @off.
 * Return: 0; -EIO when the file ends before @len bytes (it shrank under
 * us); or -errno from the read path. Short reads are retried.
 */
BFS_MUST_CHECK int bfs_io_read(struct bfs_io *io, void *buf, size_t len, uint64_t off);

/*
 * May a read that failed with @rc (-errno) succeed through a descriptor
 * opened anew? EIO, ENOTCONN and ESTALE are what network filesystems
 * answer for a handle that died while its file lives on (sshfs's handles
 * of a connection it has since made again; NFS after a server restart).
 * The caller still checks that the path names the same file.
 */
static inline bool bfs_io_handle_dead(int rc)
{
	return rc == -EIO || rc == -ENOTCONN || rc == -ESTALE;
}

#endif
