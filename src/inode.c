// SPDX-License-Identifier: MIT
/*
 * Inodes, lookups and listings: the bridge between backing directories
 * and what the mount shows. Inodes follow passthrough_ll, counted by
 * lookup/forget and found again by identity, except that their O_PATH
 * descriptors are a bounded cache rather than one pinned per inode (see
 * "descriptors" below). No FUSE types here; ops.c translates.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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

/* --- opening backing files ------------------------------------------------ */

/* A real descriptor for the object behind an O_PATH one. */
static int reopen(int opath_fd, int flags)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", opath_fd);
	return open(path, flags | O_CLOEXEC);
}

/*
 * Open @rpath below @root without following any symbolic link, so a link
 * in SOURCE can never lead blockfs itself outside SOURCE.
 */
static int open_beneath(int root, const char *rpath, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	return (int)syscall(SYS_openat2, root, rpath, &how, sizeof(how));
}

static void fd_shed(struct bfs_fs *fs);

/* Out of descriptors? Then close every idle cached one: 1 to try again. */
static bool shed_on_emfile(struct bfs_fs *fs)
{
	if (errno != EMFILE && errno != ENFILE)
		return false;
	fd_shed(fs);
	return true;
}

/* openat(2), trying once more after shedding cached descriptors. */
static int openat_fs(struct bfs_fs *fs, int dirfd, const char *name, int flags)
{
	int fd = openat(dirfd, name, flags | O_CLOEXEC);

	if (fd < 0 && shed_on_emfile(fs))
		fd = openat(dirfd, name, flags | O_CLOEXEC);
	return fd;
}

/* The codec that claims the file open as @fd (consumed), or NULL. */
static const struct bfs_codec *sniff_fd(int fd)
{
	const struct bfs_codec *c = NULL;
	struct bfs_io io;
	struct stat st;

	if (fd < 0)
		return NULL;		/* unreadable: shown unchanged, reads say why */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		bfs_io_init_fd(&io, fd, (uint64_t)st.st_size);
		c = bfs_codec_sniff(&io);
	}
	close(fd);
	return c;
}

