// SPDX-License-Identifier: MIT
/*
 * File versions and attributes as shown (contract in version.h): the
 * current version of a regular file, built when the backing file changed
 * (with its sidecar, its hints, the walk shown while it runs), the size a
 * stat shows (an open reader's version, the memo, or a version built
 * now), and opens: the name checked, the version deferred when the
 * kernel's pages can serve.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/hints.h"
#include "blockfs/log.h"
#include "blockfs/stats.h"
#include "facts.h"
#include "fs_i.h"
#include "inode.h"
#include "version.h"

/* Large enough that coreutils and stdio read a mounted file in big chunks. */
#define BFS_BLKSIZE (1u << 20)

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
	    (sst.st_mtim.tv_sec == st->st_mtim.tv_sec &&
	     sst.st_mtim.tv_nsec < st->st_mtim.tv_nsec)) {
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
		return NULL; /* O_PATH (EBADF), not cached (EAGAIN), or changed meanwhile */
	}
	return b;
}

void bfs_version_walks_init(struct bfs_walks *w)
{
	bfs_mutex_init(&w->lock);
}

void bfs_version_walks_destroy(struct bfs_walks *w)
{
	pthread_mutex_destroy(&w->lock);
}

/* A slot to show the walk of @in of a @total-byte file in, or NULL when all are taken. */
static struct bfs_walking *walk_begin(struct bfs_fs *fs, const struct bfs_inode *in, uint64_t total)
{
	struct bfs_walking *w = NULL;

	bfs_mutex_lock(&fs->walks.lock);
	for (size_t i = 0; i < BFS_WALKS_SHOWN && !w; i++) {
		if (!fs->walks.slot[i].in) {
			w = &fs->walks.slot[i];
			w->in = in;
			w->total = total;
			atomic_store(&w->done, 0);
		}
	}
	bfs_mutex_unlock(&fs->walks.lock);
	return w;
}

