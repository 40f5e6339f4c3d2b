// SPDX-License-Identifier: MIT
/*
 * The pread(2) read path and the memory-backed one that tests and tools
 * use, and a walk's view of a file with its threads reading ahead. They
 * only copy bytes; callers own every buffer.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
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

/* --- threads reading ahead of a walk ---------------------------------------- */

enum { SLOT_FREE, SLOT_READING, SLOT_DONE };

struct slot {
	uint64_t off; /* [off, off + BFS_IO_AHEAD_CHUNK) asked for */
	uint64_t gen; /* the pool's gen when asked for: older ones are dropped */
	ssize_t n;    /* SLOT_DONE: bytes read, or -errno */
	uint8_t *buf; /* BFS_IO_AHEAD_CHUNK bytes */
	int state;
};

struct bfs_io_pool {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a slot changed state; stop; next moved */
	struct bfs_io *under;
	uint64_t next;				/* protected by lock: the next chunk to ask for */
	uint64_t gen;				/* protected by lock: a walk that jumped bumps it */
	bool stop;				/* protected by lock */
	unsigned int n;				/* threads, and as many slots */
	struct slot slot[BFS_IO_AHEAD_THREADS]; /* protected by lock */
	pthread_t thr[BFS_IO_AHEAD_THREADS];
};

static struct slot *free_slot(struct bfs_io_pool *p)
{
	for (unsigned int i = 0; i < p->n; i++)
		if (p->slot[i].state == SLOT_FREE)
			return &p->slot[i];
	return NULL;
}

static void *pool_main(void *arg)
{
	struct bfs_io_pool *p = arg;
	struct slot *s = NULL;

	bfs_mutex_lock(&p->lock);
	for (;;) {
		while (!p->stop && (p->next >= p->under->size || !(s = free_slot(p))))
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->stop)
			break;
		uint64_t off = p->next, gen = p->gen;
		size_t len = BFS_IO_AHEAD_CHUNK;

		if (len > p->under->size - off)
			len = (size_t)(p->under->size - off);
		s->off = off;
		s->gen = gen;
		s->state = SLOT_READING;
		p->next += BFS_IO_AHEAD_CHUNK;
		bfs_mutex_unlock(&p->lock);
		ssize_t n = under_read(p->under, s->buf, len, off);

		bfs_mutex_lock(&p->lock);
		s->n = n;
		s->state = s->gen == p->gen ? SLOT_DONE : SLOT_FREE;
		pthread_cond_broadcast(&p->cond);
	}
	bfs_mutex_unlock(&p->lock);
	return NULL;
}

