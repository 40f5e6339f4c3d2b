// SPDX-License-Identifier: MIT
/*
 * Directory snapshots and their cache (contract in dir.h): the entries of
 * backing directories as read, kept while the directory does not change,
 * asked by the name rules (names.c) in listings (dir.c) and lookups
 * (lookup.c), so that neither repeats a getdents after the kernel's
 * timeouts; read ahead for a walk. Their memos in the index cache are
 * snapmemo.c's.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blockfs/handoff.h"
#include "blockfs/names.h"
#include "blockfs/stats.h"
#include "blockfs/workq.h"
#include "dir.h"
#include "fs_i.h"
#include "snap_i.h"

static void snap_free(struct bfs_snap *s)
{
	bfs_shown_free(atomic_load(&s->shown));
	pthread_mutex_destroy(&s->pair_lock);
	free(s->slot);
	free(s->e);
	free(s->names);
	free(s);
}

struct bfs_snap *bfs_snap_hold(struct bfs_snap *s)
{
	atomic_fetch_add(&s->refs, 1);
	return s;
}

void bfs_snap_put(struct bfs_snap *s)
{
	if (s && atomic_fetch_sub(&s->refs, 1) == 1)
		snap_free(s);
}

/*
 * Finding a name. A listing asks two or three names per entry (the entry,
 * its stem, the stem with another suffix), a LOOKUP as many, so names are
 * found by hash, linear probing at load at most 1/2, each slot holding the
 * name's hash beside its entry so that a probe compares strings only when
 * the hashes agree. A name more than HASH_REACH slots from its home (a
 * directory made to collide) drops the table, and the entries are sorted
 * for a binary search instead. Only then: sorting 1,000 names of one long
 * common prefix was an eighth of the daemon's time in a `find`.
 */
#define HASH_REACH 32

static uint32_t name_hash(const char *name)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h ^ h >> 15;
}

static int snent_cmp(const void *a, const void *b, void *names)
{
	return strcmp((const char *)names + ((const struct snent *)a)->name,
		      (const char *)names + ((const struct snent *)b)->name);
}

/* Hash the names of @s; without memory, or past the reach, sort them instead. */
static void snap_index(struct bfs_snap *s)
{
	size_t size = 16;
	uint64_t *slot;

	while (size < 2 * s->n)
		size *= 2;
	slot = calloc(size, sizeof(*slot));
	if (!slot)
		goto out_sort;
	for (size_t i = 0; i < s->n; i++) {
		uint32_t h = name_hash(bfs_snap_ename(s, &s->e[i]));
		size_t k = 0;

		while (slot[(h + k) & (size - 1)])
			if (++k == HASH_REACH) {
				free(slot);
				goto out_sort;
			}
		slot[(h + k) & (size - 1)] = (uint64_t)h << 32 | ((uint32_t)i + 1);
	}
	s->slot = slot;
	s->mask = size - 1;
	s->bytes += size * sizeof(*slot);
	return;
out_sort:
	qsort_r(s->e, s->n, sizeof(*s->e), snent_cmp, s->names);
}

static struct snent *snap_find(const struct bfs_snap *s, const char *name)
{
	size_t lo = 0, hi = s->n;

	if (s->slot) {
		uint32_t h = name_hash(name);

		for (size_t k = 0; k < HASH_REACH; k++) {
			uint64_t v = s->slot[(h + k) & s->mask];

			if (v == 0)
				break;
			if ((uint32_t)(v >> 32) == h &&
			    strcmp(name, bfs_snap_ename(s, &s->e[(uint32_t)v - 1])) == 0)
				return &s->e[(uint32_t)v - 1];
		}
		return NULL; /* every name lies within the reach of its home */
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, bfs_snap_ename(s, &s->e[mid]));

