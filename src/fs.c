// SPDX-License-Identifier: MIT
/*
 * The mount (contract in fs_i.h): one init and one destroy for everything
 * it shares, the cache, the counters, the hints, the inode table's root,
 * the mappings and the SIGBUS guard, the work queues, the open handles
 * and the hook that pushes pages to the kernel.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "blockfs/cache.h"
#include "blockfs/index_cache.h"
#include "blockfs/log.h"
#include "blockfs/mmap.h"
#include "blockfs/stream.h"
#include "blockfs/workq.h"
#include "fs_i.h"

int bfs_fs_init(struct bfs_fs *fs, const char *source, const struct bfs_opts *opts,
		struct fuse_session *se, bfs_push_fn push)
{
	struct stat st;
	int rc;

	memset(fs, 0, sizeof(*fs));
	fs->opts = opts;
	fs->se = se;
	fs->env.push = push;
	fs->env.push_ctx = fs;
	fs->env.reopen = bfs_backing_reopen_name;
	fs->env.reopen_ctx = fs;
	fs->env.readpath = opts->readpath;
	fs->env.verify = opts->verify;
	fs->env.readahead = opts->readahead;
	fs->env.kernel_readahead = opts->kernel_readahead;
	fs->env.advice = opts->advice;
	fs->env.codecs = (struct bfs_codec_conf){ .gzip = opts->gzip_index,
						  .gzip_span = opts->gzip_span };
	fs->env.remote = !bfs_backing_is_local(source);
	if (fs->env.remote && opts->readpath == BFS_READPATH_MMAP)
		bfs_warn("readpath=mmap on a remote SOURCE: a server that goes away makes reads "
			 "of the mapping fail (SIGBUS, caught as EIO); readpath=auto would use pread");
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
	fs->snaps = calloc(BFS_SNAP_BUCKETS, sizeof(*fs->snaps));
	fs->root.rpath = strdup(".");
	if (!fs->table || !fs->snaps || !fs->root.rpath) {
		errno = ENOMEM;
		goto out_close;
	}
	fs->root.fd = fs->root_fd;
	fs->root.dev = st.st_dev;
	fs->root.ino = st.st_ino;
	fs->root.type = S_IFDIR;
	fs->root.nlookup = 1;
	/*
	 * Mappings exist whatever the mount's read path: a file or directory
	 * hint may choose mmap on a pread mount.
	 */
	rc = bfs_sigbus_init();
	if (rc == 0)
		rc = bfs_maps_new(&fs->env.maps, BFS_MAX_LIVE_MAPS, opts->populate);
	if (rc < 0) {
		errno = -rc;
		goto out_close;
	}
	bfs_hints_init(&fs->hints);
	for (size_t i = 0; i < BFS_ILOCKS; i++)
		bfs_mutex_init(&fs->ilocks[i]);
	bfs_mutex_init(&fs->snap_lock);
	bfs_mutex_init(&fs->idle_lock);
	bfs_mutex_init(&fs->lock);
	bfs_mutex_init(&fs->fd_lock);
	bfs_mutex_init(&fs->handles_lock);
	bfs_mutex_init(&fs->kopen_lock);
	bfs_mutex_init(&fs->walks_lock);
	fs->max_fds = bfs_backing_fd_budget();
	return 0;

out_close:
	bfs_maps_free(fs->env.maps);
	bfs_cache_free(fs->env.cache);
	bfs_counters_put(fs->env.mount);
	free(fs->table);
	free(fs->snaps);
	free(fs->root.rpath);
	close(fs->root_fd);
	return -errno;
}

/* Queued read-ahead jobs per worker: enough to keep a few streams fed. */
#define QUEUE_PER_WORKER 128

/*
 * Two pools of the same work queue. Decoding ahead of a reader runs at
 * nice 19: where it shares a core with a reader it gets about 1.5% of it,
 * so it uses what the readers leave idle, and a reader that catches up
 * sends a READ, served at normal priority, so nothing ever waits for it
 * (doc/decisions/0013-service-priority.md). Not the idle scheduling
 * class, which would do the same on an idle machine, but never run at all
 * beside a CPU-bound load, and read-ahead would never happen there. What
 * someone waits for or asked for (measuring at the first stat, helping a
 * READ decode, willneed, populate, dropping pages) runs at nice 10.
 */