/* The codec that claims regular file @name in @dirfd, or NULL. */
static const struct bfs_codec *sniff(struct bfs_fs *fs, int dirfd, const char *name)
{
	return sniff_fd(openat_fs(fs, dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
}

/* --- name questions answered with syscalls (lookup) ----------------------- */

struct sysdir {
	struct bfs_fs *fs;
	int fd;
};

static bool sys_exists(void *ctx, const char *name)
{
	struct stat st;

	return fstatat(((struct sysdir *)ctx)->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool sys_claims(void *ctx, const char *name, const struct bfs_codec *codec)
{
	struct sysdir *d = ctx;

	return sniff(d->fs, d->fd, name) == codec;
}

static const struct bfs_name_ops sys_name_ops = { .exists = sys_exists, .claims = sys_claims };

/* --- descriptors ---------------------------------------------------------- */

/*
 * passthrough_ll pins an O_PATH descriptor per inode, and the kernel may
 * hold lookups of every file of a tree (ls -lR): a tree larger than the
 * descriptor limit then fails with EMFILE. Here at most fs->max_fds stay
 * open, least recently used closed first; a closed one is opened again
 * by path below SOURCE and must still be the same object. What that
 * costs: an inode whose path no longer names it (its backing file was
 * renamed or deleted) can be reached only while its descriptor stays
 * open; afterwards it is -ESTALE, and the VFS looks the name up again.
 * Pinned descriptors (in use by an operation) are never closed, so the
 * bound may be overshot by the operations in flight.
 */

/* A quarter of the limit: the rest is for open files and transients. */
static size_t fd_budget(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 4096;
	return rl.rlim_cur / 4 > 16 ? (size_t)rl.rlim_cur / 4 : 16;
}

/* Unlink @in from the LRU list; fs->fd_lock held. */
static void fd_unlink(struct bfs_fs *fs, struct bfs_inode *in)
{
	*(in->fd_prev ? &in->fd_prev->fd_next : &fs->fd_mru) = in->fd_next;
	*(in->fd_next ? &in->fd_next->fd_prev : &fs->fd_lru) = in->fd_prev;
	in->fd_prev = in->fd_next = NULL;
}

/* Make @in the most recently used; fs->fd_lock held. */
static void fd_push(struct bfs_fs *fs, struct bfs_inode *in)
{
	in->fd_prev = NULL;
	in->fd_next = fs->fd_mru;
	*(fs->fd_mru ? &fs->fd_mru->fd_prev : &fs->fd_lru) = in;
	fs->fd_mru = in;
}

/* Close unpinned descriptors, oldest first, down to @keep; fs->fd_lock held. */
static void fd_trim_to(struct bfs_fs *fs, size_t keep)
{
	struct bfs_inode *in = fs->fd_lru, *prev;

	for (; in && fs->nfds > keep; in = prev) {
		prev = in->fd_prev;
		if (in->fd_pins)
			continue;
		fd_unlink(fs, in);
		close(in->fd);
		in->fd = -1;
		fs->nfds--;
	}
}

static void fd_trim(struct bfs_fs *fs)
{
	fd_trim_to(fs, fs->max_fds);
}

/* The process ran out of descriptors: give back every idle one we cache. */
static void fd_shed(struct bfs_fs *fs)
{
	pthread_mutex_lock(&fs->fd_lock);
	fd_trim_to(fs, 0);
	pthread_mutex_unlock(&fs->fd_lock);
}

/* Give @in descriptor @fd (consumed), unless it has one; fs->fd_lock held. */
static void fd_adopt(struct bfs_fs *fs, struct bfs_inode *in, int fd)
{
	if (in->fd >= 0) {
		close(fd);
		return;
	}
	in->fd = fd;
	fs->nfds++;
	fd_push(fs, in);
}

static char *rpath_dup(struct bfs_inode *in)
{
	char *p;

	pthread_mutex_lock(&in->lock);
	p = in->rpath ? strdup(in->rpath) : NULL;
	pthread_mutex_unlock(&in->lock);
	return p;
}

/*
 * An O_PATH descriptor for what @in's path below SOURCE names now, if that
 * is still @in (its stat in *@st). openat2, so that not even this follows
 * a symbolic link out of SOURCE.
 * Return: the descriptor; -ESTALE when the path names another object or
 * nothing, or @in was never named; other -errno from openat2 or fstat.
 */
static int open_by_name(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st)
{
	char *path = rpath_dup(in);
	int fd, rc;

	if (!path)
		return -ESTALE;		/* never named: nothing to find it by */
	fd = open_beneath(fs->root_fd, path, O_PATH | O_NOFOLLOW);
	if (fd < 0 && shed_on_emfile(fs))
		fd = open_beneath(fs->root_fd, path, O_PATH | O_NOFOLLOW);
	free(path);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? -ESTALE : -errno;
	rc = fstat(fd, st) < 0 ? -errno : 0;
	if (rc == 0 && (st->st_ino != in->ino || st->st_dev != in->dev))
		rc = -ESTALE;
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

int bfs_inode_fd(struct bfs_fs *fs, struct bfs_inode *in)
{
	struct stat st;
	int fd;

	if (in == &fs->root)
		return fs->root_fd;
	pthread_mutex_lock(&fs->fd_lock);
	if (in->fd >= 0) {
		in->fd_pins++;
		fd_unlink(fs, in);
		fd_push(fs, in);
		fd = in->fd;
		pthread_mutex_unlock(&fs->fd_lock);
		return fd;
	}
	pthread_mutex_unlock(&fs->fd_lock);
	fd = open_by_name(fs, in, &st);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&fs->fd_lock);
	fd_adopt(fs, in, fd);
	in->fd_pins++;
	fd_trim(fs);
	fd = in->fd;
	pthread_mutex_unlock(&fs->fd_lock);
	return fd;
}

void bfs_inode_fd_put(struct bfs_fs *fs, struct bfs_inode *in)
{
	if (in == &fs->root)
		return;
	pthread_mutex_lock(&fs->fd_lock);
	in->fd_pins--;
	if (fs->nfds > fs->max_fds)
		fd_trim(fs);	/* over the bound while pins held it: give back now */
	pthread_mutex_unlock(&fs->fd_lock);
}

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
	pthread_mutex_lock(&fs->fd_lock);
	if (in->fd >= 0) {
		fd_unlink(fs, in);
		close(in->fd);
		fs->nfds--;
	}
	pthread_mutex_unlock(&fs->fd_lock);
	bfs_file_put(in->file);
	free(in->rpath);
	pthread_mutex_destroy(&in->lock);
	free(in);
}

int bfs_fs_init(struct bfs_fs *fs, const char *source, const struct bfs_opts *opts)
{
	struct stat st;

	memset(fs, 0, sizeof(*fs));
	fs->opts = opts;
	fs->env.verify = opts->verify;
	fs->env.readahead = opts->readahead;
	fs->env.kernel_readahead = opts->kernel_readahead;
	fs->env.advice = opts->advice;
	fs->root_fd = open(source, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fs->root_fd < 0)
		return -errno;
	if (fstat(fs->root_fd, &st) < 0)
		goto out_close;
	errno = ENOMEM;
	fs->env.mount = bfs_counters_new(NULL);
	if (!fs->env.mount || bfs_cache_new(&fs->env.cache, opts->cache_size) < 0)
		goto out_close;
	fs->nbuckets = 1024;
	fs->table = calloc(fs->nbuckets, sizeof(*fs->table));
	fs->root.rpath = strdup(".");
	if (!fs->table || !fs->root.rpath) {
		errno = ENOMEM;
		goto out_close;
	}
	fs->root.fd = fs->root_fd;
	fs->root.dev = st.st_dev;
	fs->root.ino = st.st_ino;
	fs->root.type = S_IFDIR;
	fs->root.nlookup = 1;
	bfs_hints_init(&fs->hints);
	pthread_mutex_init(&fs->root.lock, NULL);
	pthread_mutex_init(&fs->lock, NULL);
	pthread_mutex_init(&fs->fd_lock, NULL);
	fs->max_fds = fd_budget();
	return 0;

out_close:
	bfs_cache_free(fs->env.cache);
	bfs_counters_put(fs->env.mount);
	free(fs->table);
	free(fs->root.rpath);
	close(fs->root_fd);
	return -errno;
}

/* Queued read-ahead jobs per worker: enough to keep a few streams fed. */
#define QUEUE_PER_WORKER 128

/*
 * Two pools of the same work queue. Decoding ahead of a reader runs at
 * SCHED_IDLE: it takes a core the reader leaves idle and never one from
 * it, and a reader that catches up sends a READ, served at normal
 * priority, so nothing ever waits for it (md5sum of 512 MiB through the
 * mount, stat done first: 0.84-0.88 s with idle workers, 0.92-0.95 s at
 * nice 0, 0.83 s for the plain file). What someone waits for or asked for
 * (measuring at the first stat, helping a READ decode, willneed,
 * populate, dropping pages) runs at nice 10: under a CPU-bound load beside
 * it an idle-class thread would never run at all.
 */
#define WORKER_NICE 10

static void worker_start(void)
{
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), WORKER_NICE);	/* a hint: may fail */
}

static void ahead_start(void)
{
	struct sched_param sp = { 0 };

	(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);	/* a hint: may fail */
}

int bfs_fs_start(struct bfs_fs *fs)
{
	unsigned int n = fs->opts->workers;
	int rc;

	if (n == 0)
		return 0;
	rc = bfs_workq_new(&fs->env.workq, n, (size_t)n * QUEUE_PER_WORKER, worker_start);
	if (rc == 0)
		rc = bfs_workq_new(&fs->env.aheadq, n, (size_t)n * QUEUE_PER_WORKER, ahead_start);
	return rc;
}

void bfs_fs_destroy(struct bfs_fs *fs)
{
	bfs_workq_free(fs->env.aheadq);		/* first: jobs hold file versions */
	bfs_workq_free(fs->env.workq);
	for (size_t i = 0; i < fs->nbuckets; i++) {
		for (struct bfs_inode *in = fs->table[i], *next; in; in = next) {
			next = in->hnext;
			inode_free(fs, in);
		}
	}
	free(fs->table);
	free(fs->root.rpath);
	pthread_mutex_destroy(&fs->root.lock);
	pthread_mutex_destroy(&fs->lock);
	pthread_mutex_destroy(&fs->fd_lock);
	close(fs->root_fd);
	bfs_cache_free(fs->env.cache);	/* after every version: no block is held */
	bfs_counters_put(fs->env.mount);
	bfs_hints_destroy(&fs->hints);
}

/*
 * Find or add the inode for O_PATH @fd (consumed) shown with @codec. Its
 * descriptor comes back pinned: bfs_inode_fd_put() when done.
 */
static int inode_get(struct bfs_fs *fs, int fd, const struct bfs_codec *codec,
		     struct bfs_inode **out)
{
	struct bfs_inode *in;
	struct stat st;
	size_t b;

	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode))
		codec = NULL;
	pthread_mutex_lock(&fs->lock);
	b = bucket(fs, st.st_dev, st.st_ino, codec);
	for (in = fs->table[b]; in; in = in->hnext)
		if (in->ino == st.st_ino && in->dev == st.st_dev && in->codec == codec)
			break;
	if (in) {
		in->nlookup++;
		pthread_mutex_lock(&fs->fd_lock);
		fd_adopt(fs, in, fd);	/* a closed one is worth reviving */
		in->fd_pins++;
		pthread_mutex_unlock(&fs->fd_lock);
		pthread_mutex_unlock(&fs->lock);
		*out = in;
		return 0;
	}
	in = calloc(1, sizeof(*in));
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		close(fd);
		return -ENOMEM;
	}
	in->dev = st.st_dev;
	in->ino = st.st_ino;
	in->codec = codec;
	in->type = st.st_mode & S_IFMT;
	in->fd = -1;
	in->nlookup = 1;
	pthread_mutex_init(&in->lock, NULL);
	in->hnext = fs->table[b];
	fs->table[b] = in;
	fs->count++;
	maybe_grow(fs);
	pthread_mutex_lock(&fs->fd_lock);
	fd_adopt(fs, in, fd);
	in->fd_pins++;
	fd_trim(fs);
	pthread_mutex_unlock(&fs->fd_lock);
	pthread_mutex_unlock(&fs->lock);
	*out = in;
	return 0;
}

