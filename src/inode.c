// SPDX-License-Identifier: MIT
/*
 * The inode table, lookups and file versions: the bridge between backing
 * objects and what the mount shows. Inodes follow passthrough_ll, counted
 * by lookup/forget and found again by identity, except that their O_PATH
 * descriptors are a bounded cache rather than one pinned per inode
 * (backing.c). Listings are dir.c's, the mount's set-up fs.c's. No FUSE
 * types here; ops.c translates.
 */
#include "config.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/log.h"
#include "blockfs/names.h"
#include "blockfs/workq.h"
#include "fs_i.h"

/* Large enough that coreutils and stdio read a mounted file in big chunks. */
#define BFS_BLKSIZE (1u << 20)

/* --- name questions answered with syscalls (lookup) ----------------------- */

struct sysdir {
	struct bfs_fs *fs;
	int fd;
	int err;	/* a stat's failure other than "no such name", or 0 */
};

/*
 * fstatat of @name in the directory. A failure that does not say the name
 * is absent (ENOTCONN from a network filesystem whose daemon died, EIO,
 * EACCES) is kept in @d->err: the lookup then fails with it, rather than
 * answer ENOENT for a file that may well be there.
 */
static bool sys_stat(struct sysdir *d, const char *name, struct stat *st)
{
	if (fstatat(d->fd, name, st, AT_SYMLINK_NOFOLLOW) == 0)
		return true;
	if (errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG && !d->err)
		d->err = -errno;
	return false;
}

static bool sys_exists(void *ctx, const char *name)
{
	struct stat st;

	return sys_stat(ctx, name, &st);
}

/* Names come from suffixes alone: is @name a regular file? */
static bool sys_is_file(void *ctx, const char *name)
{
	struct stat st;

	return sys_stat(ctx, name, &st) && S_ISREG(st.st_mode);
}

static const struct bfs_name_ops sys_name_ops = { .exists = sys_exists, .is_file = sys_is_file };

/* --- the inode table ------------------------------------------------------ */

static size_t bucket(const struct bfs_fs *fs, dev_t dev, ino_t ino, const struct bfs_codec *c)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev ^ (uintptr_t)c;

	return (size_t)(h ^ h >> 29) & (fs->nbuckets - 1);
}

/* Double the buckets when chains grow past two on average. */
static void maybe_grow(struct bfs_fs *fs)
{
	size_t old = fs->nbuckets;
	struct bfs_inode **nt, **ot = fs->table;

	if (fs->count < old * 2)
		return;
	nt = calloc(old * 2, sizeof(*nt));
	if (!nt)
		return;			/* longer chains, still correct */
	fs->table = nt;
	fs->nbuckets = old * 2;
	for (size_t i = 0; i < old; i++) {
		for (struct bfs_inode *in = ot[i], *next; in; in = next) {
			size_t b = bucket(fs, in->dev, in->ino, in->codec);

			next = in->hnext;
			in->hnext = nt[b];
			nt[b] = in;
		}
	}
	free(ot);
}

static void inode_free(struct bfs_fs *fs, struct bfs_inode *in)
{
	bfs_inode_fd_release(fs, in);
	bfs_file_put(in->file);
	free(in->rpath);
	free(in);
}

void bfs_inode_table_free(struct bfs_fs *fs)
{
	for (size_t i = 0; i < fs->nbuckets; i++) {
		for (struct bfs_inode *in = fs->table[i], *next; in; in = next) {
			next = in->hnext;
			inode_free(fs, in);
		}
	}
	free(fs->table);
	fs->table = NULL;
}

/* The inode of backing object @dev:@ino shown with @codec, if known; fs->lock held. */
static struct bfs_inode *table_find(struct bfs_fs *fs, dev_t dev, ino_t ino,
				    const struct bfs_codec *codec)
{
	struct bfs_inode *in = fs->table[bucket(fs, dev, ino, codec)];

	while (in && (in->ino != ino || in->dev != dev || in->codec != codec))
		in = in->hnext;
	return in;
}

/* Is backing object @dev:@ino known shown with @codec? */
static bool inode_known(struct bfs_fs *fs, dev_t dev, ino_t ino, const struct bfs_codec *codec)
{
	bool known;

	bfs_mutex_lock(&fs->lock);
	known = table_find(fs, dev, ino, codec) != NULL;
	bfs_mutex_unlock(&fs->lock);
	return known;
}

/* The known inode of @st shown with @codec, with one more lookup; or NULL. */
static struct bfs_inode *inode_ref(struct bfs_fs *fs, const struct stat *st,
				   const struct bfs_codec *codec)
{
	struct bfs_inode *in;

	bfs_mutex_lock(&fs->lock);
	in = table_find(fs, st->st_dev, st->st_ino, codec);
	if (in)
		in->nlookup++;
	bfs_mutex_unlock(&fs->lock);
	return in;
}