static void pool_free(struct bfs_io_pool *p, unsigned int started)
{
	bfs_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	bfs_mutex_unlock(&p->lock);
	for (unsigned int i = 0; i < started; i++)
		pthread_join(p->thr[i], NULL);
	for (unsigned int i = 0; i < p->n; i++)
		free(p->slot[i].buf);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* Threads reading @a's file from @next on; NULL when they cannot be had. */
static struct bfs_io_pool *pool_new(struct bfs_io_ahead *a, uint64_t next)
{
	struct bfs_io_pool *p = calloc(1, sizeof(*p));
	unsigned int i, started = 0;

	if (!p)
		return NULL;
	bfs_mutex_init(&p->lock);
	pthread_cond_init(&p->cond, NULL);
	p->under = a->under;
	p->next = next;
	p->n = a->depth;
	for (i = 0; i < p->n; i++)
		if (!(p->slot[i].buf = malloc(BFS_IO_AHEAD_CHUNK)))
			break;
	if (i == p->n)
		while (started < p->n && pthread_create(&p->thr[started], NULL, pool_main, p) == 0)
			started++;
	if (started < p->n) {
		pool_free(p, started); /* slots never made are NULL: free(NULL) */
		return NULL;
	}
	return p;
}

/*
 * The chunk that holds @off, read ahead by the pool, into @a's buffer
 * (buffers swapped, not copied): its length, or -errno if its read failed.
 * 0 when no chunk asked for holds @off (the walk jumped): the pool then
 * goes on after the chunk at @off, which the caller reads itself.
 */
static ssize_t pool_take(struct bfs_io_ahead *a, uint64_t off)
{
	struct bfs_io_pool *p = a->pool;
	struct slot *hit;
	ssize_t n = 0;

	bfs_mutex_lock(&p->lock);
	for (;;) {
		hit = NULL;
		for (unsigned int i = 0; i < p->n; i++) {
			struct slot *s = &p->slot[i];

			if (s->state == SLOT_DONE && s->off + BFS_IO_AHEAD_CHUNK <= off)
				s->state = SLOT_FREE; /* the walk went past it */
			else if (s->state != SLOT_FREE && s->off <= off &&
				 off - s->off < BFS_IO_AHEAD_CHUNK)
				hit = s;
		}
		if (!hit || hit->state == SLOT_DONE)
			break;
		pthread_cond_wait(&p->cond, &p->lock);
	}
	if (hit && (hit->n < 0 || off - hit->off < (uint64_t)hit->n)) {
		uint8_t *buf = a->buf;

		n = hit->n;
		a->buf = hit->buf;
		hit->buf = buf;
		if (n > 0) {
			a->off = hit->off;
			a->len = (size_t)n;
		}
		hit->state = SLOT_FREE;
	} else {
		if (hit)
			hit->state = SLOT_FREE; /* a short read that ends before @off */
		p->gen++; /* what is in flight now is not what the walk needs */
		for (unsigned int i = 0; i < p->n; i++)
			if (p->slot[i].state == SLOT_DONE)
				p->slot[i].state = SLOT_FREE;
		p->next = off + BFS_IO_AHEAD_CHUNK;
	}
	pthread_cond_broadcast(&p->cond);
	bfs_mutex_unlock(&p->lock);
	return n;
}

/* --- the walk's view ---------------------------------------------------------- */

/* Fill @a's buffer with a request that holds @off (going backwards: ending at @end). */
static ssize_t ahead_fill(struct bfs_io_ahead *a, uint64_t off, uint64_t end)
{
	uint64_t at = off, stop;
	ssize_t n;

	if (a->len && off < a->off) /* an index read from the end, say */
		at = end > a->want ? end - a->want : 0;
	if (a->pool && at == off) {
		n = pool_take(a, off);
		if (n > 0 && a->progress)
			atomic_store(a->progress, a->off + a->len);
		if (n != 0)
			return n;
	}
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
	if (at != off || stop >= a->under->size)
		return n;
	/* forward: the next requests are read meanwhile, by threads or by the kernel */
	if (a->depth) {
		if (!a->pool && a->want == BFS_IO_AHEAD_CHUNK)
			a->pool = pool_new(a, stop);
	} else if (stop >= a->advised) {
		a->advised = stop + BFS_IO_AHEAD_DEPTH * BFS_IO_AHEAD_CHUNK;
		(void)posix_fadvise(a->under->fd, (off_t)stop,
				    (off_t)BFS_IO_AHEAD_DEPTH * BFS_IO_AHEAD_CHUNK,
				    POSIX_FADV_WILLNEED);
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
			return n; /* 0: the file ends before @off */
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
				 atomic_uint_fast64_t *progress, unsigned int depth)
{
	*a = (struct bfs_io_ahead){ .under = under,
				    .buf = malloc(BFS_IO_AHEAD_CHUNK),
				    .want = BFS_IO_AHEAD_FIRST,
				    .progress = progress,
				    .depth = depth < BFS_IO_AHEAD_THREADS ? depth :
									    BFS_IO_AHEAD_THREADS };
	if (!a->buf)
		return under;
	a->io = (struct bfs_io){ .ops = &ahead_ops, .fd = under->fd, .size = under->size };
	return &a->io;
}

void bfs_io_ahead_destroy(struct bfs_io_ahead *a)
{
	if (a->pool)
		pool_free(a->pool, a->pool->n); /* waits for the reads in flight */
	a->pool = NULL;
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
			return -EIO; /* the file ended early: it shrank */
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}