void bfs_inode_forget(struct bfs_fs *fs, struct bfs_inode *in, uint64_t nlookup)
{
	struct bfs_inode **pp;

	if (in == &fs->root)
		return;
	pthread_mutex_lock(&fs->lock);
	if (in->nlookup > nlookup) {
		in->nlookup -= nlookup;
		pthread_mutex_unlock(&fs->lock);
		return;
	}
	for (pp = &fs->table[bucket(fs, in->dev, in->ino, in->codec)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == in) {
			*pp = in->hnext;
			break;
		}
	}
	fs->count--;
	pthread_mutex_unlock(&fs->lock);
	inode_free(fs, in);
}

/* Remember where @in was last seen, for sidecars and log lines. */
static void set_rpath(struct bfs_inode *dir, struct bfs_inode *in, const char *backing)
{
	char *p;
	int n;

	pthread_mutex_lock(&dir->lock);
	if (strcmp(dir->rpath, ".") == 0)
		n = asprintf(&p, "%s", backing);
	else
		n = asprintf(&p, "%s/%s", dir->rpath, backing);
	pthread_mutex_unlock(&dir->lock);
	if (n < 0)
		return;			/* keep the old path: it only names things */
	pthread_mutex_lock(&in->lock);
	if (!in->rpath || strcmp(in->rpath, p) != 0) {
		free(in->rpath);
		in->rpath = p;
		p = NULL;
	}
	pthread_mutex_unlock(&in->lock);
	free(p);
}

