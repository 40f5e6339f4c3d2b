// SPDX-License-Identifier: MIT
/*
 * The spill of proven chains to local disk (contract in spill.h). One
 * process-wide budget and least-recently-read list under one leaf lock;
 * the bytes go through pwrite and pread outside it.
 *
 * A spill's life: WRITING (its room reserved; only the thread that began
 * it and its writer touch the file), SEALED (on the list; any thread reads
 * it, each read pinning the file with users), GONE (its room given back;
 * the file is closed by whoever sees it unused last). Closing the file is
 * what frees its blocks: it has no name.
 *
 * Writing: the prover decodes into one of NBUF buffers of BFS_SPILL_BUF
 * bytes (bfs_spill_next()) and hands it over (bfs_spill_add()); a writer
 * thread of the spill's own pwrites them in order, so that on a second
 * core the writes cost the proof no time. When no thread can be started
 * the prover writes them itself. The writer stops at the first failed
 * write and drops what follows; bfs_spill_seal() waits for it.
 *
 * A unit's spill (bfs_spill_put()) is made whole from bytes its caller
 * holds: written by the caller with no writer thread or buffers, sealed
 * before it is returned.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "blockfs/spill.h"

enum state {
	WRITING,
	SEALED,
	GONE,
};

/* Buffers handed to a spill's writer at a time. */
#define NBUF 4

struct bfs_spill {
	int fd; /* -1 once closed; protected by lock once sealed */
	uint64_t size;
	uint64_t added;		       /* bytes handed over; the prover's alone */
	bool broken;		       /* a write failed or would pass the size; the prover's */
	enum state state;	       /* protected by lock */
	unsigned int users;	       /* reads in flight; protected by lock */
	struct bfs_spill *prev, *next; /* the list, most recently read first; protected by lock */

	/* the writer: a ring of buffers, [head, head + queued) full, the one at tail filling */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	uint8_t *buf[NBUF];		 /* allocated by begin; the prover's or the writer's */
	size_t len[NBUF];		 /* protected by qlock */
	unsigned int head, tail, queued; /* protected by qlock */
	bool closing;			 /* no more buffers come; protected by qlock */
	int werr;			 /* the first failed write's -errno; protected by qlock */
	uint64_t written;		 /* the writer's alone (the prover's without one) */
	bool threaded;			 /* a writer thread runs until closing (the prover's) */
	pthread_t writer;

	bool pieces;	   /* made by bfs_spill_begin_pieces(); size grows under lock */
	atomic_bool pfail; /* a piece found no room or failed: no more are taken */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct bfs_spill lru = { .prev = &lru, .next = &lru }; /* sealed spills; protected by lock */
static int dir_fd = -1;					      /* protected by lock */
static uint64_t limit;					      /* protected by lock */
static uint64_t used;	   /* bytes of WRITING and SEALED spills; protected by lock */
static unsigned int files; /* WRITING and SEALED spills: descriptors; protected by lock */
static atomic_uint_fast64_t n_proofs, n_sealed, n_reads, n_dropped, n_failed;
static atomic_uint_fast64_t n_units; /* spills made by bfs_spill_put() */
static atomic_uint name_seq;	     /* names for file systems without O_TMPFILE */

static void list_unlink(struct bfs_spill *s)
{
	s->prev->next = s->next;
	s->next->prev = s->prev;
	s->prev = s->next = s;
}

static void list_push(struct bfs_spill *s)
{
	s->next = lru.next;
	s->prev = &lru;
	lru.next->prev = s;
	lru.next = s;
}

/*
 * Make @s GONE (its room given back); its file descriptor, when nothing
 * reads it any more, is returned for the caller to close after the lock
 * (closing a big file frees its pages, which takes a while); else -1.
 * Under lock.
 */
static int gone_locked(struct bfs_spill *s)
{
	int fd = -1;

	if (s->state == SEALED)
		list_unlink(s);
	if (s->state != GONE) {
		used -= s->size;
		files--;
	}
	s->state = GONE;
	if (s->users == 0) {
		fd = s->fd;
		s->fd = -1;
	}
	return fd;
}

static void close_fd(int fd)
{
	if (fd >= 0)
		close(fd);
}

int bfs_spill_configure(const char *dir, uint64_t bytes)
{
	int fd = -1, old, rc = 0;

	if (bytes > 0) {
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			bytes = 0;
		}
	}
	bfs_mutex_lock(&lock);
	old = dir_fd;
	dir_fd = fd;
	limit = bytes;
	bfs_mutex_unlock(&lock);
	close_fd(old);
	return rc;
}

