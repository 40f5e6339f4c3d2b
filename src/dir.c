// SPDX-License-Identifier: MIT
/*
 * Directory listings as shown (contract in fs_i.h): one snapshot of a
 * backing directory per opendir, each name passed through the name rules
 * (names.c) with the codec sniffed only where a rule needs it.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/names.h"
#include "fs_i.h"

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
		e->codec = bfs_backing_sniff(l->fs, l->dirfd, name);
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

	fd = bfs_backing_openat(l->fs, l->dirfd, ".", O_RDONLY | O_DIRECTORY);
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
	de->ino = bfs_inode_shown_ino(e->ino, codec);	/* as stat says */
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