static int lookup_backing(struct bfs_fs *fs, struct bfs_inode *dir, const char *backing,
			  const struct bfs_codec *codec, struct bfs_inode **out, struct stat *st)
{
	struct bfs_inode *in = NULL;
	int fd, rc;

	fd = bfs_inode_fd(fs, dir);
	if (fd < 0)
		return fd;
	fd = openat_fs(fs, fd, backing, O_PATH | O_NOFOLLOW);
	rc = fd < 0 ? -errno : 0;
	bfs_inode_fd_put(fs, dir);
	if (rc < 0)
		return rc;
	rc = inode_get(fs, fd, codec, &in);
	if (rc < 0)
		return rc;
	set_rpath(dir, in, backing);
	rc = bfs_inode_stat(fs, in, st);
	bfs_inode_fd_put(fs, in);	/* inode_get() pinned it */
	if (rc < 0) {
		bfs_inode_forget(fs, in, 1);
		return rc;
	}
	*out = in;
	return 0;
}

int bfs_inode_lookup(struct bfs_fs *fs, struct bfs_inode *dir, const char *name,
		     struct bfs_inode **out, struct stat *st)
{
	const struct bfs_codec *codec;
	char backing[NAME_MAX + 1];
	struct sysdir d = { .fs = fs };
	int rc;

	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	d.fd = bfs_inode_fd(fs, dir);
	if (d.fd < 0)
		return d.fd;
	rc = bfs_name_resolve(&sys_name_ops, &d, name, backing, &codec,
			      fs->opts->keep_compressed);
	bfs_inode_fd_put(fs, dir);
	if (rc < 0)
		return rc;
	return lookup_backing(fs, dir, backing, codec, out, st);
}