void bfs_spill_shutdown(void)
{
	int old;

	bfs_mutex_lock(&lock);
	old = dir_fd;
	dir_fd = -1;
	limit = 0;
	bfs_mutex_unlock(&lock);
	close_fd(old);
}

/* An unlinked file in @dfd, or -errno. */
static int make_file(int dfd)
{
	char name[64];
	int fd;

#ifdef O_TMPFILE
	fd = openat(dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return -errno;
#endif
	/* no O_TMPFILE here: a new name no one else can have made, gone at once */
	for (int tries = 0; tries < 16; tries++) {
		snprintf(name, sizeof(name), ".blockfs-spill-%ld-%u-%lx", (long)getpid(),
			 atomic_fetch_add(&name_seq, 1), (unsigned long)random());
		fd = openat(dfd, name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0)
			return -errno;
		if (unlinkat(dfd, name, 0) < 0) {
			int rc = -errno;

			close(fd);
			return rc;
		}
		return fd;
	}
	return -EEXIST;
}

/*
 * Write the buffer at the head of @s's ring, and take it off. The writer
 * thread's (or, without one, the prover's): the buffer is no one else's
 * until then. Return: 0, or the -errno of this or an earlier write.
 */
static int write_one(struct bfs_spill *s)
{
	unsigned int at;
	size_t len, done = 0;
	int rc;

	bfs_mutex_lock(&s->qlock);
	at = s->head;
	len = s->len[at];
	rc = s->werr;
	bfs_mutex_unlock(&s->qlock);
	while (rc == 0 && done < len) {
		ssize_t n = pwrite(s->fd, s->buf[at] + done, len - done, (off_t)s->written);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -ENOSPC;
			atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed);
			break;
		}
		done += (size_t)n;
		s->written += (uint64_t)n;
	}
	bfs_mutex_lock(&s->qlock);
	if (rc < 0 && !s->werr)
		s->werr = rc;
	s->head = (s->head + 1) % NBUF;
	s->queued--;
	pthread_cond_broadcast(&s->qcond);
	bfs_mutex_unlock(&s->qlock);
	return rc;
}

/* A spill's writer thread: its buffers in order, until closing and none is left. */
static void *writer_main(void *arg)
{
	struct bfs_spill *s = arg;

	for (;;) {
		bfs_mutex_lock(&s->qlock);
		while (s->queued == 0 && !s->closing)
			pthread_cond_wait(&s->qcond, &s->qlock);
		if (s->queued == 0) {
			bfs_mutex_unlock(&s->qlock);
			return NULL;
		}
		bfs_mutex_unlock(&s->qlock);
		(void)write_one(s);
	}
}

/*
 * Does @dfd's file system have room for @size more bytes and still a
 * twentieth of itself free? A spill must not fill the disk it shares with
 * the index cache and everything else; one that fills it all the same
 * (others write too) fails its writes and is dropped.
 */
static bool disk_room(int dfd, uint64_t size)
{
	struct statvfs v;

	if (fstatvfs(dfd, &v) < 0)
		return true; /* unknown: the writes will say */
	return (uint64_t)v.f_bavail * v.f_frsize >= size + (uint64_t)v.f_blocks * v.f_frsize / 20;
}

/* Victims closed per hold of the lock while making room. */
#define CLOSE_BATCH 16
/*
 * Spills at once, each an open descriptor: small units (bfs_spill_put())
 * would otherwise hold thousands under a big budget.
 */
#define FILES_MAX   1024

/*
 * Do @bytes more (and, with @file, one more descriptor) fit the budget?
 * Under lock.
 */
static bool fits_locked(uint64_t bytes, bool file)
{
	return used + bytes <= limit && (!file || files < FILES_MAX);
}

/*
 * Make room for @bytes more (and, with @file, one more descriptor) by
 * dropping the sealed spills least recently read, at most as many as
 * @shut has room left for (*@nshut of CLOSE_BATCH used): their
 * descriptors go there, to be closed after the lock. Return: whether
 * they fit now; *@more: whether dropping more could make them fit.
 * Under lock.
 */
static bool room_locked(uint64_t bytes, bool file, int *shut, size_t *nshut, bool *more)
{
	while (!fits_locked(bytes, file) && lru.prev != &lru && *nshut < CLOSE_BATCH) {
		int fd = gone_locked(lru.prev);

		atomic_fetch_add_explicit(&n_dropped, 1, memory_order_relaxed);
		if (fd >= 0)
			shut[(*nshut)++] = fd;
	}
	*more = !fits_locked(bytes, file) && lru.prev != &lru;
	return fits_locked(bytes, file);
}