#define WORKER_NICE 10
#define AHEAD_NICE 19

static void worker_start(void)
{
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), WORKER_NICE);	/* a hint: may fail */
}

static void ahead_start(void)
{
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), AHEAD_NICE);
}

int bfs_fs_start(struct bfs_fs *fs)
{
	unsigned int n = fs->opts->workers;
	int rc;

	rc = bfs_trim_start(fs);
	if (rc < 0 || n == 0)
		return rc;
	rc = bfs_workq_new(&fs->env.workq, n, (size_t)n * QUEUE_PER_WORKER, worker_start);
	if (rc == 0)
		rc = bfs_workq_new(&fs->env.aheadq, n, (size_t)n * QUEUE_PER_WORKER, ahead_start);
	return rc;
}

static void kopen_close_all(struct bfs_fs *fs);

void bfs_fs_destroy(struct bfs_fs *fs)
{
	kopen_close_all(fs);
	/* what the kernel never released (a lazy unmount, SIGTERM) holds versions, snapshots */
	while (fs->handles)
		bfs_handle_close(fs, (struct bfs_handle *)fs->handles);
	while (fs->dirs)
		bfs_handle_closedir(fs, (struct bfs_dir *)fs->dirs);
	bfs_trim_stop(fs);
	bfs_workq_free(fs->env.aheadq);		/* then the jobs, which hold versions */
	bfs_workq_free(fs->env.workq);
	bfs_inode_table_free(fs);
	bfs_snap_cache_free(fs);
	free(fs->snaps);
	free(fs->root.rpath);
	pthread_mutex_destroy(&fs->handles_lock);
	pthread_mutex_destroy(&fs->kopen_lock);
	pthread_mutex_destroy(&fs->walks_lock);
	for (size_t i = 0; i < BFS_ILOCKS; i++)
		pthread_mutex_destroy(&fs->ilocks[i]);
	pthread_mutex_destroy(&fs->snap_lock);
	pthread_mutex_destroy(&fs->idle_lock);
	pthread_mutex_destroy(&fs->lock);
	pthread_mutex_destroy(&fs->fd_lock);
	close(fs->root_fd);
	bfs_cache_free(fs->env.cache);	/* after every version: no block is held */
	bfs_maps_free(fs->env.maps);	/* likewise: no mapping is left */
	bfs_icache_free(fs->env.icache);
	bfs_counters_put(fs->env.mount);
	bfs_hints_destroy(&fs->hints);
}

/* --- open handles --------------------------------------------------------- */

/* bfs_fs_destroy() casts a list's first entry to what it lists. */
_Static_assert(offsetof(struct bfs_handle, open) == 0, "a handle begins with its link");
_Static_assert(offsetof(struct bfs_dir, open) == 0, "a directory begins with its link");

static void open_add(struct bfs_fs *fs, struct bfs_open **list, struct bfs_open *o)
{
	bfs_mutex_lock(&fs->handles_lock);
	o->prev = NULL;
	o->next = *list;
	if (*list)
		(*list)->prev = o;
	*list = o;
	bfs_mutex_unlock(&fs->handles_lock);
}

static void open_del(struct bfs_fs *fs, struct bfs_open **list, struct bfs_open *o)
{
	bfs_mutex_lock(&fs->handles_lock);
	*(o->prev ? &o->prev->next : list) = o->next;
	if (o->next)
		o->next->prev = o->prev;
	bfs_mutex_unlock(&fs->handles_lock);
}

int bfs_handle_open(struct bfs_fs *fs, struct bfs_file *f, uint64_t ino, struct bfs_handle **out)
{
	struct bfs_handle *h = calloc(1, sizeof(*h));
	struct bfs_stream *s;
	int rc;

	if (!h)
		return -ENOMEM;
	rc = bfs_stream_new(&s, f, ino);
	if (rc < 0) {
		free(h);
		return rc;
	}
	atomic_init(&h->s, s);
	bfs_mutex_init(&h->lock);
	open_add(fs, &fs->handles, &h->open);
	*out = h;
	return 0;
}