int bfs_inode_lookup_entry(struct bfs_fs *fs, struct bfs_inode *dir,
			   const struct bfs_dirent *de, struct bfs_inode **out, struct stat *st)
{
	return lookup_backing(fs, dir, de->backing, de->codec, out, st);
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
	fd = open_beneath(fs->root_fd, path, O_RDONLY | O_NONBLOCK);
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

	pthread_mutex_lock(&in->lock);
	if (in->file && in->rpath && (!dir || below(in->rpath, dir))) {
		adv = bfs_hints_effective(&fs->hints, in->rpath, BFS_HINT_ADVICE, fs->env.advice);
		atomic_store(&in->file->advice, adv);
		atomic_store(&in->file->readpath, bfs_hints_effective(&fs->hints, in->rpath,
								      BFS_HINT_READPATH,
								      fs->env.readpath));
		f = bfs_file_get(in->file);
	}
	pthread_mutex_unlock(&in->lock);
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
	pthread_mutex_lock(&fs->lock);
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
	pthread_mutex_unlock(&fs->lock);
	for (size_t i = 0; i < n; i++) {
		reapply_one(fs, pin[i], dir);
		bfs_inode_forget(fs, pin[i], 1);
	}
	free(pin);
}

/*
 * Current version given the backing file's stat @now; inode->lock held,
 * @opath: @in's pinned descriptor. A new version comes back with its
 * descriptor closed: a stat needs only its size.
 */
