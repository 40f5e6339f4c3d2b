// SPDX-License-Identifier: MIT
/*
 * The inode table within -o max_inodes (contract in trim.h). The daemon
 * keeps an inode (about 170 bytes with its path) for every name the
 * kernel remembers, and the kernel remembers every file it looked up
 * until its own memory runs short: after ls -lR of a million files that
 * was 164 MiB of the daemon's. Past the bound, a thread of its own asks
 * the kernel to forget the oldest directories it looked in
 * (fuse_lowlevel_notify_inval_entry() of the directory in its parent):
 * the kernel drops the directory's entry and, with it, the entries of
 * its children that nothing holds open (d_invalidate), then sends the
 * FORGETs that free their inodes here. A name asked for again is looked
 * up again: one LOOKUP, answered from the directory's snapshot.
 *
 * Not from a request handler: the kernel takes the parent directory's
 * lock to invalidate, which a LOOKUP in that directory may hold while it
 * waits for this daemon. Nor on the work queues, whose jobs a LOOKUP may
 * wait for. Hence the thread.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fuse_lowlevel.h>

#include "blockfs/log.h"
#include "blockfs/stats.h"
#include "fs_i.h"

/* The most recent directories are where the kernel's users are now: kept. */
#define KEEP_RECENT 4
/* Between two passes, for the FORGETs of the last one to arrive. */
#define PASS_GAP_MS 50

void bfs_trim_note(struct bfs_fs *fs, struct bfs_inode *dir)
{
	struct bfs_trim *t = &fs->trim;
	size_t last;

	if (!t->running || dir == &fs->root)
		return;
	bfs_mutex_lock(&t->lock);
	last = (t->next + BFS_TRIM_RING - 1) % BFS_TRIM_RING;
	if (t->n == 0 || t->ring[last].ino != dir->ino || t->ring[last].dev != dir->dev) {
		t->ring[t->next].dev = dir->dev;
		t->ring[t->next].ino = dir->ino;
		t->next = (t->next + 1) % BFS_TRIM_RING;
		if (t->n < BFS_TRIM_RING)
			t->n++;
	}
	bfs_mutex_unlock(&t->lock);
}

/* Lookups between two looks at the table's size. */
#define POKE_EVERY 256

void bfs_trim_poke(struct bfs_fs *fs)
{
	struct bfs_trim *t = &fs->trim;

	if (!t->running ||
	    atomic_fetch_add_explicit(&t->lookups, 1, memory_order_relaxed) % POKE_EVERY != 0 ||
	    bfs_inode_count(fs) <= fs->opts->max_inodes)
		return;
	bfs_mutex_lock(&t->lock);
	if (!t->want) {
		t->want = true;
		pthread_cond_signal(&t->cond);
	}
	bfs_mutex_unlock(&t->lock);
}

/* Ask the kernel to forget directory @rpath (below SOURCE). */
static void forget_dir(struct bfs_fs *fs, const char *rpath)
{
	const char *slash = strrchr(rpath, '/'), *name = slash ? slash + 1 : rpath;
	fuse_ino_t parent = FUSE_ROOT_ID;
	int rc;

	if (slash) {
		char *up = strndup(rpath, (size_t)(slash - rpath));
		struct bfs_inode *p = NULL;
		struct stat st;

		if (up && fstatat(fs->root_fd, up, &st, AT_SYMLINK_NOFOLLOW) == 0)
			p = bfs_inode_dir_rpath(fs, &st, NULL);
		free(up);
		if (!p)
			return; /* the kernel forgot the parent: the child went with it */
		parent = (fuse_ino_t)(uintptr_t)p; /* its node id (ops.c): not dereferenced */
	}
	if (!bfs_gate_enter(&fs->notify))
		return; /* the mount is stopping */
	rc = fuse_lowlevel_notify_inval_entry(fs->se, parent, name, strlen(name));
	bfs_gate_leave(&fs->notify);
	if (rc == 0)
		BFS_COUNT(fs->env.mount, forgotten_dirs, 1);
	else if (rc != -ENOENT)
		bfs_dbg("max_inodes: cannot invalidate %s: %s", rpath, strerror(-rc));
}

/* One pass: the older half of the ring, oldest first. */
static void pass(struct bfs_fs *fs)
{
	struct bfs_trim *t = &fs->trim;
	struct {
		dev_t dev;
		ino_t ino;
	} take[BFS_TRIM_RING];
	size_t n = 0;

	bfs_mutex_lock(&t->lock);
	if (t->n > KEEP_RECENT) {
		size_t first = (t->next + BFS_TRIM_RING - t->n) % BFS_TRIM_RING;

		n = (t->n - KEEP_RECENT + 1) / 2;
		for (size_t i = 0; i < n; i++) {
			take[i].dev = t->ring[(first + i) % BFS_TRIM_RING].dev;
			take[i].ino = t->ring[(first + i) % BFS_TRIM_RING].ino;
		}
		t->n -= n;
	}
	bfs_mutex_unlock(&t->lock);
	for (size_t i = 0; i < n; i++) {
		struct stat st = { .st_dev = take[i].dev, .st_ino = take[i].ino };
		char *rpath = NULL;

		if (bfs_inode_dir_rpath(fs, &st, &rpath) && rpath && strcmp(rpath, ".") != 0)
			forget_dir(fs, rpath);
		free(rpath);
	}
}

static void *trim_main(void *arg)
{
	struct bfs_fs *fs = arg;
	struct bfs_trim *t = &fs->trim;

	bfs_mutex_lock(&t->lock);
	for (;;) {
		while (!t->want && !t->stop)
			pthread_cond_wait(&t->cond, &t->lock);
		if (t->stop)
			break;
		t->want = false;
		bfs_mutex_unlock(&t->lock);
		pass(fs);
		nanosleep(&(struct timespec){ .tv_nsec = PASS_GAP_MS * 1000000L }, NULL);
		bfs_mutex_lock(&t->lock);
		/* still over: the FORGETs did not bring it down; go on */
		if (bfs_inode_count(fs) > fs->opts->max_inodes)
			t->want = true;
	}
	bfs_mutex_unlock(&t->lock);
	return NULL;
}

int bfs_trim_start(struct bfs_fs *fs)
{
	struct bfs_trim *t = &fs->trim;
	int rc;

	if (fs->opts->max_inodes == 0)
		return 0;
	bfs_mutex_init(&t->lock);
	pthread_cond_init(&t->cond, NULL);
	rc = pthread_create(&t->thread, NULL, trim_main, fs);
	if (rc != 0) {
		pthread_cond_destroy(&t->cond);
		pthread_mutex_destroy(&t->lock);
		return -rc;
	}
	t->running = true;
	return 0;
}

void bfs_trim_stop(struct bfs_fs *fs)
{
	struct bfs_trim *t = &fs->trim;

	if (!t->running)
		return;
	bfs_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->cond);
	bfs_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	t->running = false;
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
}
