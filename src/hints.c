// SPDX-License-Identifier: MIT
/*
 * The per-mount store of hints keyed by backing path, and the inheritance
 * rule. Pure: no FUSE, no inodes, no I/O. version.c applies what is decided
 * here to file versions as they are built, inode.c to those built already.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "blockfs/hints.h"

/* --- the store ------------------------------------------------------------ */

struct bfs_hint_ent {
	struct bfs_hint_ent *next;
	bool has[BFS_HINT_KINDS];
	int val[BFS_HINT_KINDS];
	char path[];
};

#define FIRST_BUCKETS 64

void bfs_hints_init(struct bfs_hints *h)
{
	memset(h, 0, sizeof(*h));
	bfs_mutex_init(&h->lock);
}

void bfs_hints_destroy(struct bfs_hints *h)
{
	for (size_t i = 0; i < h->nbuckets; i++) {
		for (struct bfs_hint_ent *e = h->tab[i], *next; e; e = next) {
			next = e->next;
			free(e);
		}
	}
	free(h->tab);
	pthread_mutex_destroy(&h->lock);
}

/* FNV-1a over [p, p + n). */
static size_t hash(const char *p, size_t n)
{
	uint64_t x = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		x = (x ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return (size_t)(x ^ x >> 32);
}

/* The entry for the first @n bytes of @path; lock held. */
static struct bfs_hint_ent *find(struct bfs_hints *h, const char *path, size_t n)
{
	if (!h->tab)
		return NULL;
	for (struct bfs_hint_ent *e = h->tab[hash(path, n) & (h->nbuckets - 1)]; e; e = e->next)
		if (strncmp(e->path, path, n) == 0 && e->path[n] == '\0')
			return e;
	return NULL;
}

/* Double the buckets past two entries per bucket; lock held. */
static void grow(struct bfs_hints *h)
{
	size_t nb = h->nbuckets ? h->nbuckets * 2 : FIRST_BUCKETS;
	struct bfs_hint_ent **nt;

	if (h->tab && h->count < h->nbuckets * 2)
		return;
	nt = calloc(nb, sizeof(*nt));
	if (!nt)
		return; /* longer chains, still correct (if a table exists) */
	for (size_t i = 0; i < h->nbuckets; i++) {
		for (struct bfs_hint_ent *e = h->tab[i], *next; e; e = next) {
			size_t b = hash(e->path, strlen(e->path)) & (nb - 1);

			next = e->next;
			e->next = nt[b];
			nt[b] = e;
		}
	}
	free(h->tab);
	h->tab = nt;
	h->nbuckets = nb;
}

int bfs_hints_set(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind, int value)
{
	size_t n = strlen(path), b;
	struct bfs_hint_ent *e;
	int rc = 0;

	bfs_mutex_lock(&h->lock);
	e = find(h, path, n);
	if (!e) {
		grow(h);
		e = h->tab ? calloc(1, sizeof(*e) + n + 1) : NULL;
		if (!e) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(e->path, path, n + 1);
		b = hash(path, n) & (h->nbuckets - 1);
		e->next = h->tab[b];
		h->tab[b] = e;
		h->count++;
	}
	e->has[kind] = true;
	e->val[kind] = value;
out:
	bfs_mutex_unlock(&h->lock);
	return rc;
}

int bfs_hints_clear(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind)
{
	size_t n = strlen(path), k;
	struct bfs_hint_ent *e, **pp;
	int rc = -ENODATA;

	bfs_mutex_lock(&h->lock);
	e = find(h, path, n);
	if (!e || !e->has[kind])
		goto out;
	e->has[kind] = false;
	rc = 0;
	for (k = 0; k < BFS_HINT_KINDS && !e->has[k]; k++)
		;
	if (k < BFS_HINT_KINDS)
		goto out; /* the path keeps another hint */
	for (pp = &h->tab[hash(path, n) & (h->nbuckets - 1)]; *pp != e; pp = &(*pp)->next)
		;
	*pp = e->next;
	h->count--;
	free(e);
out:
	bfs_mutex_unlock(&h->lock);
	return rc;
}

bool bfs_hints_own(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind, int *value)
{
	struct bfs_hint_ent *e;
	bool has = false;

	bfs_mutex_lock(&h->lock);
	e = find(h, path, strlen(path));
	if (e && e->has[kind]) {
		*value = e->val[kind];
		has = true;
	}
	bfs_mutex_unlock(&h->lock);
	return has;
}

int bfs_hints_effective(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind, int dflt)
{
	size_t n = strlen(path);
	int v = dflt;

	bfs_mutex_lock(&h->lock);
	if (!h->tab)
		goto out; /* nothing was ever set: the common case */
	/* The path, then each prefix ending before a '/', then "." (SOURCE). */
	for (;;) {
		struct bfs_hint_ent *e = find(h, path, n);

		if (e && e->has[kind]) {
			v = e->val[kind];
			break;
		}
		if (n == 1 && path[0] == '.')
			break;
		while (n > 0 && path[n - 1] != '/')
			n--;
		if (n == 0) {
			path = ".";
			n = 1;
		} else {
			while (n > 0 && path[n - 1] == '/')
				n--; /* "a//b": tolerate doubled slashes */
			if (n == 0) {
				path = ".";
				n = 1;
			}
		}
	}
out:
	bfs_mutex_unlock(&h->lock);
	return v;
}

/* --- user.blockfs.stats --------------------------------------------------- */