static int current_locked(struct bfs_fs *fs, struct bfs_inode *in, int opath,
			  const struct stat *now, struct bfs_file **out, bool *changed)
{
	struct bfs_file *f, *old = in->file;
	int fd, side = -1, rc;

	*changed = false;
	if (old && !bfs_file_stale(old, now)) {
		*out = bfs_file_get(old);
		return 0;
	}
	fd = reopen(opath, O_RDONLY);
	if (fd < 0 && shed_on_emfile(fs))
		fd = reopen(opath, O_RDONLY);
	if (fd < 0)
		return -errno;
	if (in->codec)
		side = open_sidecar(fs, in, now);
	rc = bfs_file_open(&f, fd, side, in->codec, in->rpath ? in->rpath : "?", &fs->env);
	if (side >= 0)
		close(side);
	if (rc < 0) {
		close(fd);
		bfs_err("%s: cannot index: %s", in->rpath ? in->rpath : "?", strerror(-rc));
		return rc;
	}
	apply_hints(fs, in->rpath ? in->rpath : "", f);	/* its advice, before anyone reads */
	bfs_file_unuse(f);		/* its descriptor, until someone reads */
	if (old)
		bfs_file_supersede(old);	/* its pushes end before the kernel drops its pages */
	in->file = f;
	*out = bfs_file_get(f);
	*changed = old != NULL;
	bfs_file_put(old);		/* open readers keep it alive */
	return 0;
}

