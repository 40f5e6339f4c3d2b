// SPDX-License-Identifier: MIT
/*
 * Open handles and directories (contract in handle.h): what the kernel
 * has open, listed so that what it never releases is freed at the end,
 * and the handles READs share under -o kernel_open, kept in a ring.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "blockfs/log.h"
#include "blockfs/stream.h"
#include "fs_i.h"
#include "handle.h"

void bfs_handles_init(struct bfs_handles *hs)
{
	bfs_mutex_init(&hs->lock);
	bfs_mutex_init(&hs->kopen_lock);
}

void bfs_handles_destroy(struct bfs_handles *hs)
{
	pthread_mutex_destroy(&hs->lock);
	pthread_mutex_destroy(&hs->kopen_lock);
}

/* --- open handles --------------------------------------------------------- */

/* bfs_handles_close_all() casts a list's first entry to what it lists. */
_Static_assert(offsetof(struct bfs_handle, open) == 0, "a handle begins with its link");
_Static_assert(offsetof(struct bfs_dir, open) == 0, "a directory begins with its link");

static void open_add(struct bfs_fs *fs, struct bfs_open **list, struct bfs_open *o)
{
	bfs_mutex_lock(&fs->handles.lock);
	o->prev = NULL;
	o->next = *list;
	if (*list)
		(*list)->prev = o;
	*list = o;
	bfs_mutex_unlock(&fs->handles.lock);
}

static void open_del(struct bfs_fs *fs, struct bfs_open **list, struct bfs_open *o)
{
	bfs_mutex_lock(&fs->handles.lock);
	*(o->prev ? &o->prev->next : list) = o->next;
	if (o->next)
		o->next->prev = o->prev;
	bfs_mutex_unlock(&fs->handles.lock);
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
	open_add(fs, &fs->handles.files, &h->open);
	*out = h;
	return 0;
}

int bfs_handle_open_deferred(struct bfs_fs *fs, struct bfs_inode *in, uint64_t ino, uint64_t stamp,
			     struct bfs_handle **out)
{
	struct bfs_handle *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->in = in;
	h->ino = ino;
	h->stamp = stamp;
	atomic_init(&h->s, NULL);
	bfs_mutex_init(&h->lock);
	open_add(fs, &fs->handles.files, &h->open);
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
		rc = bfs_version_open(fs, h->in, &f, &changed, NULL);
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
			bfs_file_put(f); /* the stream holds its own */
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

	open_del(fs, &fs->handles.files, &h->open);
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
		open_add(fs, &fs->handles.dirs, &(*out)->open);
	return rc;
}

void bfs_handle_closedir(struct bfs_fs *fs, struct bfs_dir *d)
{
	open_del(fs, &fs->handles.dirs, &d->open);
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
	bfs_handle_close(fs, h); /* READs still at it hold the stream and a use */
	bfs_inode_idle(fs, in);
	bfs_inode_forget(fs, in, 1);
}

void bfs_handles_close_all(struct bfs_fs *fs)
{
	for (size_t i = 0; i < BFS_KOPEN_KEEP; i++)
		if (fs->handles.kopen[i].h)
			kopen_evict(fs, fs->handles.kopen[i].in, fs->handles.kopen[i].h);
	/* what the kernel never released (a lazy unmount, SIGTERM) holds versions, snapshots */
	while (fs->handles.files)
		bfs_handle_close(fs, (struct bfs_handle *)fs->handles.files);
	while (fs->handles.dirs)
		bfs_handle_closedir(fs, (struct bfs_dir *)fs->handles.dirs);
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
		h = in->kh = NULL; /* a stat saw the file changed since */
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
		size_t k = fs->handles.kopen_hand;
		struct bfs_handle *h = fs->handles.kopen[k].h;

		fs->handles.kopen_hand = (k + 1) % BFS_KOPEN_KEEP;
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
struct bfs_stream *bfs_handle_kopen(struct bfs_fs *fs, struct bfs_inode *in, uint64_t ino, int *err)
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
	rc = bfs_version_open(fs, in, &f, &changed, NULL);
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
	bfs_file_put(f); /* the handle's stream holds its own */
	if (rc < 0) {
		*err = rc;
		return NULL;
	}
	bfs_inode_hold(fs, in); /* the ring's */
	bfs_mutex_lock(&fs->handles.kopen_lock);
	bfs_mutex_lock(bfs_ilock(fs, in));
	theirs = in->kh; /* another READ of it got here first */
	if (!theirs)
		in->kh = h;
	s = atomic_load_explicit(&(theirs ? theirs : h)->s, memory_order_relaxed);
	bfs_stream_take(s);
	bfs_mutex_unlock(bfs_ilock(fs, in));
	if (!theirs) {
		k = kopen_slot(fs);
		out_in = fs->handles.kopen[k].in;
		out_h = fs->handles.kopen[k].h;
		fs->handles.kopen[k].in = in;
		fs->handles.kopen[k].h = h;
	}
	bfs_mutex_unlock(&fs->handles.kopen_lock);
	if (theirs) {
		bfs_handle_close(fs, h);
		bfs_inode_forget(fs, in, 1);
	} else if (out_h) {
		kopen_evict(fs, out_in, out_h);
	}
	return s;
}
