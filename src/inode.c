// SPDX-License-Identifier: MIT
/*
 * The inode table (contract in inode.h): every inode the kernel
 * remembers, counted by lookup/forget as in passthrough_ll and found again
 * by identity, the ring that keeps idle versions a while, and hints given
 * again to the versions below a directory. Lookups are lookup.c's,
 * versions and attributes version.c's, descriptors fdcache.c's and
 * backing.c's, listings dir.c's, snapshots snap.c's, the mount's set-up
 * fs.c's. No FUSE types here; ops.c translates.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockfs/file.h"
#include "blockfs/hints.h"
#include "blockfs/stats.h"
#include "fs_i.h"
#include "inode.h"

/* --- the inode table ------------------------------------------------------ */

static size_t bucket(const struct bfs_fs *fs, dev_t dev, ino_t ino, const struct bfs_codec *c)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev ^ (uintptr_t)c;

	return (size_t)(h ^ h >> 29) & (fs->itab.nbuckets - 1);
}

/* Double the buckets when chains grow past two on average. */
static void maybe_grow(struct bfs_fs *fs)
{
	size_t old = fs->itab.nbuckets;
	struct bfs_inode **nt, **ot = fs->itab.table;

	if (fs->itab.count < old * 2)
		return;
	nt = calloc(old * 2, sizeof(*nt));
	if (!nt)
		return; /* longer chains, still correct */
	fs->itab.table = nt;
	fs->itab.nbuckets = old * 2;
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
	bfs_backing_fd_release(fs, in);
	bfs_file_put(in->file);
	free(in->rpath);
	free(in);
}

int bfs_inode_table_init(struct bfs_itable *t)
{
	*t = (struct bfs_itable){ .nbuckets = 1024 };
	t->table = calloc(t->nbuckets, sizeof(*t->table));
	if (!t->table)
		return -ENOMEM;
	bfs_mutex_init(&t->lock);
	bfs_mutex_init(&t->idle_lock);
	for (size_t i = 0; i < BFS_ILOCKS; i++)
		bfs_mutex_init(&t->ilocks[i]);
	return 0;
}

int bfs_inode_root_init(struct bfs_fs *fs, const struct stat *st)
{
	fs->root.rpath = strdup(".");
	if (!fs->root.rpath)
		return -ENOMEM;
	bfs_fdc_ent_init(&fs->root.fde);
	fs->root.fde.fd = fs->root_fd;
	fs->root.dev = st->st_dev;
	fs->root.ino = st->st_ino;
	fs->root.type = S_IFDIR;
	fs->root.nlookup = 1;
	return 0;
}

void bfs_inode_table_free(struct bfs_fs *fs)
{
	if (!fs->itab.table)
		return; /* never set up */
	for (size_t i = 0; i < fs->itab.nbuckets; i++) {
		for (struct bfs_inode *in = fs->itab.table[i], *next; in; in = next) {
			next = in->hnext;
			inode_free(fs, in);
		}
	}
	free(fs->itab.table);
	fs->itab.table = NULL;
	pthread_mutex_destroy(&fs->itab.lock);
	pthread_mutex_destroy(&fs->itab.idle_lock);
	for (size_t i = 0; i < BFS_ILOCKS; i++)
		pthread_mutex_destroy(&fs->itab.ilocks[i]);
}

/* The inode of backing object @dev:@ino shown with @codec, if known; fs->itab.lock held. */
static struct bfs_inode *table_find(struct bfs_fs *fs, dev_t dev, ino_t ino,
				    const struct bfs_codec *codec)
{
	struct bfs_inode *in = fs->itab.table[bucket(fs, dev, ino, codec)];

	while (in && (in->ino != ino || in->dev != dev || in->codec != codec))
		in = in->hnext;
	return in;
}

bool bfs_inode_known(struct bfs_fs *fs, dev_t dev, ino_t ino, const struct bfs_codec *codec)
{
	bool known;

	bfs_mutex_lock(&fs->itab.lock);
	known = table_find(fs, dev, ino, codec) != NULL;
	bfs_mutex_unlock(&fs->itab.lock);
	return known;
}

struct bfs_inode *bfs_inode_ref(struct bfs_fs *fs, const struct stat *st,
				const struct bfs_codec *codec)
{
	struct bfs_inode *in;

	bfs_mutex_lock(&fs->itab.lock);
	in = table_find(fs, st->st_dev, st->st_ino, codec);
	if (in)
		in->nlookup++;
	bfs_mutex_unlock(&fs->itab.lock);
	return in;
}