static int stat_fd(int opath, struct stat *st)
{
	return fstatat(opath, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/*
 * The decoded view of a backing inode shows other bytes than its raw view
 * (a hard link with another name, or keep_compressed), so the two must not
 * share st_ino: cp -a, tar and rsync -H would write one view's bytes under
 * the other's names. The raw view keeps the backing number, so raw names
 * of one inode still agree; the decoded view gets it with the top bit
 * flipped, a bit no inode number of ext4, XFS, btrfs or tmpfs uses. Both
 * are as stable as the backing number, across lookups and mounts.
 */
#define DECODED_INO_BIT (1ull << 63)

static ino_t shown_ino(ino_t ino, const struct bfs_codec *codec)
{
	return codec ? (ino_t)((uint64_t)ino ^ DECODED_INO_BIT) : ino;
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
static void shown_links(const struct bfs_fs *fs, int opath, const struct bfs_inode *in,
			struct stat *st)
{
	if (!S_ISREG(st->st_mode) || st->st_nlink <= 1)
		return;
	/* keep_compressed shows every name raw, the decoded ones as well: all count */
	if (in->codec || (!fs->opts->keep_compressed &&
			  sniff_fd(reopen(opath, O_RDONLY | O_NONBLOCK))))
		st->st_nlink = 1;
}

/* The backing object's stat @st made what the view @in shows, but the size. */
static void shown_attrs(const struct bfs_fs *fs, int opath, const struct bfs_inode *in,
			struct stat *st)
{
	st->st_blksize = BFS_BLKSIZE;
	st->st_ino = shown_ino(st->st_ino, in->codec);
	shown_links(fs, opath, in, st);
}

/* The current version of regular file @in; its stat in @now if @fresh is false. */
static int file_of(struct bfs_fs *fs, struct bfs_inode *in, struct stat *now, bool fresh,
		   struct bfs_file **out, bool *changed)
{
	int rc, fd = bfs_inode_fd(fs, in);

	if (fd < 0)
		return fd;
	rc = fresh ? stat_fd(fd, now) : 0;
	if (rc == 0 && !S_ISREG(now->st_mode))
		rc = -EINVAL;
	if (rc == 0) {
		pthread_mutex_lock(&in->lock);
		rc = current_locked(fs, in, fd, now, out, changed);
		pthread_mutex_unlock(&in->lock);
	}
	bfs_inode_fd_put(fs, in);
	return rc;
}

int bfs_inode_file(struct bfs_fs *fs, struct bfs_inode *in, struct bfs_file **out,
		   bool *changed)
{
	struct stat now;

	return file_of(fs, in, &now, true, out, changed);
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
	fd = reopen(opath, O_RDONLY);
	if (fd < 0 && shed_on_emfile(fs))
		fd = reopen(opath, O_RDONLY);
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

int bfs_inode_stat(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st)
{
	struct bfs_file *f;
	bool changed;
	int fd, rc;

	fd = bfs_inode_fd(fs, in);
	if (fd < 0)
		return fd;
	rc = stat_fd(fd, st);
	if (rc < 0 || !in->codec || !S_ISREG(st->st_mode)) {
		if (rc == 0)
			shown_attrs(fs, fd, in, st);
		bfs_inode_fd_put(fs, in);
		return rc;
	}
	pthread_mutex_lock(&in->lock);
	/*
	 * While open readers hold the current version, keep showing it: the
	 * kernel's one i_size serves them too, and a reader whose backing
	 * file shrank must meet EIO, not an early end of file. The next open,
	 * or a stat once they have let go, sees the new file.
	 */
	if (in->file && atomic_load(&in->file->refs) > 1)
		f = bfs_file_get(in->file);
	else
		rc = current_locked(fs, in, fd, st, &f, &changed);
	pthread_mutex_unlock(&in->lock);
	/* current_locked() needs the backing stat as it is: the view's after */
	if (rc == 0)
		shown_attrs(fs, fd, in, st);
	bfs_inode_fd_put(fs, in);
	if (rc < 0)
		return rc;
	st->st_size = (off_t)bfs_file_size(f);
	bfs_file_put(f);
	return 0;
}

int bfs_inode_stat_version(struct bfs_fs *fs, struct bfs_inode *in, const struct bfs_file *f,
			   struct stat *st)
{
	int rc, fd = bfs_inode_fd(fs, in);

	if (fd < 0)
		return fd;
	rc = stat_fd(fd, st);
	if (rc == 0)
		shown_attrs(fs, fd, in, st);
	bfs_inode_fd_put(fs, in);
	if (rc == 0 && in->codec)
		st->st_size = (off_t)bfs_file_size(f);
	return rc;
}

/*
 * Does the path @in was last found at still name it? 0 and *@st when it
 * does (its stat, which open then needs anyway), 1 when that cannot be
 * told (the root; an error other than a mismatch), -ESTALE when another
 * object or nothing is there now. The descriptor it opened to tell goes
 * into the cache: the open that follows needs one.
 */
static int check_name(struct bfs_fs *fs, struct bfs_inode *in, struct stat *st)
{
	int fd;

	if (in == &fs->root)
		return 1;
	fd = open_by_name(fs, in, st);
	if (fd < 0)
		return fd == -ESTALE ? -ESTALE : 1;
	pthread_mutex_lock(&fs->fd_lock);
	fd_adopt(fs, in, fd);
	fd_trim(fs);
	pthread_mutex_unlock(&fs->fd_lock);
	return 0;
}

int bfs_inode_open(struct bfs_fs *fs, struct bfs_inode *in, struct bfs_file **out,
		   bool *changed)
{
	struct stat now;
	int rc = check_name(fs, in, &now);

	if (rc >= 0)
		rc = file_of(fs, in, &now, rc > 0, out, changed);
	if (rc < 0)
		return rc;
	rc = bfs_inode_use(fs, in, *out);
	if (rc < 0)
		bfs_file_put(*out);
	return rc;
}

/* --- listings ------------------------------------------------------------- */

struct lent {
	char *name;
	ino_t ino;
	unsigned char type;
	bool probed;			/* codec is known */
	const struct bfs_codec *codec;	/* what claims it, when probed */
};

struct listing {
	struct bfs_fs *fs;
	int dirfd;
	struct lent *e;			/* sorted by name */
	size_t n;
};

static int lent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct lent *)a)->name, ((const struct lent *)b)->name);
}

static struct lent *list_find(struct listing *l, const char *name)
{
	struct lent key = { .name = (char *)name };

	return bsearch(&key, l->e, l->n, sizeof(*l->e), lent_cmp);
}