int bfs_handle_open_deferred(struct bfs_fs *fs, struct bfs_inode *in, uint64_t ino,
			     uint64_t stamp, struct bfs_handle **out)
{
	struct bfs_handle *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->in = in;
	h->ino = ino;
	h->stamp = stamp;
	atomic_init(&h->s, NULL);
	bfs_mutex_init(&h->lock);
	open_add(fs, &fs->handles, &h->open);
	*out = h;
	return 0;
}

/*
 * Once built the stream stays until the handle is closed, so every READ
 * after the first takes it without the lock.
 */
struct bfs_stream *bfs_handle_stream(struct bfs_fs *fs, struct bfs_handle *h, int *err)
{
	struct bfs_stream *s = atomic_load_explicit(&h->s, memory_order_acquire);
	struct bfs_file *f = NULL;
	bool changed;
	int rc = 0;

	*err = 0;
	if (s)
		return s;
	bfs_mutex_lock(&h->lock);
	s = atomic_load_explicit(&h->s, memory_order_relaxed);
	if (!s) {
		rc = bfs_inode_open(fs, h->in, &f, &changed, NULL);
		/* Replaced (ESTALE: another inode) or rewritten since the open. */
		if (rc == -ESTALE || (rc == 0 && bfs_backing_stamp(&f->st) != h->stamp))
			rc = -EIO;
		if (rc == 0)
			rc = bfs_stream_new(&s, f, h->ino);
		if (rc == 0)
			atomic_store_explicit(&h->s, s, memory_order_release);
		else if (f)
			bfs_file_unuse(f);
		if (f)
			bfs_file_put(f);	/* the stream holds its own */
	}
	bfs_mutex_unlock(&h->lock);
	*err = rc;
	return rc == 0 ? s : NULL;
}

struct bfs_file *bfs_handle_file(struct bfs_handle *h)
{
	struct bfs_stream *s = atomic_load_explicit(&h->s, memory_order_acquire);

	return s ? bfs_stream_file(s) : NULL;
}

void bfs_handle_close(struct bfs_fs *fs, struct bfs_handle *h)
{
	struct bfs_stream *s = atomic_load_explicit(&h->s, memory_order_acquire);

	open_del(fs, &fs->handles, &h->open);
	if (s) {
		bfs_file_unuse(bfs_stream_file(s));
		bfs_stream_free(s);
	}
	pthread_mutex_destroy(&h->lock);
	free(h);
}

int bfs_handle_opendir(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_dir **out)
{
	int rc = bfs_dir_open(fs, dir, out);

	if (rc == 0)
		open_add(fs, &fs->dirs, &(*out)->open);
	return rc;
}

void bfs_handle_closedir(struct bfs_fs *fs, struct bfs_dir *d)
{
	open_del(fs, &fs->dirs, &d->open);
	bfs_dir_free(d);
}

/* --- handles shared by READs of -o kernel_open ------------------------------- */

/* Evict file @in from the ring: its handle closed, its version idle, its lookup dropped. */
static void kopen_evict(struct bfs_fs *fs, struct bfs_inode *in, struct bfs_handle *h)
{
	bfs_mutex_lock(bfs_ilock(fs, in));
	if (in->kh == h)
		in->kh = NULL;
	bfs_mutex_unlock(bfs_ilock(fs, in));
	bfs_handle_close(fs, h);	/* READs still at it hold the stream and a use */
	bfs_inode_idle(fs, in);
	bfs_inode_forget(fs, in, 1);
}

static void kopen_close_all(struct bfs_fs *fs)
{
	for (size_t i = 0; i < BFS_KOPEN_KEEP; i++)
		if (fs->kopen[i].h)
			kopen_evict(fs, fs->kopen[i].in, fs->kopen[i].h);
}

/*
 * @in's shared stream, taken, if it has one of the version the kernel
 * was last told about; a decoded file's other one is let go (its slot
 * closes it in time). NULL with *@stale set while the kernel holds the
 * size of other bytes; else *@told is the stamp whose size it holds.
 */