/*
 * Reserve @size bytes of the budget, making room by dropping the sealed
 * spills least recently read. Return: true with *@dfd a duplicate of the
 * directory (or -1 when that failed: the caller fails then) and the room
 * taken (unreserve() gives it back); false when spilling is off, @size is
 * 0 or above the budget, or there is no room (counted as failed).
 */
static bool reserve(uint64_t size, int *dfd)
{
	int shut[CLOSE_BATCH];
	size_t nshut;
	bool room = false, more = true;

	*dfd = -1;
	while (more) {
		nshut = 0;
		bfs_mutex_lock(&lock);
		if (limit == 0 || dir_fd < 0 || size == 0 || size > limit) {
			bfs_mutex_unlock(&lock);
			return false;
		}
		/* the least recently read go first; their files are closed after the lock */
		room = room_locked(size, true, shut, &nshut, &more);
		if (room) {
			used += size;
			files++;
			/* the directory may be reconfigured while the file is made */
			*dfd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
		}
		bfs_mutex_unlock(&lock);
		for (size_t i = 0; i < nshut; i++)
			close(shut[i]);
	}
	if (!room)
		atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed);
	return room;
}

/* Give back @size bytes reserve() took for a spill that was not made. */
static void unreserve(uint64_t size)
{
	bfs_mutex_lock(&lock);
	used -= size;
	files--;
	bfs_mutex_unlock(&lock);
	atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed);
}

/*
 * A new WRITING spill of @size bytes in the file @fd, made for the room
 * reserve() took (a pieces spill: @size 0, its descriptor counted alone).
 * @fd is owned from here. Return: the spill; NULL when @fd is a -errno
 * (making the file failed) or memory is short, the file closed and the
 * room given back then.
 */
static struct bfs_spill *spill_new(int fd, uint64_t size)
{
	struct bfs_spill *s = fd >= 0 ? calloc(1, sizeof(*s)) : NULL;

	if (!s) {
		close_fd(fd);
		unreserve(size);
		return NULL;
	}
	s->fd = fd;
	s->size = size;
	s->state = WRITING;
	s->prev = s->next = s;
	bfs_mutex_init(&s->qlock);
	pthread_cond_init(&s->qcond, NULL);
	return s;
}

/* A new WRITING spill of @size bytes in a file of its own, within the bound; NULL: none. */
static struct bfs_spill *spill_open(uint64_t size)
{
	int dfd, fd;

	if (!reserve(size, &dfd))
		return NULL;
	fd = dfd < 0 ? -EBADF : !disk_room(dfd, size) ? -ENOSPC : make_file(dfd);
	close_fd(dfd);
	return spill_new(fd, size);
}

struct bfs_spill *bfs_spill_begin(uint64_t size)
{
	struct bfs_spill *s;

	atomic_fetch_add_explicit(&n_proofs, 1, memory_order_relaxed);
	if (!(s = spill_open(size)))
		return NULL;
	for (size_t i = 0; i < NBUF; i++) {
		if (!(s->buf[i] = malloc(BFS_SPILL_BUF))) {
			/* gives the room back, as unreserve() does */
			bfs_spill_drop(s);
			atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed);
			return NULL;
		}
	}
	s->threaded = pthread_create(&s->writer, NULL, writer_main, s) == 0;
	return s;
}

uint8_t *bfs_spill_next(struct bfs_spill *s, size_t *len)
{
	uint8_t *b;

	if (s->broken)
		return NULL;
	bfs_mutex_lock(&s->qlock);
	while (s->queued == NBUF && !s->werr)
		pthread_cond_wait(&s->qcond, &s->qlock);
	b = s->werr ? NULL : s->buf[s->tail];
	bfs_mutex_unlock(&s->qlock);
	if (!b)
		s->broken = true;
	*len = BFS_SPILL_BUF;
	return b;
}

int bfs_spill_add(struct bfs_spill *s, size_t len)
{
	int rc;

	if (s->broken)
		return -EIO;
	if (len > s->size - s->added) {
		s->broken = true;
		atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed);
		return -EFBIG;
	}
	if (len == 0)
		return 0;
	s->added += len;
	bfs_mutex_lock(&s->qlock);
	s->len[s->tail] = len;
	s->tail = (s->tail + 1) % NBUF;
	s->queued++;
	pthread_cond_broadcast(&s->qcond);
	rc = s->werr;
	bfs_mutex_unlock(&s->qlock);
	if (!s->threaded)
		rc = write_one(s);
	if (rc < 0)
		s->broken = true;
	return rc;
}