static void walk_end(struct bfs_fs *fs, struct bfs_walking *w)
{
	if (!w)
		return;
	bfs_mutex_lock(&fs->walks.lock);
	w->in = NULL;
	bfs_mutex_unlock(&fs->walks.lock);
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

int bfs_version_walking(struct bfs_fs *fs, const struct bfs_inode *in, char *buf, size_t len)
{
	char done[32], total[32];
	int n = 0;

	bfs_mutex_lock(&fs->walks.lock);
	for (size_t i = 0; i < BFS_WALKS_SHOWN && !n; i++) {
		if (fs->walks.slot[i].in == in) {
			human(atomic_load(&fs->walks.slot[i].done), done, sizeof(done));
			human(fs->walks.slot[i].total, total, sizeof(total));
			n = snprintf(buf, len, "walking %s of %s", done, total);
		}
	}
	bfs_mutex_unlock(&fs->walks.lock);
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
			  const struct stat *now, struct bfs_file **out, bool *changed)
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
		fd = bfs_backing_rdfd(fs, in, opath, 0);
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
	if (rc < 0 && fd_st && bfs_backing_fd_revive(fs, in, in->rpath, rc) == 0) {
		/* the inode's descriptor, duplicated, had died (sshfs reconnected): once more */
		close(fd);
		fd = bfs_backing_rdfd(fs, in, opath, 0);
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
		BFS_COUNT(f->ctr, syscalls, 1); /* read_kept()'s read, as the version's own */
	apply_hints(fs, in->rpath ? in->rpath : "", f); /* its advice, before anyone reads */
	if (fd >= 0)
		bfs_file_unuse(f); /* its descriptor, until someone reads */
	if (old)
		bfs_file_supersede(old); /* its pushes end before the kernel drops its pages */
	in->file = f;
	*out = bfs_file_get(f);
	*changed = old != NULL || (in->stamp != 0 && in->stamp != bfs_backing_stamp(&f->st));
	in->stamp = bfs_backing_stamp(&f->st); /* what it was built from: @now, or newer */
	in->memo = bfs_file_size(f);
	bfs_file_put(old); /* open readers keep it alive */
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
	return S_ISREG(st->st_mode) && st->st_nlink > 1 && !in->codec && !fs->opts->keep_compressed;
}

static void shown_links(struct bfs_fs *fs, int opath, struct bfs_inode *in, struct stat *st)
{
	if (!S_ISREG(st->st_mode) || st->st_nlink <= 1)
		return;
	/* keep_compressed shows every name raw, the decoded ones as well: all count */
	if (in->codec ||
	    (!fs->opts->keep_compressed &&
	     bfs_backing_sniff_fd(&fs->env.codecs, bfs_backing_rdfd(fs, in, opath, O_NONBLOCK))))
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
int bfs_version_shown(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st)
{
	bool decoded = in->codec && S_ISREG(st->st_mode), known = false, built = false, changed;
	bool kernel_open = atomic_load_explicit(&fs->kernel_open, memory_order_relaxed);
	uint64_t stamp = bfs_backing_stamp(st), size = 0;
	struct bfs_file *f;
	int fd = -1, rc = 0;

	if (decoded)
		known = bfs_facts_shown_size(fs, in, stamp, kernel_open, &size);
	if ((decoded && !known) || links_need_fd(fs, in, st)) {
		fd = bfs_backing_fd(fs, in);
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
				bfs_file_put(f); /* in->file holds it still */
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
		bfs_backing_fd_put(fs, in);
	if (built)
		bfs_inode_idle(fs, in);
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

	if (pin && (fd = bfs_backing_fd(fs, in)) < 0)
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
		bfs_backing_fd_put(fs, in);
	return rc;
}

int bfs_version_current(struct bfs_fs *fs, struct bfs_inode *in, struct bfs_file **out,
			bool *changed)
{
	struct stat now;

	return file_of(fs, in, -1, &now, true, out, changed);
}

int bfs_version_use(struct bfs_fs *fs, struct bfs_inode *in, struct bfs_file *f)
{
	struct stat st;
	int opath, fd, rc = 0;

	if (bfs_file_use(f))
		return 0;
	opath = bfs_backing_fd(fs, in);
	if (opath < 0)
		return opath;
	fd = bfs_backing_rdfd(fs, in, opath, 0);
	if (fd < 0)
		rc = -errno;
	else if (fstat(fd, &st) < 0)
		rc = -errno;
	else if (bfs_file_stale(f, &st))
		rc = -ESTALE; /* changed since: the retried open builds anew */
	bfs_backing_fd_put(fs, in);
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
 * else by path (bfs_backing_check_name()): no open either way, unless the
 * path cannot tell.
 */
static int stat_now(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st)
{
	int rc, fd = bfs_backing_fd_cached(fs, in);

	if (fd < 0) {
		rc = bfs_backing_check_name(fs, in, st);
		if (rc <= 0)
			return rc;
		fd = bfs_backing_fd(fs, in);
		if (fd < 0)
			return fd;
	}
	rc = stat_fd(fd, st);
	bfs_backing_fd_put(fs, in);
	return rc;
}

int bfs_version_stat(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st)
{
	int rc = stat_now(fs, in, st);

	return rc < 0 ? rc : bfs_version_shown(fs, in, st);
}

int bfs_version_stat_of(struct bfs_fs *fs, struct bfs_inode *in, const struct bfs_file *f,
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

/* An open of @in, whose backing file is @now, may go without a version: bfs_version_open(). */
static bool may_defer(struct bfs_fs *fs, struct bfs_inode *in, const struct stat *now)
{
	if (!in->codec || !S_ISREG(now->st_mode))
		return false; /* shown unchanged: its version is a descriptor, no more */
	return bfs_facts_memo_only(fs, in, bfs_backing_stamp(now));
}

int bfs_version_open(struct bfs_fs *fs, struct bfs_inode *in, struct bfs_file **out, bool *changed,
		     uint64_t *defer)
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
		fd = bfs_backing_fd_named(fs, in, &now, &named);
	rc = named ? 0 : bfs_backing_check_name(fs, in, &now);
	/* rc 1: the path could not tell; the descriptor's stat decides below */
	if (rc == 0 && defer && may_defer(fs, in, &now)) {
		*defer = bfs_backing_stamp(&now);
		return 1;
	}
	if (rc >= 0)
		rc = file_of(fs, in, fd, &now, rc > 0, out, changed);
	if (fd >= 0)
		bfs_backing_fd_put(fs, in);
	if (rc < 0)
		return rc;
	rc = bfs_file_misnamed(*out); /* a plain text called x.gz: cat says EIO at once */
	if (rc == 0)
		rc = bfs_version_use(fs, in, *out);
	if (rc < 0) {
		bfs_file_put(*out);
		*out = NULL; /* no version, no use of it: callers test it */
	}
	return rc;
}