/*
 * Find or add the inode for descriptor @fd (consumed; open for reading if
 * @rd, else O_PATH; or -1: none yet, bfs_inode_fd() opens one by path when
 * needed) of backing object @st shown with @codec, with one more lookup.
 * The descriptor goes to the cache, unpinned.
 */
static int inode_get(struct bfs_fs *fs, int fd, bool rd, const struct stat *st,
		     const struct bfs_codec *codec, struct bfs_inode **out)
{
	struct bfs_inode *in;
	size_t b;

	if (!S_ISREG(st->st_mode))
		codec = NULL;
	bfs_mutex_lock(&fs->lock);
	in = table_find(fs, st->st_dev, st->st_ino, codec);
	if (in) {
		in->nlookup++;
		if (fd >= 0)
			bfs_inode_fd_adopt(fs, in, fd, rd, false);
		bfs_mutex_unlock(&fs->lock);
		*out = in;
		return 0;
	}
	in = calloc(1, sizeof(*in));
	if (!in) {
		bfs_mutex_unlock(&fs->lock);
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	in->dev = st->st_dev;
	in->ino = st->st_ino;
	in->codec = codec;
	in->type = (uint16_t)(st->st_mode & S_IFMT);
	in->fd = -1;
	in->nlookup = 1;
	b = bucket(fs, st->st_dev, st->st_ino, codec);
	in->hnext = fs->table[b];
	fs->table[b] = in;
	fs->count++;
	maybe_grow(fs);
	if (fd >= 0)
		bfs_inode_fd_adopt(fs, in, fd, rd, false);
	bfs_mutex_unlock(&fs->lock);
	*out = in;
	return 0;
}

void bfs_inode_forget(struct bfs_fs *fs, struct bfs_inode *in, uint64_t nlookup)
{
	struct bfs_inode **pp;

	if (in == &fs->root)
		return;
	bfs_mutex_lock(&fs->lock);
	assert(in->nlookup >= nlookup);	/* the kernel forgets no more than it looked up */
	if (in->nlookup > nlookup) {
		in->nlookup -= nlookup;
		bfs_mutex_unlock(&fs->lock);
		return;
	}
	for (pp = &fs->table[bucket(fs, in->dev, in->ino, in->codec)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == in) {
			*pp = in->hnext;
			break;
		}
	}
	fs->count--;
	bfs_mutex_unlock(&fs->lock);
	inode_free(fs, in);
}

struct bfs_inode *bfs_inode_dir_rpath(struct bfs_fs *fs, const struct stat *st, char **rpath)
{
	struct bfs_inode *in;

	bfs_mutex_lock(&fs->lock);
	in = table_find(fs, st->st_dev, st->st_ino, NULL);
	if (in && in->type != S_IFDIR)
		in = NULL;
	if (in && rpath) {
		bfs_mutex_lock(bfs_ilock(fs, in));
		*rpath = in->rpath ? strdup(in->rpath) : NULL;
		bfs_mutex_unlock(bfs_ilock(fs, in));
	}
	bfs_mutex_unlock(&fs->lock);
	return in;
}

size_t bfs_inode_count(struct bfs_fs *fs)
{
	size_t n;

	bfs_mutex_lock(&fs->lock);
	n = fs->count;
	bfs_mutex_unlock(&fs->lock);
	return n;
}

/* Remember where @in was last seen, for sidecars and log lines. */
static void set_rpath(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_inode *in,
		      const char *backing)
{
	char path[PATH_MAX];
	char *p = NULL;
	int n;

	bfs_mutex_lock(bfs_ilock(fs, dir));
	if (strcmp(dir->rpath, ".") == 0)
		n = snprintf(path, sizeof(path), "%s", backing);
	else
		n = snprintf(path, sizeof(path), "%s/%s", dir->rpath, backing);
	bfs_mutex_unlock(bfs_ilock(fs, dir));
	if (n < 0 || (size_t)n >= sizeof(path))
		return;			/* keep the old path: it only names things */
	bfs_mutex_lock(bfs_ilock(fs, in));
	/* a lookup after a timeout finds it where it was: no allocation */
	if (!in->rpath || strcmp(in->rpath, path) != 0) {
		p = strdup(path);
		if (p) {
			free(in->rpath);
			in->rpath = p;
		}
	}
	bfs_mutex_unlock(bfs_ilock(fs, in));
}

static int stat_shown(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st);

/*
 * The inode of backing entry @backing of @dir (open as @dfd), shown with
 * @codec; its attributes in @st. A name looked up again (the kernel's
 * entry timed out) costs one fstatat and no open while the inode is known;
 * a new inode keeps the descriptor its stat was taken from, open for
 * reading when it is a regular file, so that its versions need no open
 * of their own. @sc: the snapshot the name was resolved in, or NULL.
 */
static int lookup_backing(struct bfs_fs *fs, struct bfs_inode *dir, int dfd,
			  struct bfs_snap_ctx *sc, const char *backing,
			  const struct bfs_codec *codec, struct bfs_inode **out, struct stat *st)
{
	struct bfs_inode *in;
	uint64_t stamp, size;
	bool rd, decoded;
	int fd = -1, rc;
	dev_t dev;
	ino_t ino;

	/*
	 * A regular file as listed, not known here, whose size no memo
	 * gives: it is to be opened anyway, and its stat is taken from the
	 * descriptor (one fstatat a file less). Else, or if it cannot be
	 * opened for reading, by name.
	 */
	if (sc && bfs_snap_new_file(sc, backing, &dev, &ino) && !inode_known(fs, dev, ino, codec)) {
		fd = bfs_backing_openat(fs, dfd, backing, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
		if (codec)
			BFS_COUNT(fs->env.mount, lookup_opens, 1);
		if (fd >= 0 && fstat(fd, st) < 0) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0 && fstatat(dfd, backing, st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	decoded = codec && S_ISREG(st->st_mode);
	stamp = bfs_backing_stamp(st);
	in = inode_ref(fs, st, S_ISREG(st->st_mode) ? codec : NULL);
	if (fd >= 0 && (in || !S_ISREG(st->st_mode))) {
		close(fd);		/* known meanwhile, or not a file after all: as below */
		fd = -1;
	}
	if (!in && fd < 0 && decoded && sc && bfs_snap_size(sc, backing, stamp, &size)) {
		/* its size is known (a memo): no open until someone reads it */
		rc = inode_get(fs, -1, false, st, codec, &in);
		if (rc < 0)
			return rc;
		bfs_mutex_lock(bfs_ilock(fs, in));
		if (in->stamp != stamp && !in->file) {
			in->stamp = stamp;
			in->memo = size;
		}
		bfs_mutex_unlock(bfs_ilock(fs, in));
	} else if (fd >= 0) {
		rc = inode_get(fs, fd, true, st, codec, &in);	/* opened first, above */
		if (rc < 0)
			return rc;
	} else if (!in) {
		rd = S_ISREG(st->st_mode);
		fd = rd ? bfs_backing_openat(fs, dfd, backing, O_RDONLY | O_NOFOLLOW | O_NONBLOCK) : -1;
		if (rd && codec)
			BFS_COUNT(fs->env.mount, lookup_opens, 1);
		if (fd < 0) {
			rd = false;	/* not a regular file, or unreadable: stat still works */
			fd = bfs_backing_openat(fs, dfd, backing, O_PATH | O_NOFOLLOW);
		}
		if (fd < 0)
			return -errno;
		if (fstat(fd, st) < 0) {
			rc = -errno;
			close(fd);
			return rc;
		}
		stamp = bfs_backing_stamp(st);
		rc = inode_get(fs, fd, rd && S_ISREG(st->st_mode), st, codec, &in);
		if (rc < 0)
			return rc;
	}
	set_rpath(fs, dir, in, backing);
	rc = stat_shown(fs, in, st);
	if (rc < 0) {
		bfs_inode_forget(fs, in, 1);
		return rc;
	}
	if (sc && decoded) {
		/*
		 * The size of the version the stamp names (not one open readers
		 * hold on to); none for a misnamed file, whose lookups must build
		 * its version, which refuses its opens.
		 */
		bfs_mutex_lock(bfs_ilock(fs, in));
		size = in->stamp == stamp && !(in->file && in->file->found) ? in->memo : UINT64_MAX;
		bfs_mutex_unlock(bfs_ilock(fs, in));
		if (size != UINT64_MAX)
			bfs_snap_note_size(sc, backing, stamp, size);
	}
	*out = in;
	return 0;
}

/* Tries: a file rewritten in place between resolving and looking up resolves again. */
#define LOOKUP_TRIES 3

int bfs_inode_lookup(struct bfs_fs *fs, struct bfs_inode *dir, const char *name,
		     struct bfs_inode **out, struct stat *st)
{
	const struct bfs_codec *codec;
	char backing[NAME_MAX + 1];
	struct bfs_snap_ctx sc = { .fs = fs };
	struct sysdir d = { .fs = fs };
	int rc = 0, dfd;

	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	dfd = bfs_inode_fd(fs, dir);
	if (dfd < 0)
		return dfd;
	sc.dirfd = d.fd = dfd;
	/* No snapshot (no memory, an unreadable directory): ask the directory itself. */
	rc = bfs_snap_get(fs, dfd, &sc.snap);
	if (rc < 0)
		sc.snap = NULL;
	for (int i = 0; i < LOOKUP_TRIES && rc != -ESTALE; i++) {	/* ESTALE: removed */
		if (sc.snap)
			rc = bfs_name_resolve(&bfs_snap_name_ops, &sc, name, backing, &codec,
					      fs->opts->keep_compressed, &fs->env.codecs);
		else
			rc = bfs_name_resolve(&sys_name_ops, &d, name, backing, &codec,
					      fs->opts->keep_compressed, &fs->env.codecs);
		if (d.err) {
			rc = d.err;	/* an answer made of failed stats is no answer */
			break;
		}
		if (rc == 0)
			rc = lookup_backing(fs, dir, dfd, sc.snap ? &sc : NULL, backing, codec, out,
					    st);
		if (rc != -EAGAIN)
			break;
	}
	if (rc == 0 && sc.snap && S_ISDIR(st->st_mode))
		bfs_snap_ahead(&sc, backing);	/* a walk lists it next, then its siblings */
	bfs_snap_put(sc.snap);
	bfs_inode_fd_put(fs, dir);
	return rc == -EAGAIN ? -ESTALE : rc;
}

int bfs_inode_lookup_entry(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_snap_ctx *c,
			   const struct bfs_dirent *de, struct bfs_inode **out, struct stat *st)
{
	return lookup_backing(fs, dir, c->dirfd, c, de->backing, de->codec, out, st);
}

/* --- file versions -------------------------------------------------------- */

/* The sidecar index beside @in's backing file, if one exists and is not older. */
static int open_sidecar(struct bfs_fs *fs, struct bfs_inode *in, const struct stat *st)
{
	struct stat sst;
	char *path;
	int fd;

	if (!in->codec->sidecar || asprintf(&path, "%s%s", in->rpath, in->codec->sidecar) < 0)
		return -1;
	fd = bfs_backing_open_beneath(fs->root_fd, path, O_RDONLY | O_NONBLOCK);
	free(path);
	if (fd < 0)
		return -1;
	/* An index older than its file describes some earlier file. */
	if (fstat(fd, &sst) < 0 || !S_ISREG(sst.st_mode) ||
	    sst.st_mtim.tv_sec < st->st_mtim.tv_sec ||
	    (sst.st_mtim.tv_sec == st->st_mtim.tv_sec && sst.st_mtim.tv_nsec < st->st_mtim.tv_nsec)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Give version @f of the file at @rpath the hints that apply there now. */
static void apply_hints(struct bfs_fs *fs, const char *rpath, struct bfs_file *f)
{
	int adv = bfs_hints_effective(&fs->hints, rpath, BFS_HINT_ADVICE, fs->env.advice);

	atomic_store(&f->advice, adv);
	atomic_store(&f->readpath,
		     bfs_hints_effective(&fs->hints, rpath, BFS_HINT_READPATH, fs->env.readpath));
	bfs_file_advise(f, adv, 0, 0);
}

/* Is @path @dir itself or below it? ("." holds everything.) */
static bool below(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (strcmp(dir, ".") == 0)
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The current version of regular file @in takes its hints again, if it is below @dir. */
static void reapply_one(struct bfs_fs *fs, struct bfs_inode *in, const char *dir)
{
	struct bfs_file *f = NULL;
	int adv = 0;

	bfs_mutex_lock(bfs_ilock(fs, in));
	if (in->file && in->rpath && (!dir || below(in->rpath, dir))) {
		adv = bfs_hints_effective(&fs->hints, in->rpath, BFS_HINT_ADVICE, fs->env.advice);
		atomic_store(&in->file->advice, adv);
		atomic_store(&in->file->readpath, bfs_hints_effective(&fs->hints, in->rpath,
								      BFS_HINT_READPATH,
								      fs->env.readpath));
		f = bfs_file_get(in->file);
	}
	bfs_mutex_unlock(bfs_ilock(fs, in));
	if (f) {
		bfs_file_advise(f, adv, 0, 0);
		bfs_file_put(f);
	}
	/* Never built: apply_hints() reads the store when it is. */
}

void bfs_inode_reapply_hints(struct bfs_fs *fs, struct bfs_inode *in, const char *dir)
{
	struct bfs_inode **pin = NULL;
	size_t n = 0;

	if (!dir) {
		reapply_one(fs, in, NULL);
		return;
	}
	bfs_mutex_lock(&fs->lock);
	if (fs->count)
		pin = malloc(fs->count * sizeof(*pin));
	for (size_t i = 0; pin && i < fs->nbuckets; i++) {
		for (struct bfs_inode *p = fs->table[i]; p; p = p->hnext) {
			if (p->type != S_IFREG)
				continue;
			p->nlookup++;		/* dropped by bfs_inode_forget() below */
			pin[n++] = p;
		}
	}
	bfs_mutex_unlock(&fs->lock);
	for (size_t i = 0; i < n; i++) {
		reapply_one(fs, pin[i], dir);
		bfs_inode_forget(fs, pin[i], 1);
	}
	free(pin);
}

/*
 * A version that took a backing file this small or smaller to build (one
 * read: file.c reads such a file whole to index it) is dropped when nobody
 * reads it, and built again at the next open; what stat needs stays in
 * the inode's memo. A larger one keeps its index: walking the blocks of a
 * stock lz4 file again would cost a read per block.
 */
#define CHEAP_VERSION (128u << 10)

/*
 * Only its inode holds version @f, nothing of it is cached, and building it
 * again is cheap. A misnamed file's version is kept: it is small, and an
 * open without it (bfs_inode_open()'s deferral) would not refuse the file.
 */
static bool droppable(struct bfs_file *f)
{
	return atomic_load(&f->refs) == 1 && atomic_load(&f->ctr->cached) == 0 && !f->found &&
	       (!f->codec || f->st.st_size <= (off_t)CHEAP_VERSION);
}

/*
 * @in's version went idle (built for a stat, or a handle released): it is
 * kept while @in is among the last BFS_IDLE_KEEP inodes this happened to,
 * with its counters and index, so that the open that follows a listing
 * and the stats read after a close find it. The inode that falls out of
 * the ring loses its version if that is droppable(). The ring holds a
 * lookup of each inode in it, so none is freed there.
 * Context: no inode lock held (it takes the one of the inode that falls out).
 */
static void went_idle(struct bfs_fs *fs, struct bfs_inode *in)
{
	struct bfs_inode *out;
	struct bfs_file *f;
	bool had;

	if (in == &fs->root)
		return;
	bfs_mutex_lock(&fs->idle_lock);
	had = in->idle;
	bfs_mutex_unlock(&fs->idle_lock);
	if (had)
		return;
	bfs_inode_hold(fs, in);		/* the ring's */
	bfs_mutex_lock(&fs->idle_lock);
	had = in->idle;			/* another thread put it in meanwhile */
	out = had ? in : fs->idle[fs->idle_next];
	if (!had) {
		in->idle = true;
		fs->idle[fs->idle_next] = in;
		fs->idle_next = (fs->idle_next + 1) % BFS_IDLE_KEEP;
		if (out)
			out->idle = false;
	}
	bfs_mutex_unlock(&fs->idle_lock);
	if (!out)
		return;
	if (!had) {
		bfs_mutex_lock(bfs_ilock(fs, out));
		f = out->file;
		if (f && droppable(f))
			out->file = NULL;	/* its size stays in the memo */
		else
			f = NULL;
		bfs_mutex_unlock(bfs_ilock(fs, out));
		bfs_file_put(f);
	}
	bfs_inode_forget(fs, out, 1);
}

void bfs_inode_hold(struct bfs_fs *fs, struct bfs_inode *in)
{
	bfs_mutex_lock(&fs->lock);
	in->nlookup++;
	bfs_mutex_unlock(&fs->lock);
}

void bfs_inode_idle(struct bfs_fs *fs, struct bfs_inode *in)
{
	went_idle(fs, in);
}

/*
 * The whole of backing file @st, small enough that its version keeps it,
 * read by the inode's descriptor @fd if that is open for reading and the
 * bytes are in the page cache; else NULL, and the version is built as
 * for any file (a duplicate of the descriptor, closed again once read).
 */
static uint8_t *read_kept(int fd, const struct stat *st)
{
	size_t size = (size_t)st->st_size;
	uint8_t *b;

	if (st->st_size <= 0 || size > BFS_HEAD_KEEP || !(b = malloc(size)))
		return NULL;
	if (preadv2(fd, &(struct iovec){ .iov_base = b, .iov_len = size }, 1, 0, RWF_NOWAIT) !=
	    (ssize_t)size) {
		free(b);
		return NULL;	/* O_PATH (EBADF), not cached (EAGAIN), or changed meanwhile */
	}
	return b;
}

/* A slot to show the walk of @in of a @total-byte file in, or NULL when all are taken. */
static struct bfs_walking *walk_begin(struct bfs_fs *fs, const struct bfs_inode *in,
				      uint64_t total)
{
	struct bfs_walking *w = NULL;

	bfs_mutex_lock(&fs->walks_lock);
	for (size_t i = 0; i < BFS_WALKS_SHOWN && !w; i++) {
		if (!fs->walks[i].in) {
			w = &fs->walks[i];
			w->in = in;
			w->total = total;
			atomic_store(&w->done, 0);
		}
	}
	bfs_mutex_unlock(&fs->walks_lock);
	return w;
}

static void walk_end(struct bfs_fs *fs, struct bfs_walking *w)
{
	if (!w)
		return;
	bfs_mutex_lock(&fs->walks_lock);
	w->in = NULL;
	bfs_mutex_unlock(&fs->walks_lock);
}

/* @v bytes as "1.2 GiB", "512 B" */
static void human(uint64_t v, char *buf, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double d = (double)v / 1024;
	size_t u = 0;

	if (v < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", v);
		return;
	}
	while (d >= 1024 && u + 1 < BFS_ARRAY_SIZE(units)) {
		d /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f %s", d, units[u]);
}

int bfs_inode_walking(struct bfs_fs *fs, const struct bfs_inode *in, char *buf, size_t len)
{
	char done[32], total[32];
	int n = 0;

	bfs_mutex_lock(&fs->walks_lock);
	for (size_t i = 0; i < BFS_WALKS_SHOWN && !n; i++) {
		if (fs->walks[i].in == in) {
			human(atomic_load(&fs->walks[i].done), done, sizeof(done));
			human(fs->walks[i].total, total, sizeof(total));
			n = snprintf(buf, len, "walking %s of %s", done, total);
		}
	}
	bfs_mutex_unlock(&fs->walks_lock);
	return n;
}

/* A version of @in read through @fd (bfs_file_open()), its sidecar and walk too. */
static int build(struct bfs_fs *fs, struct bfs_inode *in, int fd, const struct stat *fd_st,
		 const struct stat *now, struct bfs_file **out)
{
	int side = in->codec ? open_sidecar(fs, in, now) : -1, rc;
	struct bfs_walking *w = in->codec ? walk_begin(fs, in, (uint64_t)now->st_size) : NULL;

	rc = bfs_file_open(out, fd, fd_st, side, in->codec, in->rpath ? in->rpath : "?", &fs->env,
			   w ? &w->done : NULL);
	walk_end(fs, w);
	if (side >= 0)
		close(side);
	return rc;
}

/*
 * Current version given the backing file's stat @now; inode lock held,
 * @opath: @in's pinned descriptor. A new version comes back with its
 * descriptor closed: a stat needs only its size. *@changed: an older
 * version, or the memo of one that was dropped, saw other bytes.
 */
static int current_locked(struct bfs_fs *fs, struct bfs_inode *in, int opath,
			  const struct stat *now, struct bfs_file **out,
			  bool *changed)
{
	struct bfs_file *f, *old = in->file;
	const struct stat *fd_st = NULL;
	uint8_t *whole = NULL;
	int fd = -1, side = -1, rc;
	bool kept = false;

	*changed = false;
	if (old && !bfs_file_stale(old, now)) {
		*out = bfs_file_get(old);
		return 0;
	}
	/*
	 * Unchanged since a version was last built (one dropped when idle),
	 * or never built: the inode's descriptor serves (a small file is
	 * read whole through it: read_kept()).
	 * Changed (a chmod too): opened again, so that the backing file's
	 * permissions are asked anew. @now, taken just before of this very
	 * inode, is the inode descriptor's stat: the version need not take
	 * it again (one fstat a lookup). A file whose version keeps its bytes
	 * is read through that descriptor itself (no duplicate to close).
	 */
	if (old || (in->stamp != 0 && in->stamp != bfs_backing_stamp(now))) {
		fd = bfs_backing_reopen(fs, opath, O_RDONLY);
	} else if (in->codec && (whole = read_kept(opath, now))) {
		kept = true;
	} else {
		fd = bfs_inode_rdfd(fs, in, opath, 0);
		fd_st = now;
	}
	if (!whole && fd < 0)
		return -errno;
	if (whole) {
		side = in->codec ? open_sidecar(fs, in, now) : -1;
		rc = bfs_file_open_whole(&f, whole, now, side, in->codec,
					 in->rpath ? in->rpath : "?", &fs->env);
		if (side >= 0)
			close(side);
	} else {
		rc = build(fs, in, fd, fd_st, now, &f);
	}
	if (rc < 0 && fd_st && bfs_inode_fd_revive(fs, in, in->rpath, rc) == 0) {
		/* the inode's descriptor, duplicated, had died (sshfs reconnected): once more */
		close(fd);
		fd = bfs_inode_rdfd(fs, in, opath, 0);
		if (fd < 0)
			return -errno;
		rc = build(fs, in, fd, fd_st, now, &f);
	}
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		bfs_err("%s: cannot index: %s", in->rpath ? in->rpath : "?", strerror(-rc));
		return rc;
	}
	if (kept)
		BFS_COUNT(f->ctr, syscalls, 1);	/* read_kept()'s read, as the version's own */
	apply_hints(fs, in->rpath ? in->rpath : "", f);	/* its advice, before anyone reads */
	if (fd >= 0)
		bfs_file_unuse(f);	/* its descriptor, until someone reads */
	if (old)
		bfs_file_supersede(old);	/* its pushes end before the kernel drops its pages */
	in->file = f;
	*out = bfs_file_get(f);
	*changed = old != NULL || (in->stamp != 0 && in->stamp != bfs_backing_stamp(&f->st));
	in->stamp = bfs_backing_stamp(&f->st);	/* what it was built from: @now, or newer */
	in->memo = bfs_file_size(f);
	bfs_file_put(old);		/* open readers keep it alive */
	return 0;
}

static int stat_fd(int opath, struct stat *st)
{
	return fstatat(opath, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/*
 * st_nlink counts only names that show the same bytes, or copy tools
 * would link names of one view to the other's bytes. Which names of a
 * backing inode show it decoded depends on each name and its directory,
 * and finding them all would mean walking SOURCE. So a decoded view says
 * 1: its names are copied in full, never linked (a link lost, no byte
 * wrong). A raw view keeps the backing count when every name of it is
 * shown raw: always with keep_compressed, else when no codec claims its
 * bytes (one small read, only for regular files with several names);
 * otherwise 1.
 */
static bool links_need_fd(struct bfs_fs *fs, const struct bfs_inode *in, const struct stat *st)
{
	return S_ISREG(st->st_mode) && st->st_nlink > 1 && !in->codec &&
	       !fs->opts->keep_compressed;
}

static void shown_links(struct bfs_fs *fs, int opath, struct bfs_inode *in, struct stat *st)
{
	if (!S_ISREG(st->st_mode) || st->st_nlink <= 1)
		return;
	/* keep_compressed shows every name raw, the decoded ones as well: all count */
	if (in->codec || (!fs->opts->keep_compressed &&
			  bfs_backing_sniff_fd(&fs->env.codecs,
						 bfs_inode_rdfd(fs, in, opath, O_NONBLOCK))))
		st->st_nlink = 1;
}

/* The backing object's stat @st made what the view @in shows, but the size. */
static void shown_attrs(struct bfs_fs *fs, int opath, struct bfs_inode *in, struct stat *st)
{
	st->st_blksize = BFS_BLKSIZE;
	st->st_ino = bfs_inode_shown_ino(st->st_ino, in->codec);
	shown_links(fs, opath, in, st);
}

/*
 * Backing stat @st of @in made what it shows. The size of a decoded file
 * comes from the version open readers hold, else from the memo while the
 * backing file's stamp is the one it was found under, else from a version
 * built now (and dropped again if cheap). Only that last reads the file.
 */
static int stat_shown(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st)
{
	bool decoded = in->codec && S_ISREG(st->st_mode), known = false, built = false, changed;
	bool kernel_open = atomic_load_explicit(&fs->kernel_open, memory_order_relaxed);
	uint64_t stamp = bfs_backing_stamp(st), size = 0;
	struct bfs_file *f;
	int fd = -1, rc = 0;

	if (decoded) {
		bfs_mutex_lock(bfs_ilock(fs, in));
		/*
		 * While open readers hold the current version, keep showing it:
		 * the kernel's one i_size serves them too, and a reader whose
		 * backing file shrank must meet EIO, not an early end of file.
		 * The next open, or a stat once they have let go, sees the new
		 * file. With kernel_open no reader has it open as far as blockfs
		 * knows (the ring's shared handles hold versions): the new file
		 * is shown, and READs build a version of it (fs.c).
		 */
		if (in->file && atomic_load(&in->file->readers) > 0 && !kernel_open) {
			size = bfs_file_size(in->file);
			known = true;
		} else if (in->stamp == stamp) {
			size = in->memo;
			known = true;
			in->kstale = false;	/* the size of the bytes READs will build from */
		}
		bfs_mutex_unlock(bfs_ilock(fs, in));
	}
	if ((decoded && !known) || links_need_fd(fs, in, st)) {
		fd = bfs_inode_fd(fs, in);
		if (fd < 0)
			return fd;
	}
	if (decoded && !known) {
		bfs_mutex_lock(bfs_ilock(fs, in));
		if (in->file && atomic_load(&in->file->readers) > 0 && !kernel_open) {
			size = bfs_file_size(in->file);
		} else {
			rc = current_locked(fs, in, fd, st, &f, &changed);
			if (rc == 0) {
				size = bfs_file_size(f);
				bfs_file_put(f);	/* in->file holds it still */
				built = true;
				in->kstale = false;
			}
		}
		bfs_mutex_unlock(bfs_ilock(fs, in));
	}
	/* current_locked() needs the backing stat as it is: the view's after */
	if (rc == 0)
		shown_attrs(fs, fd, in, st);
	if (fd >= 0)
		bfs_inode_fd_put(fs, in);
	if (built)
		went_idle(fs, in);
	if (rc == 0 && decoded)
		st->st_size = (off_t)size;
	return rc;
}

/*
 * The current version of regular file @in, by its descriptor @fd that the
 * caller holds pinned, or (-1) that this pins; its stat in @now if @fresh
 * is false.
 */
static int file_of(struct bfs_fs *fs, struct bfs_inode *in, int fd, struct stat *now, bool fresh,
		   struct bfs_file **out, bool *changed)
{
	bool pin = fd < 0;
	int rc;

	if (pin && (fd = bfs_inode_fd(fs, in)) < 0)
		return fd;
	rc = fresh ? stat_fd(fd, now) : 0;
	if (rc == 0 && !S_ISREG(now->st_mode))
		rc = -EINVAL;
	if (rc == 0) {
		bfs_mutex_lock(bfs_ilock(fs, in));
		rc = current_locked(fs, in, fd, now, out, changed);
		bfs_mutex_unlock(bfs_ilock(fs, in));
	}
	if (pin)
		bfs_inode_fd_put(fs, in);
	return rc;
}

int bfs_inode_file(struct bfs_fs *fs, struct bfs_inode *in, struct bfs_file **out,
		   bool *changed)
{
	struct stat now;

	return file_of(fs, in, -1, &now, true, out, changed);
}

int bfs_inode_use(struct bfs_fs *fs, struct bfs_inode *in, struct bfs_file *f)
{
	struct stat st;
	int opath, fd, rc = 0;

	if (bfs_file_use(f))
		return 0;
	opath = bfs_inode_fd(fs, in);
	if (opath < 0)
		return opath;
	fd = bfs_inode_rdfd(fs, in, opath, 0);
	if (fd < 0)
		rc = -errno;
	else if (fstat(fd, &st) < 0)
		rc = -errno;
	else if (bfs_file_stale(f, &st))
		rc = -ESTALE;		/* changed since: the retried open builds anew */
	bfs_inode_fd_put(fs, in);
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	bfs_file_use_fd(f, fd);
	return 0;
}

/*
 * The backing object's stat now, by the cached descriptor if there is one,
 * else by path (bfs_inode_check_name()): no open either way, unless the
 * path cannot tell.
 */
static int stat_now(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st)
{
	int rc, fd = bfs_inode_fd_cached(fs, in);

	if (fd < 0) {
		rc = bfs_inode_check_name(fs, in, st);
		if (rc <= 0)
			return rc;
		fd = bfs_inode_fd(fs, in);
		if (fd < 0)
			return fd;
	}
	rc = stat_fd(fd, st);
	bfs_inode_fd_put(fs, in);
	return rc;
}

int bfs_inode_stat(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st)
{
	int rc = stat_now(fs, in, st);

	return rc < 0 ? rc : stat_shown(fs, in, st);
}

int bfs_inode_stat_version(struct bfs_fs *fs, struct bfs_inode *in, const struct bfs_file *f,
			   struct stat *st)
{
	/*
	 * The handle holds a use of the version's descriptor: it stays open,
	 * on this object. Of a kept head, which its readers use instead of a
	 * descriptor (bfs_file_use()), the stat it was built with serves.
	 */
	int rc = 0;

	if (f->head)
		*st = f->st;
	else if (fstat(f->fd, st) < 0)
		rc = -errno;
	if (rc == 0)
		shown_attrs(fs, f->head ? -1 : f->fd, in, st);
	if (rc == 0 && in->codec)
		st->st_size = (off_t)bfs_file_size(f);
	return rc;
}

/* An open of @in, whose backing file is @now, may go without a version: bfs_inode_open(). */
static bool may_defer(struct bfs_fs *fs, struct bfs_inode *in, const struct stat *now)
{
	bool ok;

	if (!in->codec || !S_ISREG(now->st_mode))
		return false;	/* shown unchanged: its version is a descriptor, no more */
	bfs_mutex_lock(bfs_ilock(fs, in));
	ok = !in->file && in->stamp != 0 && in->stamp == bfs_backing_stamp(now);
	bfs_mutex_unlock(bfs_ilock(fs, in));
	return ok;
}

int bfs_inode_open(struct bfs_fs *fs, struct bfs_inode *in, struct bfs_file **out,
		   bool *changed, uint64_t *defer)
{
	struct stat now;
	bool named = false;
	int rc, fd = -1;

	/*
	 * An open that may go without a version asks the path alone. Else,
	 * with no descriptor cached, the one opened by path now is the check
	 * of the name, and its stat is fresh: one stat by path fewer (the
	 * first READ after a deferred open of a small file). If that open
	 * fails, the path's own check says why, as it did before.
	 */
	if (!defer)
		fd = bfs_inode_fd_named(fs, in, &now, &named);
	rc = named ? 0 : bfs_inode_check_name(fs, in, &now);
	/* rc 1: the path could not tell; the descriptor's stat decides below */
	if (rc == 0 && defer && may_defer(fs, in, &now)) {
		*defer = bfs_backing_stamp(&now);
		return 1;
	}
	if (rc >= 0)
		rc = file_of(fs, in, fd, &now, rc > 0, out, changed);
	if (fd >= 0)
		bfs_inode_fd_put(fs, in);
	if (rc < 0)
		return rc;
	rc = bfs_file_misnamed(*out);	/* a plain text called x.gz: cat says EIO at once */
	if (rc == 0)
		rc = bfs_inode_use(fs, in, *out);
	if (rc < 0) {
		bfs_file_put(*out);
		*out = NULL;		/* no version, no use of it: callers test it */
	}
	return rc;
}
