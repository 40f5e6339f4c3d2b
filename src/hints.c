// SPDX-License-Identifier: MIT
/*
 * Hint values, the per-mount store of hints keyed by backing path, the
 * inheritance rule, and the text of user.blockfs.stats. Pure: no FUSE, no
 * inodes, no I/O. xattr.c applies what is decided here to file versions.
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

#include "blockfs/cache.h"
#include "blockfs/hints.h"
#include "blockfs/opts.h"

static const char *const advice_names[BFS_ADV_COUNT] = {
	[BFS_ADV_NORMAL] = "normal",
	[BFS_ADV_SEQUENTIAL] = "sequential",
	[BFS_ADV_RANDOM] = "random",
	[BFS_ADV_WILLNEED] = "willneed",
	[BFS_ADV_DONTNEED] = "dontneed",
	[BFS_ADV_NOREUSE] = "noreuse",
};

static const char *const readpath_names[] = {
	[BFS_READPATH_PREAD] = "pread",
	[BFS_READPATH_MMAP] = "mmap",
	[BFS_READPATH_AUTO] = "auto",
};

const char *bfs_advice_name(int advice)
{
	return advice >= 0 && advice < BFS_ADV_COUNT ? advice_names[advice] : NULL;
}

const char *bfs_readpath_name(int readpath)
{
	return readpath >= 0 && (size_t)readpath < BFS_ARRAY_SIZE(readpath_names) ?
		       readpath_names[readpath] : NULL;
}

int bfs_advice_fadv(int advice)
{
	switch (advice) {
	case BFS_ADV_SEQUENTIAL:
		return POSIX_FADV_SEQUENTIAL;
	case BFS_ADV_RANDOM:
		return POSIX_FADV_RANDOM;
	case BFS_ADV_WILLNEED:
		return POSIX_FADV_WILLNEED;
	case BFS_ADV_DONTNEED:
		return POSIX_FADV_DONTNEED;
	case BFS_ADV_NOREUSE:
		return POSIX_FADV_NOREUSE;
	default:
		return POSIX_FADV_NORMAL;
	}
}

int bfs_advice_madv(int advice)
{
	switch (advice) {
	case BFS_ADV_SEQUENTIAL:
		return MADV_SEQUENTIAL;
	case BFS_ADV_RANDOM:
		return MADV_RANDOM;
	case BFS_ADV_WILLNEED:
		return MADV_WILLNEED;
	case BFS_ADV_DONTNEED:
		return MADV_DONTNEED;
	case BFS_ADV_NORMAL:
		return MADV_NORMAL;
	default:
		return -1;
	}
}

/*
 * Copy the value into @s as a C string: refuse it when too long or when it
 * holds a NUL anywhere but as its last byte.
 */
static int value_string(const char *val, size_t len, char s[BFS_HINT_VALUE_MAX + 1])
{
	if (len > BFS_HINT_VALUE_MAX)
		return -E2BIG;
	if (len > 0 && val[len - 1] == '\0')
		len--;
	if (len == 0 || memchr(val, '\0', len))
		return -EINVAL;
	memcpy(s, val, len);
	s[len] = '\0';
	return 0;
}

static int pick(const char *s, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return (int)i;
	return -1;
}

int bfs_advice_parse(const char *val, size_t len, struct bfs_advice_req *out)
{
	char s[BFS_HINT_VALUE_MAX + 1], *off_s, *len_s;
	uint64_t off, n;
	int rc = value_string(val, len, s), v;

	if (rc < 0)
		return rc;
	/* Exactly one space between fields: "willneed 0 64M". */
	off_s = strchr(s, ' ');
	if (off_s)
		*off_s++ = '\0';
	v = pick(s, advice_names, BFS_ADV_COUNT);
	if (v < 0)
		return -EINVAL;
	*out = (struct bfs_advice_req){ .advice = (enum bfs_advice)v };
	if (!off_s)
		return 0;
	if (v != BFS_ADV_WILLNEED && v != BFS_ADV_DONTNEED)
		return -EINVAL;		/* only the actions take a range */
	len_s = strchr(off_s, ' ');
	if (!len_s)
		return -EINVAL;
	*len_s++ = '\0';
	/* bfs_parse_size() refuses signs, spaces, junk and anything past 2^64. */
	if (bfs_parse_size(off_s, &off) < 0 || bfs_parse_size(len_s, &n) < 0)
		return -EINVAL;
	if (n == 0 || off > UINT64_MAX - n)
		return -EINVAL;
	out->ranged = true;
	out->off = off;
	out->len = n;
	return 0;
}