static struct bfs_stream *kopen_find(struct bfs_fs *fs, struct bfs_inode *in, uint64_t *told,
				     bool *stale)
{
	struct bfs_stream *s = NULL;
	struct bfs_handle *h;

	bfs_mutex_lock(bfs_ilock(fs, in));
	h = in->kh;
	*told = in->stamp;
	*stale = in->kstale;
	if (h && in->codec && bfs_backing_stamp(&bfs_handle_file(h)->st) != *told)
		h = in->kh = NULL;	/* a stat saw the file changed since */
	if (h) {
		s = atomic_load_explicit(&h->s, memory_order_relaxed);
		bfs_stream_take(s);
		atomic_store_explicit(&h->hot, true, memory_order_relaxed);
	}
	bfs_mutex_unlock(bfs_ilock(fs, in));
	return s;
}

/* A slot for one more file: an empty one, or the first the clock's hand finds cold. */
static size_t kopen_slot(struct bfs_fs *fs)
{
	for (;;) {
		size_t k = fs->kopen_hand;
		struct bfs_handle *h = fs->kopen[k].h;

		fs->kopen_hand = (k + 1) % BFS_KOPEN_KEEP;
		/* a second pass finds every bit cleared by the first */
		if (!h || !atomic_exchange_explicit(&h->hot, false, memory_order_relaxed))
			return k;
	}
}

/*
 * No handle to keep state in, so the first READ of a file builds one and
 * later READs share it: a version, its read-ahead window and its pushes,
 * as an open would have. The kernel was told the size of the version
 * the inode's stamp names; a version built from other bytes (the file
 * changed behind the mount since) cannot serve its pages. A file shown
 * unchanged needs no such care: its size is the backing file's own.
 */
struct bfs_stream *bfs_kopen_stream(struct bfs_fs *fs, struct bfs_inode *in, uint64_t ino,
				    int *err)
{
	struct bfs_handle *h = NULL, *theirs, *out_h = NULL;
	struct bfs_inode *out_in = NULL;
	struct bfs_stream *s;
	struct bfs_file *f;
	uint64_t told;
	bool changed, stale;
	size_t k;
	int rc;

	s = kopen_find(fs, in, &told, &stale);
	if (s)
		return s;
	if (stale) {
		*err = -ESTALE;
		return NULL;
	}
	rc = bfs_inode_open(fs, in, &f, &changed, NULL);
	if (rc < 0) {
		*err = rc;
		return NULL;
	}
	if (in->codec && told != 0 && bfs_backing_stamp(&f->st) != told) {
		/* every READ fails until the kernel has asked for the new size */
		bfs_mutex_lock(bfs_ilock(fs, in));
		in->kstale = true;
		bfs_mutex_unlock(bfs_ilock(fs, in));
		rc = -ESTALE;
	} else {
		rc = bfs_handle_open(fs, f, ino, &h);
	}
	if (rc < 0)
		bfs_file_unuse(f);
	bfs_file_put(f);		/* the handle's stream holds its own */
	if (rc < 0) {
		*err = rc;
		return NULL;
	}
	bfs_inode_hold(fs, in);		/* the ring's */
	bfs_mutex_lock(&fs->kopen_lock);
	bfs_mutex_lock(bfs_ilock(fs, in));
	theirs = in->kh;		/* another READ of it got here first */
	if (!theirs)
		in->kh = h;
	s = atomic_load_explicit(&(theirs ? theirs : h)->s, memory_order_relaxed);
	bfs_stream_take(s);
	bfs_mutex_unlock(bfs_ilock(fs, in));
	if (!theirs) {
		k = kopen_slot(fs);
		out_in = fs->kopen[k].in;
		out_h = fs->kopen[k].h;
		fs->kopen[k].in = in;
		fs->kopen[k].h = h;
	}
	bfs_mutex_unlock(&fs->kopen_lock);
	if (theirs) {
		bfs_handle_close(fs, h);
		bfs_inode_forget(fs, in, 1);
	} else if (out_h) {
		kopen_evict(fs, out_in, out_h);
	}
	return s;
}
