// SPDX-License-Identifier: MIT
/*
 * A snapshot's entries as shown (contract in dir.h): each backing name
 * passed through the name rules (names.c), which ask the snapshot for
 * names and types only, so that a listing opens no file. Made once per
 * snapshot (snap.c keeps them), on the worker that read it when the
 * directory was read ahead for a walk.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/names.h"
#include "dir.h"
#include "fs_i.h"
#include "inode.h"
#include "snap_i.h"

struct bfs_snap_entry bfs_snap_at(const struct bfs_snap *s, size_t i)
{
	const struct snent *e = &s->e[i];

	return (struct bfs_snap_entry){ .name = bfs_snap_ename(s, e),
					.ino = e->ino,
					.type = e->type };
}

size_t bfs_snap_count(const struct bfs_snap *s)
{
	return s->n;
}

/*
 * An entry as shown, in 16 bytes: a file of a listing costs these and its
 * shown name's bytes, kept as long as the snapshot is cached. The shown
 * names that differ from their backing names are packed in one buffer,
 * which moves while it grows: entries keep offsets into it.
 */
struct shent {
	uint32_t snent; /* the backing entry, in the snapshot */
	uint32_t name;	/* 1 + offset of the shown name in names; 0: the backing name */
	const struct bfs_codec *codec;
};

struct bfs_shown {
	const struct bfs_snap *snap; /* which keeps these (no reference) */
	struct shent *ent;
	size_t n, cap;
	char *names;
	size_t nlen, ncap;
	size_t bytes;
};

void bfs_shown_free(struct bfs_shown *sh)
{
	if (!sh)
		return;
	free(sh->names);
	free(sh->ent);
	free(sh);
}

size_t bfs_shown_bytes(const struct bfs_shown *sh)
{
	return sh->bytes;
}

int bfs_shown_at(const struct bfs_shown *sh, size_t i, struct bfs_dirent *out)
{
	const struct shent *x;
	const struct snent *e;

	if (i >= sh->n)
		return 1;
	x = &sh->ent[i];
	e = &sh->snap->e[x->snent];
	out->backing = bfs_snap_ename(sh->snap, e);
	out->name = x->name ? sh->names + x->name - 1 : out->backing;
	out->codec = x->codec;
	out->ino = bfs_inode_shown_ino(e->ino, x->codec); /* as stat says */
	out->type = e->type;
	return 0;
}

/* Append backing entry @i, shown as @name with @codec, to @sh (room for it is made). */
static int add_entry(struct bfs_shown *sh, size_t i, const char *name,
		     const struct bfs_codec *codec)
{
	struct shent *x = &sh->ent[sh->n];
	size_t len = strlen(name) + 1;

	*x = (struct shent){ .snent = (uint32_t)i, .codec = codec };
	if (strcmp(name, bfs_snap_ename(sh->snap, &sh->snap->e[i])) != 0) {
		if (sh->nlen + len > sh->ncap) {
			size_t want = sh->ncap ? sh->ncap * 2 : 256;
			char *nn;

			if (want < sh->nlen + len)
				want = sh->nlen + len;
			nn = realloc(sh->names, want);
			if (!nn)
				return -ENOMEM;
			sh->names = nn;
			sh->ncap = want;
		}
		memcpy(sh->names + sh->nlen, name, len);
		x->name = (uint32_t)sh->nlen + 1;
		sh->nlen += len;
	}
	sh->n++;
	return 0;
}

/* Snapshot entry @i as shown: none (a hidden sidecar), one, or two (keep_compressed). */
static int show(struct bfs_shown *sh, struct bfs_snap_ctx *c, size_t i)
{
	const char *name = bfs_snap_ename(c->snap, &c->snap->e[i]);
	bool keep = c->fs->opts->keep_compressed;
	const struct bfs_codec *codec = NULL;
	char shown[NAME_MAX + 1];
	int rc;

	if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
		return add_entry(sh, i, name, NULL);
	if (!bfs_name_shown(&bfs_snap_name_ops, c, name, shown, &codec, keep, &c->fs->env.codecs))
		return 0; /* a sidecar of a file shown decoded */
	rc = add_entry(sh, i, shown, codec);
	if (rc == 0 && codec && keep)
		rc = add_entry(sh, i, name, NULL);
	return rc;
}

struct bfs_shown *bfs_shown_make(struct bfs_fs *fs, struct bfs_snap *s)
{
	struct bfs_snap_ctx c = { .fs = fs, .dirfd = -1, .snap = s };
	struct bfs_shown *sh = calloc(1, sizeof(*sh));

	if (!sh)
		return NULL;
	sh->snap = s;
	/* at most two entries a backing one; trimmed below */
	sh->cap = s->n * (fs->opts->keep_compressed ? 2 : 1);
	sh->ent = malloc((sh->cap ? sh->cap : 1) * sizeof(*sh->ent));
	if (!sh->ent)
		goto out_free;
	for (size_t i = 0; i < s->n; i++)
		if (show(sh, &c, i) < 0)
			goto out_free;
	if (sh->n < sh->cap) {
		struct shent *ne = realloc(sh->ent, (sh->n ? sh->n : 1) * sizeof(*ne));

		if (ne) {
			sh->ent = ne;
			sh->cap = sh->n;
		}
	}
	if (sh->nlen < sh->ncap) {
		char *nn = realloc(sh->names, sh->nlen);

		if (nn) {
			sh->names = nn;
			sh->ncap = sh->nlen;
		}
	}
	sh->bytes = sizeof(*sh) + sh->cap * sizeof(*sh->ent) + sh->ncap;
	return sh;
out_free:
	bfs_shown_free(sh);
	return NULL;
}