int bfs_inode_get(struct bfs_fs *fs, int fd, bool rd, const struct stat *st,
		  const struct bfs_codec *codec, struct bfs_inode **out)
{
	struct bfs_inode *in;
	size_t b;

	if (!S_ISREG(st->st_mode))
		codec = NULL;
	bfs_mutex_lock(&fs->itab.lock);
	in = table_find(fs, st->st_dev, st->st_ino, codec);
	if (in) {
		in->nlookup++;
		if (fd >= 0)
			bfs_backing_fd_adopt(fs, in, fd, rd, false);
		bfs_mutex_unlock(&fs->itab.lock);
		*out = in;
		return 0;
	}
	in = calloc(1, sizeof(*in));
	if (!in) {
		bfs_mutex_unlock(&fs->itab.lock);
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	in->dev = st->st_dev;
	in->ino = st->st_ino;
	in->codec = codec;
	in->type = (uint16_t)(st->st_mode & S_IFMT);
	bfs_fdc_ent_init(&in->fde);
	in->nlookup = 1;
	b = bucket(fs, st->st_dev, st->st_ino, codec);
	in->hnext = fs->itab.table[b];
	fs->itab.table[b] = in;
	fs->itab.count++;
	maybe_grow(fs);
	if (fd >= 0)
		bfs_backing_fd_adopt(fs, in, fd, rd, false);
	bfs_mutex_unlock(&fs->itab.lock);
	*out = in;
	return 0;
}

void bfs_inode_forget(struct bfs_fs *fs, struct bfs_inode *in, uint64_t nlookup)
{
	struct bfs_inode **pp;

	if (in == &fs->root)
		return;
	bfs_mutex_lock(&fs->itab.lock);
	assert(in->nlookup >= nlookup); /* the kernel forgets no more than it looked up */
	if (in->nlookup > nlookup) {
		in->nlookup -= nlookup;
		bfs_mutex_unlock(&fs->itab.lock);
		return;
	}
	for (pp = &fs->itab.table[bucket(fs, in->dev, in->ino, in->codec)]; *pp;
	     pp = &(*pp)->hnext) {
		if (*pp == in) {
			*pp = in->hnext;
			break;
		}
	}
	fs->itab.count--;
	bfs_mutex_unlock(&fs->itab.lock);
	inode_free(fs, in);
}

struct bfs_inode *bfs_inode_dir_rpath(struct bfs_fs *fs, const struct stat *st, char **rpath)
{
	struct bfs_inode *in;

	bfs_mutex_lock(&fs->itab.lock);
	in = table_find(fs, st->st_dev, st->st_ino, NULL);
	if (in && in->type != S_IFDIR)
		in = NULL;
	if (in && rpath) {
		bfs_mutex_lock(bfs_ilock(fs, in));
		*rpath = in->rpath ? strdup(in->rpath) : NULL;
		bfs_mutex_unlock(bfs_ilock(fs, in));
	}
	bfs_mutex_unlock(&fs->itab.lock);
	return in;
}

size_t bfs_inode_count(struct bfs_fs *fs)
{
	size_t n;

	bfs_mutex_lock(&fs->itab.lock);
	n = fs->itab.count;
	bfs_mutex_unlock(&fs->itab.lock);
	return n;
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

ino_t bfs_inode_shown_ino(ino_t ino, const struct bfs_codec *codec)
{
	return codec ? (ino_t)((uint64_t)ino ^ DECODED_INO_BIT) : ino;
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
		atomic_store(&in->file->readpath,
			     bfs_hints_effective(&fs->hints, in->rpath, BFS_HINT_READPATH,
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
	bfs_mutex_lock(&fs->itab.lock);
	if (fs->itab.count)
		pin = malloc(fs->itab.count * sizeof(*pin));
	for (size_t i = 0; pin && i < fs->itab.nbuckets; i++) {
		for (struct bfs_inode *p = fs->itab.table[i]; p; p = p->hnext) {
			if (p->type != S_IFREG)
				continue;
			p->nlookup++; /* dropped by bfs_inode_forget() below */
			pin[n++] = p;
		}
	}
	bfs_mutex_unlock(&fs->itab.lock);
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
 * open without it (bfs_version_open()'s deferral) would not refuse the file.
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
	bfs_mutex_lock(&fs->itab.idle_lock);
	had = in->idle;
	bfs_mutex_unlock(&fs->itab.idle_lock);
	if (had)
		return;
	bfs_inode_hold(fs, in); /* the ring's */
	bfs_mutex_lock(&fs->itab.idle_lock);
	had = in->idle; /* another thread put it in meanwhile */
	out = had ? in : fs->itab.idle[fs->itab.idle_next];
	if (!had) {
		in->idle = true;
		fs->itab.idle[fs->itab.idle_next] = in;
		fs->itab.idle_next = (fs->itab.idle_next + 1) % BFS_IDLE_KEEP;
		if (out)
			out->idle = false;
	}
	bfs_mutex_unlock(&fs->itab.idle_lock);
	if (!out)
		return;
	if (!had) {
		bfs_mutex_lock(bfs_ilock(fs, out));
		f = out->file;
		if (f && droppable(f))
			out->file = NULL; /* its size stays in the memo */
		else
			f = NULL;
		bfs_mutex_unlock(bfs_ilock(fs, out));
		bfs_file_put(f);
	}
	bfs_inode_forget(fs, out, 1);
}

void bfs_inode_hold(struct bfs_fs *fs, struct bfs_inode *in)
{
	bfs_mutex_lock(&fs->itab.lock);
	in->nlookup++;
	bfs_mutex_unlock(&fs->itab.lock);
}

void bfs_inode_idle(struct bfs_fs *fs, struct bfs_inode *in)
{
	went_idle(fs, in);
}