		if (c == 0)
			return &s->e[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

#define SNAP_BUF_MIN (32u << 10)
#define SNAP_BUF_MAX (1u << 20)

/*
 * The getdents64 buffer for a directory of @dst: about twice its size
 * (ext4 keeps an entry in fewer bytes than the call returns it in), within
 * bounds, so that a directory of a few thousand names takes one call and
 * the empty one that ends it.
 */
static size_t snap_buf_size(const struct stat *dst)
{
	uint64_t want = dst->st_size > 0 ? (uint64_t)dst->st_size * 2 : 0;

	if (want < SNAP_BUF_MIN)
		return SNAP_BUF_MIN;
	return want > SNAP_BUF_MAX ? SNAP_BUF_MAX : (size_t)want;
}

/* Append backing entry @d to @s; *@cap, *@ncap, *@nlen: its arrays' room and use. */
static int snap_add(struct bfs_snap *s, const struct dirent64 *d, size_t *cap, size_t *ncap,
		    size_t *nlen)
{
	size_t len = strlen(d->d_name) + 1;

	if (s->n == *cap) {
		struct snent *ne = realloc(s->e, (*cap ? *cap * 2 : 64) * sizeof(*ne));

		if (!ne)
			return -ENOMEM;
		s->e = ne;
		*cap = *cap ? *cap * 2 : 64;
	}
	if (*nlen + len > *ncap) {
		size_t want = *ncap ? *ncap * 2 : 2048;
		char *nn;

		if (want < *nlen + len)
			want = *nlen + len;
		nn = realloc(s->names, want);
		if (!nn)
			return -ENOMEM;
		s->names = nn;
		*ncap = want;
	}
	memcpy(s->names + *nlen, d->d_name, len);
	s->e[s->n] = (struct snent){ .name = (uint32_t)*nlen,
				     .ino = d->d_ino,
				     .type = d->d_type,
				     .size = NO_SIZE };
	*nlen += len;
	s->n++;
	return 0;
}

/*
 * A new snapshot of the backing directory @dirfd: its entries, read with
 * getdents64 itself into one buffer sized for the directory: readdir(3)
 * would add an fstat and two fcntls (fdopendir) and a call per 32 KiB to
 * each directory a walk reads.
 * @dirfd is read itself when @own (opened for reading by the caller, who
 * closes it), else through an open of its ".".
 */
static int snap_read(struct bfs_fs *fs, int dirfd, bool own, const struct stat *dst,
		     struct bfs_snap **out)
{
	size_t cap = 0, ncap = 0, nlen = 0, bsize = snap_buf_size(dst);
	struct bfs_snap *s;
	char *buf;
	int fd, rc = 0;

	s = calloc(1, sizeof(*s));
	buf = malloc(bsize);
	if (!s || !buf) {
		free(s);
		free(buf);
		return -ENOMEM;
	}
	atomic_init(&s->refs, 1);
	bfs_mutex_init(&s->pair_lock);
	s->dev = dst->st_dev;
	s->ino = dst->st_ino;
	s->mtime = dst->st_mtim;
	s->ctime = dst->st_ctim;
	/* once per directory and change: it may wait for the disk, or be long */
	bfs_handoff();
	fd = own ? dirfd : bfs_backing_openat(fs, dirfd, ".", O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		rc = -errno;
		free(buf);
		snap_free(s);
		return rc;
	}
	for (;;) {
		ssize_t got = getdents64(fd, buf, bsize);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			rc = -errno;
		if (got <= 0)
			break;
		for (size_t at = 0; at < (size_t)got && rc == 0;) {
			const struct dirent64 *d = (const struct dirent64 *)(void *)(buf + at);

			rc = snap_add(s, d, &cap, &ncap, &nlen);
			at += d->d_reclen;
		}
		if (rc < 0)
			break;
	}
	if (!own)
		close(fd);
	free(buf);
	if (rc < 0) {
		snap_free(s);
		return rc;
	}
	/*
	 * Trimmed to fit: at the growth's first sizes a tree of small
	 * directories (the kernel's 5,000) overflowed BFS_SNAP_BUDGET, and a
	 * walk repeated in the same order then found none of its snapshots.
	 */
	if (s->n > 0 && s->n < cap) {
		struct snent *ne = realloc(s->e, s->n * sizeof(*ne));

		if (ne) {
			s->e = ne;
			cap = s->n;
		}
	}
	if (nlen > 0 && nlen < ncap) {
		char *nn = realloc(s->names, nlen);

		if (nn) {
			s->names = nn;
			ncap = nlen;
		}
	}
	s->bytes = sizeof(*s) + cap * sizeof(*s->e) + ncap;
	snap_index(s);
	*out = s;
	return 0;
}

static size_t snap_bucket(dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;

	return (size_t)(h >> 40) & (BFS_SNAP_BUCKETS - 1);
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* Take @s out of the cache, dropping the cache's reference; fs->snaps.lock held. */
static void snap_unlink(struct bfs_fs *fs, struct bfs_snap *s)
{
	struct bfs_snap **pp = &fs->snaps.chains[snap_bucket(s->dev, s->ino)];

	while (*pp != s)
		pp = &(*pp)->hnext;
	*pp = s->hnext;
	*(s->prev ? &s->prev->next : &fs->snaps.mru) = s->next;
	*(s->next ? &s->next->prev : &fs->snaps.lru) = s->prev;
	fs->snaps.bytes -= s->bytes;
	s->cached = false;
	if (atomic_exchange(&s->ahead, false)) /* read ahead for nothing */
		atomic_fetch_sub(&fs->snaps.ahead, 1);
	bfs_snap_put(s);
}

/*
 * A directory changed within this long before it was read may change
 * again within the same tick of the coarse clock that file times come
 * from, leaving its mtime as it was: such a snapshot is used once, not
 * kept (git's "racy" entries).
 */
#define RACY_NS 50000000ll

static bool racy(const struct stat *dst)
{
	struct timespec now;
	long long t, m = dst->st_mtim.tv_sec * 1000000000ll + dst->st_mtim.tv_nsec;
	long long c = dst->st_ctim.tv_sec * 1000000000ll + dst->st_ctim.tv_nsec;

	clock_gettime(CLOCK_REALTIME, &now);
	t = now.tv_sec * 1000000000ll + now.tv_nsec;
	return t - (m > c ? m : c) < RACY_NS;
}

/*
 * bfs_snap_get(), for a reader (@ahead false) or for reading ahead: then
 * true when the snapshot was read and cached here, marked s->ahead and
 * counted in fs->snaps.ahead until a reader asks for it or it leaves the
 * cache.
 */
/*
 * Directories being read ahead right now (fs->snaps.reading). A walk whose
 * names cost little catches up with its read-ahead, and a reader that got
 * to such a directory read it a second time beside the worker: a fifth of
 * a million-file find's getdents. It waits for the worker's read instead.
 * When the table is full a read is not entered and nobody waits for it.
 */
static struct bfs_snap_reading *reading_add(struct bfs_fs *fs, const struct stat *dst)
{
	struct bfs_snap_reading *r = NULL;

	bfs_mutex_lock(&fs->snaps.lock);
	for (size_t i = 0; i < BFS_ARRAY_SIZE(fs->snaps.reading) && !r; i++)
		if (!fs->snaps.reading[i].busy)
			r = &fs->snaps.reading[i];
	if (r)
		*r = (struct bfs_snap_reading){ .busy = true,
						.dev = dst->st_dev,
						.ino = dst->st_ino };
	bfs_mutex_unlock(&fs->snaps.lock);
	return r;
}

/* The read entered as @r is over (its snapshot cached, or not kept). */
static void reading_done(struct bfs_fs *fs, struct bfs_snap_reading *r)
{
	if (!r)
		return;
	bfs_mutex_lock(&fs->snaps.lock);
	r->busy = false;
	pthread_cond_broadcast(&fs->snaps.read_done);
	bfs_mutex_unlock(&fs->snaps.lock);
}

static bool reading_now(const struct bfs_fs *fs, const struct stat *dst)
{
	for (size_t i = 0; i < BFS_ARRAY_SIZE(fs->snaps.reading); i++)
		if (fs->snaps.reading[i].busy && fs->snaps.reading[i].ino == dst->st_ino &&
		    fs->snaps.reading[i].dev == dst->st_dev)
			return true;
	return false;
}

/* Wait for a read ahead of directory @dst, if one goes on: true if one did. */
static bool reading_wait(struct bfs_fs *fs, const struct stat *dst)
{
	bool found;

	bfs_mutex_lock(&fs->snaps.lock);
	found = reading_now(fs, dst);
	bfs_mutex_unlock(&fs->snaps.lock);
	if (!found)
		return false;
	bfs_handoff(); /* as snap_read() would: the wait may be long */
	bfs_mutex_lock(&fs->snaps.lock);
	while (reading_now(fs, dst))
		pthread_cond_wait(&fs->snaps.read_done, &fs->snaps.lock);
	bfs_mutex_unlock(&fs->snaps.lock);
	return true;
}

static int snap_fill(struct bfs_fs *fs, int dirfd, const struct stat *dst, size_t b, bool *ahead,
		     struct bfs_snap **out);

static int snap_get(struct bfs_fs *fs, int dirfd, bool *ahead, struct bfs_snap **out)
{
	struct bfs_snap *s;
	struct bfs_snap_reading *r;
	bool waited = false;
	struct stat dst;
	size_t b;
	int rc;

	if (fstat(dirfd, &dst) < 0)
		return -errno;
	/*
	 * Removed (and perhaps made again under the same name): the kernel
	 * takes ESTALE as a sign to walk the path again, revalidating each
	 * name, and so finds the new directory or none.
	 */
	if (dst.st_nlink == 0)
		return -ESTALE;
	b = snap_bucket(dst.st_dev, dst.st_ino);
again:
	bfs_mutex_lock(&fs->snaps.lock);
	for (s = fs->snaps.chains[b]; s; s = s->hnext)
		if (s->ino == dst.st_ino && s->dev == dst.st_dev)
			break;
	if (s && same_time(&s->mtime, &dst.st_mtim) && same_time(&s->ctime, &dst.st_ctim)) {
		atomic_fetch_add(&s->refs, 1);
		if (ahead) {
			*ahead = false; /* read already */
		} else if (atomic_exchange(&s->ahead, false)) {
			atomic_fetch_sub(&fs->snaps.ahead, 1); /* read ahead, and now asked for */
			BFS_COUNT(fs->env.mount, dirs_ahead_used, 1);
		}
		if (s->prev) { /* the most recently used now */
			s->prev->next = s->next;
			*(s->next ? &s->next->prev : &fs->snaps.lru) = s->prev;
			s->prev = NULL;
			s->next = fs->snaps.mru;
			fs->snaps.mru->prev = s;
			fs->snaps.mru = s;
		}
		bfs_mutex_unlock(&fs->snaps.lock);
		*out = s;
		return 0;
	}
	bfs_mutex_unlock(&fs->snaps.lock);
	if (!ahead) {
		if (!waited && reading_wait(fs, &dst)) {
			waited = true; /* its snapshot is cached now, unless it was not kept */
			goto again;
		}
		return snap_fill(fs, dirfd, &dst, b, ahead, out);
	}
	r = reading_add(fs, &dst);
	rc = snap_fill(fs, dirfd, &dst, b, ahead, out);
	reading_done(fs, r);
	return rc;
}

/* The rest of snap_get(): read directory @dst (bucket @b) and cache the snapshot. */
static int snap_fill(struct bfs_fs *fs, int dirfd, const struct stat *dst, size_t b, bool *ahead,
		     struct bfs_snap **out)
{
	struct bfs_snap *s = NULL, *old = NULL;
	int rc;

	rc = snap_read(fs, dirfd, ahead != NULL, dst, &s); /* ahead_run()'s own */
	if (rc < 0)
		return rc;
	/* Probes of the entries that kept their inode still hold: files are stamped anyway. */
	if (racy(dst) || s->bytes > BFS_SNAP_BUDGET / 4) {
		if (ahead)
			*ahead = false; /* not kept: read for nothing */
		*out = s;
		return 0;
	}
	bfs_snap_memo_load(fs, s);
	bfs_mutex_lock(&fs->snaps.lock);
	for (old = fs->snaps.chains[b]; old; old = old->hnext)
		if (old->ino == s->ino && old->dev == s->dev)
			break;
	/* Read ahead while a reader read it too: the reader has what it wanted. */
	if (ahead && old && same_time(&old->mtime, &s->mtime) && same_time(&old->ctime, &s->ctime))
		*ahead = false;
	if (ahead && *ahead) {
		atomic_init(&s->ahead, true);
		BFS_COUNT(fs->env.mount, dirs_ahead, 1);
	}
	if (old)
		snap_unlink(fs, old);  /* outdated, or another thread's read of the same */
	atomic_fetch_add(&s->refs, 1); /* the cache's */
	s->cached = true;
	s->hnext = fs->snaps.chains[b];
	fs->snaps.chains[b] = s;
	s->next = fs->snaps.mru;
	*(fs->snaps.mru ? &fs->snaps.mru->prev : &fs->snaps.lru) = s;
	fs->snaps.mru = s;
	fs->snaps.bytes += s->bytes;
	while (fs->snaps.bytes > BFS_SNAP_BUDGET && fs->snaps.lru != s)
		snap_unlink(fs, fs->snaps.lru);
	bfs_mutex_unlock(&fs->snaps.lock);
	*out = s;
	return 0;
}

int bfs_snap_get(struct bfs_fs *fs, int dirfd, struct bfs_snap **out)
{
	return snap_get(fs, dirfd, NULL, out);
}

const struct bfs_shown *bfs_snap_shown(struct bfs_fs *fs, struct bfs_snap *s)
{
	struct bfs_shown *sh = atomic_load_explicit(&s->shown, memory_order_acquire), *none = NULL;

	if (sh)
		return sh;
	sh = bfs_shown_make(fs, s);
	if (!sh)
		return NULL;
	if (!atomic_compare_exchange_strong_explicit(&s->shown, &none, sh, memory_order_acq_rel,
						     memory_order_acquire)) {
		bfs_shown_free(sh); /* another thread's came first */
		return none;
	}
	bfs_mutex_lock(&fs->snaps.lock);
	s->bytes += bfs_shown_bytes(sh);
	if (s->cached) {
		fs->snaps.bytes += bfs_shown_bytes(sh);
		while (fs->snaps.bytes > BFS_SNAP_BUDGET && fs->snaps.lru != s)
			snap_unlink(fs, fs->snaps.lru);
	}
	bfs_mutex_unlock(&fs->snaps.lock);
	return sh;
}

/*
 * Reading ahead. A walk (find, du, a backup) looks each subdirectory up
 * and then lists it, one after another in the order its parent was
 * listed, and the listing waits for the backing getdents: half of the
 * daemon's time in a `find` of 100,000 files once names cost nothing
 * else. So a lookup of a directory queues the snapshots of the next
 * SNAP_AHEAD directories of its parent's listing on the workers, which
 * read them while the walker is busy with this one. At most SNAP_AHEAD
 * snapshots read ahead and not yet asked for are cached at a time
 * (fs->snaps.ahead), so a walk in another order (ls -R sorts) wastes at
 * most that many reads, and the cache holds the walk's own (16 of 1,000
 * entries are 1 MiB of the 8 MiB budget). On the nice 19 pool, as
 * decoding ahead is: with 4 ahead there `find` often got to a directory
 * before its read did, so they went to the workers at nice 10
 * (bench/results/find/2026-11-28-aa5d12d/first-mount.md); with 16 ahead,
 * and each directory listed on the worker too (shown.c), the walk's own
 * program goes first where it shares a CPU with them: its find took 0.92
 * and 0.85 of the time on the nice 10 workers (medians of 12 and 14
 * paired rounds, bench/results/find/2026-11-29-cb0b813/).
 */
#define SNAP_AHEAD 16

struct ahead_job {
	struct bfs_work work;
	struct bfs_fs *fs;
	struct bfs_snap *parent; /* one reference: the name lives in it */
	const struct snent *e;
	int dirfd; /* the parent directory: a duplicate, owned */
};

static void ahead_run(struct bfs_work *w)
{
	struct ahead_job *j = (struct ahead_job *)w;
	struct bfs_fs *fs = j->fs;
	struct bfs_snap *s;
	bool ahead = false;
	int fd;

	/* for reading (snap_read() reads it itself: no second open) */
	fd = bfs_backing_openat(fs, j->dirfd, bfs_snap_ename(j->parent, j->e),
				O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	if (fd >= 0) {
		ahead = true;
		if (snap_get(fs, fd, &ahead, &s) == 0) {
			/* listed here too: the walk's READDIR then only copies */
			if (ahead)
				(void)bfs_snap_shown(fs, s);
			bfs_snap_put(s);
		} else {
			ahead = false;
		}
		close(fd);
	}
	if (!ahead)
		atomic_fetch_sub(&fs->snaps.ahead, 1);
	close(j->dirfd);
	bfs_snap_put(j->parent);
	free(j);
}

/* Is a snapshot of directory @dev, @ino cached (of any version)? */
static bool snap_cached(struct bfs_fs *fs, dev_t dev, ino_t ino)
{
	struct bfs_snap *s;

	bfs_mutex_lock(&fs->snaps.lock);
	for (s = fs->snaps.chains[snap_bucket(dev, ino)]; s; s = s->hnext)
		if (s->ino == ino && s->dev == dev)
			break;
	bfs_mutex_unlock(&fs->snaps.lock);
	return s != NULL;
}

void bfs_snap_ahead(struct bfs_snap_ctx *c, const char *name)
{
	struct bfs_fs *fs = c->fs;
	struct bfs_snap *s = c->snap;
	const struct snent *e = snap_find(s, name);
	size_t seen = 0;

	if (!e || !bfs_workq_threads(bfs_ahead_q(&fs->env)))
		return;
	for (size_t i = (size_t)(e - s->e) + 1; i < s->n && seen < SNAP_AHEAD; i++) {
		struct snent *x = &s->e[i];
		struct ahead_job *j;

		if (x->type != DT_DIR)
			continue;
		seen++;
		if (atomic_exchange(&x->queued, true))
			continue;
		if (atomic_fetch_add(&fs->snaps.ahead, 1) >= SNAP_AHEAD ||
		    snap_cached(fs, s->dev, x->ino))
			goto out_unqueue;
		j = malloc(sizeof(*j));
		if (!j)
			goto out_unqueue;
		*j = (struct ahead_job){ .work.fn = ahead_run,
					 .fs = fs,
					 .e = x,
					 .dirfd = fcntl(c->dirfd, F_DUPFD_CLOEXEC, 0) };
		if (j->dirfd >= 0) {
			j->parent = bfs_snap_hold(s);
			if (bfs_workq_try(bfs_ahead_q(&fs->env), &j->work))
				continue;
			bfs_snap_put(s);
			close(j->dirfd);
		}
		free(j);
out_unqueue:
		atomic_fetch_sub(&fs->snaps.ahead, 1);
		atomic_store(&x->queued, false); /* a later lookup may try again */
		if (atomic_load(&fs->snaps.ahead) >= SNAP_AHEAD)
			return;
	}
}

int bfs_snap_cache_init(struct bfs_snaps *c)
{
	*c = (struct bfs_snaps){ .chains = calloc(BFS_SNAP_BUCKETS, sizeof(*c->chains)) };
	if (!c->chains)
		return -ENOMEM;
	bfs_mutex_init(&c->lock);
	pthread_cond_init(&c->read_done, NULL);
	atomic_init(&c->ahead, 0);
	return 0;
}

void bfs_snap_cache_free(struct bfs_fs *fs)
{
	if (!fs->snaps.chains)
		return; /* never set up */
	while (fs->snaps.lru) {
		bfs_snap_save(fs, fs->snaps.lru); /* what lookups learned since the listing */
		snap_unlink(fs, fs->snaps.lru);
	}
	free(fs->snaps.chains);
	fs->snaps.chains = NULL;
	pthread_cond_destroy(&fs->snaps.read_done);
	pthread_mutex_destroy(&fs->snaps.lock);
}

static bool snap_exists(void *ctx, const char *name)
{
	return snap_find(((struct bfs_snap_ctx *)ctx)->snap, name) != NULL;
}

/*
 * Names come from suffixes alone (names.h): a listing asks only whether
 * an entry is a regular file, which getdents said. An entry whose type
 * the backing filesystem does not give (DT_UNKNOWN) is taken for one; a
 * lookup, which stats it, shows a directory so named unchanged.
 */
static bool snap_is_file(void *ctx, const char *name)
{
	struct bfs_snap_ctx *c = ctx;
	struct snent *e = snap_find(c->snap, name);

	return e && (e->type == DT_REG || e->type == DT_UNKNOWN);
}

const struct bfs_name_ops bfs_snap_name_ops = { .exists = snap_exists, .is_file = snap_is_file };

void bfs_snap_note_size(struct bfs_snap_ctx *c, const char *name, uint64_t stamp, uint64_t size)
{
	struct snent *e = snap_find(c->snap, name);
	bool learned = false;

	if (!e || size == NO_SIZE)
		return;
	bfs_mutex_lock(&c->snap->pair_lock);
	if (!atomic_load_explicit(&e->probed, memory_order_acquire) ||
	    atomic_load(&e->stamp) != stamp || e->size != size) {
		atomic_store(&e->stamp, stamp);
		e->size = size;
		atomic_store_explicit(&e->probed, true, memory_order_release);
		learned = true;
	}
	bfs_mutex_unlock(&c->snap->pair_lock);
	if (learned)
		atomic_store(&c->snap->dirty, true);
}

bool bfs_snap_size(struct bfs_snap_ctx *c, const char *name, uint64_t stamp, uint64_t *size)
{
	struct snent *e = snap_find(c->snap, name);

	if (!e || !atomic_load_explicit(&e->probed, memory_order_acquire))
		return false;
	bfs_mutex_lock(&c->snap->pair_lock);
	*size = atomic_load(&e->stamp) == stamp ? e->size : NO_SIZE;
	bfs_mutex_unlock(&c->snap->pair_lock);
	return *size != NO_SIZE;
}

bool bfs_snap_new_file(struct bfs_snap_ctx *c, const char *name, dev_t *dev, ino_t *ino)
{
	struct snent *e = snap_find(c->snap, name);
	bool unsized;

	if (!e || e->type != DT_REG)
		return false;
	bfs_mutex_lock(&c->snap->pair_lock);
	unsized = e->size == NO_SIZE;
	bfs_mutex_unlock(&c->snap->pair_lock);
	*dev = c->snap->dev;
	*ino = e->ino;
	return unsized;
}