static bool list_exists(void *ctx, const char *name)
{
	return list_find(ctx, name) != NULL;
}

static bool list_claims(void *ctx, const char *name, const struct bfs_codec *codec)
{
	struct listing *l = ctx;
	struct lent *e = list_find(l, name);

	if (!e || (e->type != DT_REG && e->type != DT_UNKNOWN))
		return false;
	if (!e->probed) {
		e->codec = sniff(l->fs, l->dirfd, name);
		e->probed = true;
	}
	return e->codec == codec;
}

static const struct bfs_name_ops list_name_ops = { .exists = list_exists, .claims = list_claims };

static int read_listing(struct listing *l)
{
	struct dirent *d;
	size_t cap = 0;
	DIR *dp;
	int fd;

	fd = openat_fs(l->fs, l->dirfd, ".", O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -errno;
	dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -errno;
	}
	while ((errno = 0, d = readdir(dp))) {
		if (l->n == cap) {
			struct lent *ne = realloc(l->e, (cap = cap ? cap * 2 : 64) * sizeof(*ne));

			if (!ne)
				goto out_nomem;
			l->e = ne;
		}
		l->e[l->n] = (struct lent){ .name = strdup(d->d_name), .ino = d->d_ino,
					    .type = d->d_type };
		if (!l->e[l->n].name)
			goto out_nomem;
		l->n++;
	}
	closedir(dp);
	qsort(l->e, l->n, sizeof(*l->e), lent_cmp);
	return 0;

out_nomem:
	closedir(dp);
	return -ENOMEM;
}

void bfs_dir_free(struct bfs_dir *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++) {
		free(d->ent[i].name);
		free(d->ent[i].backing);
	}
	free(d->ent);
	free(d);
}

/* Append backing entry @e, shown as @name with @codec, to @d (room for it is made). */
static int add_dirent(struct bfs_dir *d, const char *name, const struct lent *e,
		      const struct bfs_codec *codec)
{
	struct bfs_dirent *de = &d->ent[d->n++];

	de->name = strdup(name);
	de->backing = strdup(e->name);
	de->codec = codec;
	de->ino = shown_ino(e->ino, codec);	/* as stat says */
	de->type = e->type;
	return de->name && de->backing ? 0 : -ENOMEM;
}

int bfs_dir_open(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_dir **out)
{
	struct listing l = { .fs = fs, .dirfd = -1 };
	bool keep = fs->opts->keep_compressed;
	struct bfs_dir *d;
	int rc;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	l.dirfd = bfs_inode_fd(fs, dir);
	rc = l.dirfd < 0 ? l.dirfd : read_listing(&l);
	if (rc == 0 && l.n > 0) {
		/* keep_compressed: a decoded entry is listed twice, decoded and raw */
		d->ent = calloc(keep ? 2 * l.n : l.n, sizeof(*d->ent));
		if (!d->ent)
			rc = -ENOMEM;
	}
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		const struct bfs_codec *codec = NULL;
		char shown[NAME_MAX + 1];

		if (strcmp(l.e[i].name, ".") == 0 || strcmp(l.e[i].name, "..") == 0)
			snprintf(shown, sizeof(shown), "%s", l.e[i].name);
		else if (!bfs_name_shown(&list_name_ops, &l, l.e[i].name, shown, &codec, keep))
			continue;	/* a sidecar of a file shown decoded */
		rc = add_dirent(d, shown, &l.e[i], codec);
		if (rc == 0 && codec && keep)
			rc = add_dirent(d, l.e[i].name, &l.e[i], NULL);
	}
	if (l.dirfd >= 0)
		bfs_inode_fd_put(fs, dir);
	for (size_t i = 0; i < l.n; i++)
		free(l.e[i].name);
	free(l.e);
	if (rc < 0) {
		bfs_dir_free(d);
		return rc;
	}
	*out = d;
	return 0;
}