int bfs_spill_write(struct bfs_spill *s, const void *p, size_t len)
{
	const uint8_t *from = p;

	while (len > 0) {
		size_t cap, n;
		uint8_t *b = bfs_spill_next(s, &cap);
		int rc;

		if (!b)
			return -EIO;
		n = len < cap ? len : cap;
		memcpy(b, from, n);
		rc = bfs_spill_add(s, n);
		if (rc < 0)
			return rc;
		from += n;
		len -= n;
	}
	return s->broken ? -EIO : 0;
}

/* Stop the writer, once every buffer handed over is written. Return: its error, or 0. */
static int finish(struct bfs_spill *s)
{
	int rc;

	bfs_mutex_lock(&s->qlock);
	s->closing = true;
	pthread_cond_broadcast(&s->qcond);
	bfs_mutex_unlock(&s->qlock);
	if (s->threaded) {
		pthread_join(s->writer, NULL);
		s->threaded = false;
	}
	bfs_mutex_lock(&s->qlock);
	rc = s->werr;
	bfs_mutex_unlock(&s->qlock);
	return rc;
}

int bfs_spill_seal(struct bfs_spill *s)
{
	if (finish(s) < 0 || s->broken || s->written != s->size)
		return -EBADMSG;
	bfs_mutex_lock(&lock);
	if (s->state == WRITING) {
		s->state = SEALED;
		list_push(s);
	}
	bfs_mutex_unlock(&lock);
	atomic_fetch_add_explicit(&n_sealed, 1, memory_order_relaxed);
	return 0;
}

struct bfs_spill *bfs_spill_put(const void *p, uint64_t size)
{
	const uint8_t *from = p;
	struct bfs_spill *s;

	if (!(s = spill_open(size)))
		return NULL;
	/* no writer thread and no buffers: the caller's bytes are written here */
	while (s->written < size) {
		size_t left =
			size - s->written > SSIZE_MAX ? SSIZE_MAX : (size_t)(size - s->written);
		ssize_t n = pwrite(s->fd, from + s->written, left, (off_t)s->written);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			s->broken = true;
			atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed);
			break;
		}
		s->written += (uint64_t)n;
	}
	s->added = s->written;
	if (s->broken || bfs_spill_seal(s) < 0) {
		bfs_spill_drop(s);
		return NULL;
	}
	atomic_fetch_add_explicit(&n_units, 1, memory_order_relaxed);
	return s;
}

bool bfs_spill_on(void)
{
	bool on;

	bfs_mutex_lock(&lock);
	on = limit > 0 && dir_fd >= 0;
	bfs_mutex_unlock(&lock);
	return on;
}

int bfs_spill_read(struct bfs_spill *s, void *dst, size_t len, uint64_t off)
{
	uint8_t *d = dst;
	size_t left = len;
	int fd, rc = 0, gfd = -1;

	bfs_mutex_lock(&lock);
	if (s->state != SEALED) {
		bfs_mutex_unlock(&lock);
		return -ENOENT;
	}
	if (off > s->size || len > s->size - off) {
		bfs_mutex_unlock(&lock);
		return -ERANGE;
	}
	s->users++;
	list_unlink(s);
	list_push(s);
	fd = s->fd;
	bfs_mutex_unlock(&lock);
	while (left > 0) {
		ssize_t n = pread(fd, d, left, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO; /* shorter than written: never trusted */
			break;
		}
		d += n;
		off += (uint64_t)n;
		left -= (size_t)n;
	}
	bfs_mutex_lock(&lock);
	s->users--;
	if (rc < 0 && s->state == SEALED)
		atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed);
	if (rc < 0 || s->state == GONE)
		gfd = gone_locked(s);
	bfs_mutex_unlock(&lock);
	close_fd(gfd);
	if (rc == 0)
		atomic_fetch_add_explicit(&n_reads, 1, memory_order_relaxed);
	return rc;
}

bool bfs_spill_live(struct bfs_spill *s)
{
	bool live;

	bfs_mutex_lock(&lock);
	live = s->state == SEALED;
	bfs_mutex_unlock(&lock);
	return live;
}

void bfs_spill_forget(struct bfs_spill *s)
{
	int fd;

	bfs_mutex_lock(&lock);
	fd = gone_locked(s);
	bfs_mutex_unlock(&lock);
	close_fd(fd);
}

void bfs_spill_drop(struct bfs_spill *s)
{
	if (!s)
		return;
	(void)finish(s);
	bfs_spill_forget(s);
	for (size_t i = 0; i < NBUF; i++)
		free(s->buf[i]);
	pthread_cond_destroy(&s->qcond);
	pthread_mutex_destroy(&s->qlock);
	free(s);
}