int bfs_readpath_parse(const char *val, size_t len, enum bfs_readpath *out)
{
	char s[BFS_HINT_VALUE_MAX + 1];
	int rc = value_string(val, len, s), v;

	if (rc < 0)
		return rc;
	v = pick(s, readpath_names, BFS_ARRAY_SIZE(readpath_names));
	if (v < 0)
		return -EINVAL;
	*out = (enum bfs_readpath)v;
	return 0;
}

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
	pthread_mutex_init(&h->lock, NULL);
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
		return;			/* longer chains, still correct (if a table exists) */
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

	pthread_mutex_lock(&h->lock);
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
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int bfs_hints_clear(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind)
{
	size_t n = strlen(path), k;
	struct bfs_hint_ent *e, **pp;
	int rc = -ENODATA;

	pthread_mutex_lock(&h->lock);
	e = find(h, path, n);
	if (!e || !e->has[kind])
		goto out;
	e->has[kind] = false;
	rc = 0;
	for (k = 0; k < BFS_HINT_KINDS && !e->has[k]; k++)
		;
	if (k < BFS_HINT_KINDS)
		goto out;		/* the path keeps another hint */
	for (pp = &h->tab[hash(path, n) & (h->nbuckets - 1)]; *pp != e; pp = &(*pp)->next)
		;
	*pp = e->next;
	h->count--;
	free(e);
out:
	pthread_mutex_unlock(&h->lock);
	return rc;
}

bool bfs_hints_own(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind, int *value)
{
	struct bfs_hint_ent *e;
	bool has = false;

	pthread_mutex_lock(&h->lock);
	e = find(h, path, strlen(path));
	if (e && e->has[kind]) {
		*value = e->val[kind];
		has = true;
	}
	pthread_mutex_unlock(&h->lock);
	return has;
}

int bfs_hints_effective(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind, int dflt)
{
	size_t n = strlen(path);
	int v = dflt;

	pthread_mutex_lock(&h->lock);
	if (!h->tab)
		goto out;		/* nothing was ever set: the common case */
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
				n--;		/* "a//b": tolerate doubled slashes */
			if (n == 0) {
				path = ".";
				n = 1;
			}
		}
	}
out:
	pthread_mutex_unlock(&h->lock);
	return v;
}

/* --- user.blockfs.stats --------------------------------------------------- */

#define LOAD(c, f) ((uint64_t)atomic_load_explicit(&(c)->f, memory_order_relaxed))

int bfs_stats_format(const struct bfs_counters *c, const struct bfs_cache *cache, char *buf,
		     size_t len)
{
	/* C11 atomic_load takes a pointer to non-const (C17 relaxed that). */
	struct bfs_counters *m = (struct bfs_counters *)c;
	const struct {
		const char *key;
		uint64_t v;
	} rows[] = {
		{ "reads", LOAD(m, reads) },
		{ "bytes", LOAD(m, bytes) },
		{ "cache_hits", LOAD(m, hits) },
		{ "cache_misses", LOAD(m, misses) },
		{ "blocks_decompressed", LOAD(m, decoded) },
		{ "decompress_ns", LOAD(m, decode_ns) },
		{ "blocks_prefetched", LOAD(m, prefetched) },
		{ "prefetched_used", LOAD(m, prefetch_used) },
		{ "pushed_bytes", LOAD(m, pushed) },
		{ "backing_syscalls", LOAD(m, syscalls) },
		{ "checksum_failures", LOAD(m, csum_failures) },
		{ "errors", LOAD(m, errors) },
		{ "cached_bytes", LOAD(m, cached) },
		{ "cache_bytes", cache ? bfs_cache_bytes(cache) : 0 },
		{ "cache_limit", cache ? bfs_cache_limit(cache) : 0 },
	};
	size_t nrows = BFS_ARRAY_SIZE(rows) - (cache ? 0 : 2), at = 0;

	for (size_t i = 0; i < nrows; i++) {
		int n = snprintf(buf + at, len - at, "%s %" PRIu64 "\n", rows[i].key, rows[i].v);

		if (n < 0 || (size_t)n >= len - at)
			return -ERANGE;
		at += (size_t)n;
	}
	return (int)at;
}
