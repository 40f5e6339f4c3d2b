// SPDX-License-Identifier: MIT
/*
 * Directory listings as shown (contract in dir.h): made from a snapshot
 * (snap.c) as readdir reaches each entry, each name passed through the
 * name rules (names.c), which ask names and types only: a listing opens
 * no file.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/names.h"
#include "dir.h"
#include "fs_i.h"

/* --- listings ------------------------------------------------------------ */

/*
 * Shown names that differ from their backing names are kept in chunks
 * that never move (entries point into them), a few a listing, instead of
 * one allocation a name.
 */
struct bfs_dir_names {
	struct bfs_dir_names *next;
	size_t used;
	char buf[4096 - 2 * sizeof(void *)];
};

void bfs_dir_free(struct bfs_dir *d)
{
	if (!d)
		return;
	while (d->names) {
		struct bfs_dir_names *next = d->names->next;

		free(d->names);
		d->names = next;
	}
	free(d->ent);
	bfs_snap_put(d->snap);
	free(d);
}

/* A copy of @name, @len bytes and a NUL, that lives as long as @d. */
static const char *dir_name_copy(struct bfs_dir *d, const char *name, size_t len)
{
	struct bfs_dir_names *c = d->names;
	char *p;

	if (!c || sizeof(c->buf) - c->used < len + 1) {
		c = malloc(sizeof(*c));
		if (!c)
			return NULL;
		c->next = d->names;
		c->used = 0;
		d->names = c;
	}
	p = c->buf + c->used;
	memcpy(p, name, len);
	p[len] = '\0';
	c->used += len + 1;
	return p;
}

/* Append snapshot entry @e, shown as @name with @codec, to @d (room for it is made). */
static int add_dirent(struct bfs_dir *d, const char *name, const struct bfs_snap_entry *e,
		      const struct bfs_codec *codec)
{
	struct bfs_dirent *de = &d->ent[d->n];
	size_t len = strlen(name);

	de->backing = e->name; /* the snapshot outlives the listing */
	de->name = strcmp(name, de->backing) == 0 ? de->backing : dir_name_copy(d, name, len);
	de->codec = codec;
	de->ino = bfs_inode_shown_ino(e->ino, codec); /* as stat says */
	de->type = e->type;
	if (!de->name)
		return -ENOMEM;
	d->n++;
	return 0;
}

/* The next snapshot entry as shown: none (a hidden sidecar), one, or two (keep_compressed). */
static int list_next(struct bfs_dir *d, struct bfs_snap_ctx *c)
{
	const struct bfs_snap_entry e = bfs_snap_at(d->snap, d->next);
	const char *name = e.name;
	bool keep = c->fs->opts->keep_compressed;
	const struct bfs_codec *codec = NULL;
	char shown[NAME_MAX + 1];
	int rc;

	if (d->n + 2 > d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		struct bfs_dirent *ne = realloc(d->ent, cap * sizeof(*ne));

		if (!ne)
			return -ENOMEM;
		d->ent = ne;
		d->cap = cap;
	}
	if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
		memcpy(shown, name, strlen(name) + 1);
	else if (!bfs_name_shown(&bfs_snap_name_ops, c, name, shown, &codec, keep,
				 &c->fs->env.codecs))
		goto out_next; /* a sidecar of a file shown decoded */
	rc = add_dirent(d, shown, &e, codec);
	if (rc == 0 && codec && keep)
		rc = add_dirent(d, name, &e, NULL);
	if (rc < 0)
		return rc;
out_next:
	d->next++;
	return 0;
}

int bfs_dir_at(struct bfs_dir *d, struct bfs_snap_ctx *c, size_t i, const struct bfs_dirent **out)
{
	while (d->n <= i && d->next < bfs_snap_count(d->snap)) {
		int rc = list_next(d, c);

		if (rc < 0)
			return rc;
	}
	if (i >= d->n)
		return 1;
	*out = &d->ent[i];
	return 0;
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
	*out = d;
	return 0;
}
