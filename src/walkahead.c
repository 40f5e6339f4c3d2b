// SPDX-License-Identifier: MIT
/*
 * Walks side by side for a listing with attributes. `ls -l` sizes every
 * file it lists, and a file whose size needs a walk of its bytes (plain
 * gzip, stock LZ4 without a seek table, bzip2, one zstd frame without a
 * content size) makes its lookup wait for that walk. READDIRPLUS looks
 * its entries up one after another, so a directory of big such files
 * would be walked one file at a time on one core. Before a reply looks its
 * entries up, the big decoded files among the next ones are looked up on
 * as many threads as there are workers; the reply's own lookups then find
 * them sized. A file is "big" by its backing size: a small file's walk
 * costs less than a thread.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "blockfs/stats.h"
#include "fs_i.h"

/* Backing files smaller than this are looked up by the reply itself. */
#define AHEAD_MIN_BYTES (1u << 20)

struct bfs_walk_ahead {
	struct bfs_fs *fs;
	struct bfs_inode *dir;
	struct bfs_snap_ctx *c;
	struct bfs_dirent de[BFS_WALK_AHEAD_MAX];
	struct bfs_inode *in[BFS_WALK_AHEAD_MAX]; /* looked up: held until done */
	size_t n;
	atomic_size_t next;
};

static void *look_up(void *arg)
{
	struct bfs_walk_ahead *a = arg;
	struct stat st;
	size_t i;

	while ((i = atomic_fetch_add(&a->next, 1)) < a->n)
		if (bfs_lookup_entry(a->fs, a->dir, a->c, &a->de[i], &a->in[i], &st) < 0)
			a->in[i] = NULL;
	return NULL;
}

/* Will a lookup of @de walk a big backing file? No I/O but one fstatat. */
static bool worth_it(struct bfs_snap_ctx *c, const struct bfs_dirent *de)
{
	struct stat st;
	dev_t dev;
	ino_t ino;

	return de->codec && de->type == DT_REG && bfs_snap_new_file(c, de->backing, &dev, &ino) &&
	       fstatat(c->dirfd, de->backing, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISREG(st.st_mode) && st.st_size >= AHEAD_MIN_BYTES;
}

struct bfs_walk_ahead *bfs_walk_ahead(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_dir *d,
				      struct bfs_snap_ctx *c, size_t from, size_t count)
{
	unsigned int threads = fs->opts->workers;
	pthread_t tid[BFS_WALK_AHEAD_MAX];
	struct bfs_dirent de;
	struct bfs_walk_ahead *a;
	size_t i, started = 0;

	if (threads < 2 || count < 2)
		return NULL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	*a = (struct bfs_walk_ahead){ .fs = fs, .dir = dir, .c = c };
	atomic_init(&a->next, 0);
	for (i = from; i < from + count && a->n < BFS_WALK_AHEAD_MAX && bfs_dir_at(d, i, &de) == 0;
	     i++)
		if (worth_it(c, &de))
			a->de[a->n++] = de;
	if (a->n < 2) {
		free(a);
		return NULL;
	}
	if (threads > a->n)
		threads = (unsigned int)a->n;
	for (; started + 1 < threads; started++)
		if (pthread_create(&tid[started], NULL, look_up, a) != 0)
			break;
	BFS_COUNT(fs->env.mount, walked_ahead, a->n);
	look_up(a); /* the caller takes its share */
	for (i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	return a;
}

void bfs_walk_ahead_done(struct bfs_fs *fs, struct bfs_walk_ahead *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->n; i++)
		if (a->in[i])
			bfs_inode_forget(fs, a->in[i], 1);
	free(a);
}