void bfs_spill_stats(struct bfs_spill_stats *st)
{
	bfs_mutex_lock(&lock);
	st->bytes = used;
	st->limit = limit;
	bfs_mutex_unlock(&lock);
	st->proofs = atomic_load_explicit(&n_proofs, memory_order_relaxed);
	st->sealed = atomic_load_explicit(&n_sealed, memory_order_relaxed);
	st->reads = atomic_load_explicit(&n_reads, memory_order_relaxed);
	st->dropped = atomic_load_explicit(&n_dropped, memory_order_relaxed);
	st->failed = atomic_load_explicit(&n_failed, memory_order_relaxed);
	st->units = atomic_load_explicit(&n_units, memory_order_relaxed);
}

/*
 * ---- pieces: a walk's spill (spill.h) ----
 *
 * A pieces spill has no ring and no writer thread: each bfs_spill_piece()
 * takes the next free bytes of the file under lock (growing size, and
 * used with it), then pwrites them in the calling thread, so that the
 * walk's workers write what they decoded side by side. pfail stops
 * pieces after the first that found no room or failed to write.
 */

/*
 * Room for @len more bytes of @s under lock, made by room_locked() (the
 * descriptor is @s's already); the descriptors of the spills it drops go
 * into @shut (*@nshut of CLOSE_BATCH) to be closed after the lock. Return:
 * true with @s's offset for the bytes in *@off; false when there is none
 * yet (*@more: dropping more would make it).
 */
static bool piece_room_locked(struct bfs_spill *s, uint64_t len, uint64_t *off, int *shut,
			      size_t *nshut, bool *more)
{
	if (len > limit) {
		*more = false; /* bigger than the whole budget: drop nothing for it */
		return false;
	}
	if (!room_locked(len, false, shut, nshut, more))
		return false;
	used += len;
	*off = s->size;
	s->size += len;
	return true;
}

struct bfs_spill *bfs_spill_begin_pieces(void)
{
	struct bfs_spill *s;
	int dfd = -1, fd;

	atomic_fetch_add_explicit(&n_proofs, 1, memory_order_relaxed);
	/* no bytes yet (each piece takes its own room), but a descriptor */
	bfs_mutex_lock(&lock);
	if (limit > 0 && dir_fd >= 0 && files < FILES_MAX) {
		dfd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
		files += dfd >= 0;
	}
	bfs_mutex_unlock(&lock);
	if (dfd < 0)
		return NULL; /* spilling is off, or as many spills as descriptors allow */
	fd = make_file(dfd);
	close(dfd);
	if (!(s = spill_new(fd, 0)))
		return NULL;
	s->pieces = true;
	return s;
}

int bfs_spill_piece(struct bfs_spill *s, const void *p, size_t len, uint64_t *off)
{
	const uint8_t *from = p;
	int shut[CLOSE_BATCH], rc = 0;
	size_t nshut, done = 0;
	bool room = false, more = true;
	uint64_t at = 0;

	if (!s->pieces)
		return -EINVAL;
	if (len == 0 || atomic_load(&s->pfail))
		return -ENOSPC;
	/* the spill file's own file system: the directory may be reconfigured meanwhile */
	while (disk_room(s->fd, len) && more) {
		nshut = 0;
		bfs_mutex_lock(&lock);
		if (limit == 0 || s->state != WRITING) {
			bfs_mutex_unlock(&lock);
			break;
		}
		room = piece_room_locked(s, len, &at, shut, &nshut, &more);
		bfs_mutex_unlock(&lock);
		for (size_t i = 0; i < nshut; i++)
			close(shut[i]);
		if (room)
			break;
	}
	if (!room) {
		rc = -ENOSPC;
		goto fail;
	}
	while (done < len) {
		ssize_t n = pwrite(s->fd, from + done, len - done, (off_t)(at + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -ENOSPC;
			goto fail;
		}
		done += (size_t)n;
	}
	*off = at;
	return 0;
fail:
	/* the first failure is counted; the pieces after it are refused at once */
	if (!atomic_exchange(&s->pfail, true))
		atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed);
	return rc;
}

int bfs_spill_seal_pieces(struct bfs_spill *s)
{
	bool sealed = false;

	bfs_mutex_lock(&lock);
	if (s->state == WRITING && s->size > 0) {
		s->state = SEALED;
		list_push(s);
		sealed = true;
	}
	bfs_mutex_unlock(&lock);
	if (!sealed)
		return -ENODATA;
	atomic_fetch_add_explicit(&n_sealed, 1, memory_order_relaxed);
	return 0;
}
