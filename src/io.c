// SPDX-License-Identifier: MIT
/*
 * The pread(2) read path and the memory-backed one that tests and tools
 * use. Both only copy bytes; callers own every buffer.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "blockfs/handoff.h"
#include "blockfs/io.h"

/*
 * First from the page cache alone (RWF_NOWAIT, the same one syscall when
 * the bytes are there): a read that must wait for the disk first lets
 * the FUSE loop's reader role go (handoff.h). Where the filesystem cannot
 * say (EOPNOTSUPP: NFS, sshfs and other FUSE filesystems), every read
 * may wait for a network, and lets it go too.
 */
static ssize_t pread_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	ssize_t n;

	if (!atomic_load_explicit(&io->no_nowait, memory_order_relaxed)) {
		do
			n = preadv2(io->fd, &iov, 1, (off_t)off, RWF_NOWAIT);
		while (n < 0 && errno == EINTR);
		if (n >= 0 || (errno != EAGAIN && errno != EOPNOTSUPP))
			return n < 0 ? -errno : n;
		if (errno == EOPNOTSUPP)
			atomic_store_explicit(&io->no_nowait, true, memory_order_relaxed);
	}
	bfs_handoff();
	do
		n = pread(io->fd, buf, len, (off_t)off);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

static ssize_t mem_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	if (off >= io->size)
		return 0;
	if (len > io->size - off)
		len = io->size - off;
	memcpy(buf, io->mem + off, len);
	return (ssize_t)len;
}

/* @under's own read, counted where the version counts its backing reads */
static ssize_t under_read(struct bfs_io *under, void *buf, size_t len, uint64_t off)
{
	atomic_fetch_add_explicit(&under->nread, 1, memory_order_relaxed);
	return under->ops->read(under, buf, len, off);
}

/* Fill @a's buffer with a request that holds @off (going backwards: ending at @end). */
static ssize_t ahead_fill(struct bfs_io_ahead *a, uint64_t off, uint64_t end)
{
	uint64_t at = off, stop;
	ssize_t n;

	if (a->len && off < a->off)	/* an index read from the end, say */
		at = end > a->want ? end - a->want : 0;
	n = under_read(a->under, a->buf, a->want, at);
	if (n <= 0)
		return n;
	a->off = at;
	a->len = (size_t)n;
	if (a->want < BFS_IO_AHEAD_CHUNK)
		a->want *= 2;
	stop = at + (uint64_t)n;
	if (a->progress)
		atomic_store(a->progress, stop);
	/* forward: have the kernel read the next requests meanwhile */
	if (at == off && stop < a->under->size && stop >= a->advised) {
		a->advised = stop + BFS_IO_AHEAD_DEPTH * BFS_IO_AHEAD_CHUNK;
		(void)posix_fadvise(a->under->fd, (off_t)stop,
				    (off_t)BFS_IO_AHEAD_DEPTH * BFS_IO_AHEAD_CHUNK, POSIX_FADV_WILLNEED);
	}
	return n;
}

static ssize_t ahead_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	struct bfs_io_ahead *a = (struct bfs_io_ahead *)io;
	ssize_t n;

	if (off < a->off || off - a->off >= a->len) {
		if (len >= BFS_IO_AHEAD_CHUNK / 2) {
			n = under_read(a->under, buf, len, off);
			if (n > 0 && a->progress)
				atomic_store(a->progress, off + (uint64_t)n);
			return n;
		}
		n = ahead_fill(a, off, off + len);
		if (n <= 0)
			return n;		/* 0: the file ends before @off */
		if (off < a->off || off - a->off >= a->len)
			/* a short fill (RWF_NOWAIT: part of it cached) that stops before @off */
			return under_read(a->under, buf, len, off);
	}
	n = (ssize_t)(a->len - (off - a->off));
	if ((size_t)n > len)
		n = (ssize_t)len;
	memcpy(buf, a->buf + (off - a->off), (size_t)n);
	/* bfs_io_read() counted this call in a->io: only @under's reads count */
	return n;
}

static const struct bfs_io_ops ahead_ops = { .name = "ahead", .read = ahead_read };

struct bfs_io *bfs_io_ahead_init(struct bfs_io_ahead *a, struct bfs_io *under,
				 atomic_uint_fast64_t *progress)
{
	*a = (struct bfs_io_ahead){ .under = under, .buf = malloc(BFS_IO_AHEAD_CHUNK),
				    .want = BFS_IO_AHEAD_FIRST, .progress = progress };
	if (!a->buf)
		return under;
	a->io = (struct bfs_io){ .ops = &ahead_ops, .fd = under->fd, .size = under->size };
	return &a->io;
}

void bfs_io_ahead_destroy(struct bfs_io_ahead *a)
{
	free(a->buf);
	a->buf = NULL;
}

const struct bfs_io_ops bfs_io_pread_ops = { .name = "pread", .read = pread_read };
const struct bfs_io_ops bfs_io_mem_ops = { .name = "mem", .read = mem_read };

void bfs_io_init_fd(struct bfs_io *io, int fd, uint64_t size)
{
	*io = (struct bfs_io){ .ops = &bfs_io_pread_ops, .fd = fd, .size = size };
}

void bfs_io_init_mem(struct bfs_io *io, const void *buf, size_t len)
{
	*io = (struct bfs_io){ .ops = &bfs_io_mem_ops, .fd = -1, .size = len, .mem = buf };
}

int bfs_io_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = io->ops->read(io, p, len, off);

		atomic_fetch_add_explicit(&io->nread, 1, memory_order_relaxed);
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -EIO;	/* the file ended early: it shrank */
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}
