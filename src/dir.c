// SPDX-License-Identifier: MIT
/*
 * Directory listings (contract in dir.h): a snapshot (snap.c) and its
 * entries as shown (shown.c), taken at opendir.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "dir.h"
#include "fs_i.h"

/* --- listings ------------------------------------------------------------ */

void bfs_dir_free(struct bfs_dir *d)
{
	if (!d)
		return;
	bfs_snap_put(d->snap);
	free(d);
}

int bfs_dir_at(const struct bfs_dir *d, size_t i, struct bfs_dirent *out)
{
	return bfs_shown_at(d->shown, i, out);
}

int bfs_dir_open(struct bfs_fs *fs, struct bfs_inode *dir, struct bfs_dir **out)
{
	struct bfs_dir *d;
	int rc, dirfd;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	dirfd = bfs_backing_fd(fs, dir);
	if (dirfd < 0) {
		free(d);
		return dirfd;
	}
	rc = bfs_snap_get(fs, dirfd, &d->snap);
	bfs_backing_fd_put(fs, dir);
	if (rc < 0) {
		free(d);
		return rc;
	}
	d->shown = bfs_snap_shown(fs, d->snap);
	if (!d->shown) {
		bfs_dir_free(d);
		return -ENOMEM;
	}
	*out = d;
	return 0;
}
