// SPDX-License-Identifier: MIT
/*
 * user.blockfs.* attributes: one table of {name, where, get, set} walked
 * by get, set, remove and list, so that a name is listed exactly where it
 * can be read. Facts about a file (format, sizes, cache, counters) are
 * read-only; the hints (advice, readpath) are kept in fs->hints by backing
 * path and applied here to file versions. The backing file's own
 * attributes pass through, read-only.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/mmap.h"
#include "blockfs/hints.h"
#include "blockfs/push.h"
#include "fs_i.h"
#include "xattr.h"

/* Longest value any getter writes, NUL included. */
#define VALUE_MAX BFS_STATS_MAX

/* Where a name applies. */
enum {
	ON_REG = 1 << 0,	/* regular files */
	ON_DIR = 1 << 1,	/* every directory */
	ON_ROOT = 1 << 2,	/* the mount root */
	UNLISTED = 1 << 3,	/* read by name only (SPEC §4: computed facts are not listed) */
};

/* One request on one inode: what the getters and setters may need. */
struct xctx {
	struct bfs_fs *fs;
	struct bfs_inode *in;
	struct bfs_file *f;	/* current version of a regular file, or NULL */
	char *rpath;		/* copy of in->rpath ("" when unknown) */
};

/*
 * Writes the value into @out (VALUE_MAX bytes) and returns its length, or
 * -ENODATA when it does not apply. With @bound (a size query, or a list
 * asking whether the name applies), values that change on their own
 * return the longest they can be instead, so that the read that follows a
 * size query never meets ERANGE.
 */
typedef int (*get_fn)(struct xctx *x, char *out, bool bound);
typedef int (*set_fn)(struct xctx *x, const char *val, size_t len, int flags,
		      struct bfs_xattr_inval *inval);
typedef int (*del_fn)(struct xctx *x);

/* --- read-only facts ------------------------------------------------------ */

static int get_format(struct xctx *x, char *out, bool bound)
{
	(void)bound;
	return snprintf(out, VALUE_MAX, "%s", x->f->codec ? x->f->codec->name : "raw");
}

static int get_csize(struct xctx *x, char *out, bool bound)
{
	(void)bound;
	return snprintf(out, VALUE_MAX, "%" PRIu64, (uint64_t)x->f->st.st_size);
}

static int get_block_size(struct xctx *x, char *out, bool bound)
{
	(void)bound;
	if (!x->f->codec)
		return -ENODATA;
	return snprintf(out, VALUE_MAX, "%" PRIu32, x->f->idx.block_size);
}

static int get_blocks(struct xctx *x, char *out, bool bound)
{
	(void)bound;
	if (!x->f->codec)
		return -ENODATA;
	/* The poison entry that marks damage is not a block of the file. */
	return snprintf(out, VALUE_MAX, "%zu", x->f->idx.n - (x->f->idx.broken ? 1 : 0));
}

/* --- index facts (index_cache.h, codec_gzip.c): issue 15's hook ----------- */

/* Where the index came from: "lz4-walk", "seektable", "gzi", "cache", ... */
static int get_index_source(struct xctx *x, char *out, bool bound)
{
	static const char *const src[] = {
		[BFS_SRC_WALK] = "walk", [BFS_SRC_SEEKTABLE] = "seektable",
		[BFS_SRC_GZI] = "gzi", [BFS_SRC_CACHE] = "cache",
	};
	unsigned int s = x->f->idx.source;

	(void)bound;
	if (!x->f->codec || s >= BFS_ARRAY_SIZE(src))
		return -ENODATA;
	if (s == BFS_SRC_WALK)
		return snprintf(out, VALUE_MAX, "%s-walk", x->f->codec->name);
	return snprintf(out, VALUE_MAX, "%s", src[s]);
}

/* Heap bytes of the index: its entries and the codec's private data (gzip windows). */
static int get_index_bytes(struct xctx *x, char *out, bool bound)
{
	const struct bfs_index *idx = &x->f->idx;

	(void)bound;
	if (!x->f->codec)
		return -ENODATA;
	return snprintf(out, VALUE_MAX, "%zu", idx->cap * sizeof(*idx->blk) + idx->priv_bytes);
}

/* gzip: checkpoints, one per span (block) */
static int get_checkpoints(struct xctx *x, char *out, bool bound)
{
	if (x->f->codec != &bfs_codec_gzip)
		return -ENODATA;
	return get_blocks(x, out, bound);
}

/* gzip: "complete", or "damaged" when the walk stopped at damage (reads past it fail) */
static int get_walk(struct xctx *x, char *out, bool bound)
{
	(void)bound;
	if (x->f->codec != &bfs_codec_gzip)
		return -ENODATA;
	return snprintf(out, VALUE_MAX, "%s", x->f->idx.broken ? "damaged" : "complete");
}

/* Values that change on their own: see get_fn for @bound. */
static int get_cached(struct xctx *x, char *out, bool bound)
{
	uint64_t v = bound ? UINT64_MAX : (uint64_t)atomic_load(&x->f->ctr->cached);

	return snprintf(out, VALUE_MAX, "%" PRIu64, v);
}

static int get_stats(struct xctx *x, char *out, bool bound)
{
	struct bfs_counters max;
	bool root = x->in == &x->fs->root;
	struct bfs_cache *cache = root ? x->fs->env.cache : NULL;

	if (bound) {
		/* Every counter at its widest, and the two cache lines too. */
		memset(&max, 0xff, sizeof(max));
		return bfs_stats_format(&max, NULL, out, VALUE_MAX) + (root ? 2 * 40 : 0);
	}
	return bfs_stats_format(root ? x->fs->env.mount : x->f->ctr, cache, out, VALUE_MAX);
}

/* --- hints: applying them ------------------------------------------------- */


/*
 * The backing bytes behind decompressed [@off, @off + @len) of @f, as far
 * as the exact part of the index knows them: only a hint follows, so an
 * unknown end runs to the end of the backing file.
 */
static void backing_span(struct bfs_file *f, uint64_t off, uint64_t len, uint64_t *coff,
			 uint64_t *clen)
{
	uint64_t csize = (uint64_t)f->st.st_size, cend = csize;
	size_t a, b;

	if (!f->codec) {
		*coff = off < csize ? off : csize;
		*clen = bfs_range_ok(off, len, csize) ? len : csize - *coff;
		return;
	}
	if (bfs_index_find(&f->idx, off, &a) < 0) {
		*coff = 0;		/* not settled that far: the whole file */
		*clen = csize;
		return;
	}
	*coff = f->idx.blk[a].coff;
	if (bfs_index_find(&f->idx, off + len - 1, &b) == 0)
		cend = f->idx.blk[b].coff + f->idx.blk[b].clen;
	*clen = cend > *coff ? cend - *coff : 0;
}


/*
 * Pass a hint to the kernel's cache of the backing file: posix_fadvise(2)
 * on the file, and madvise(2) on its mapping when one is live. Failure is
 * harmless: the hint only tunes the kernel's page cache.
 */
static void advise_backing(struct bfs_file *f, int advice, uint64_t off, uint64_t len)
{
	uint64_t coff = 0, clen = 0, page = (uint64_t)sysconf(_SC_PAGESIZE);
	const uint8_t *base;

	if (len)
		backing_span(f, off, len, &coff, &clen);
	else
		clen = (uint64_t)f->st.st_size;
	if (!clen)
		return;
	bfs_file_fadvise(f, coff, len ? clen : 0, bfs_advice_fadv(advice));
	/* only a live mapping: a hint is no reason to map a file */
	base = bfs_advice_madv(advice) >= 0 && atomic_load(&f->map) ? bfs_map_enter(f->env->maps, f) : NULL;
	if (base) {
		uint64_t start = coff & ~(page - 1);	/* madvise wants a page-aligned start */

		(void)madvise((void *)(base + start), clen + coff - start, bfs_advice_madv(advice));
		bfs_map_exit(f);
	}
}

/* The advice that applies to @rpath now. Takes the hints lock only. */
static int effective_advice(struct bfs_fs *fs, const char *rpath)
{
	return bfs_hints_effective(&fs->hints, rpath, BFS_HINT_ADVICE, fs->env.advice);
}

/* The read path that applies to @rpath now. */
static int effective_readpath(struct bfs_fs *fs, const char *rpath)
{
	return bfs_hints_effective(&fs->hints, rpath, BFS_HINT_READPATH, fs->env.readpath);
}

void bfs_xattr_apply(struct bfs_fs *fs, const char *rpath, struct bfs_file *f)
{
	int adv = effective_advice(fs, rpath);

	atomic_store(&f->advice, adv);
	atomic_store(&f->readpath, effective_readpath(fs, rpath));
	advise_backing(f, adv, 0, 0);
}

/* Is @path @dir itself or below it? ("." holds everything.) */
static bool below(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (strcmp(dir, ".") == 0)
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Give the current version of regular file @in its effective advice again. */
static void reapply_one(struct bfs_fs *fs, struct bfs_inode *in, const char *dir)
{
	struct bfs_file *f = NULL;

	pthread_mutex_lock(&in->lock);
	if (in->file && in->rpath && (!dir || below(in->rpath, dir))) {
		atomic_store(&in->file->advice, effective_advice(fs, in->rpath));
		atomic_store(&in->file->readpath, effective_readpath(fs, in->rpath));
		f = bfs_file_get(in->file);
	}
	pthread_mutex_unlock(&in->lock);
	if (f) {
		advise_backing(f, atomic_load(&f->advice), 0, 0);
		bfs_file_put(f);
	}
	/* Never built: bfs_xattr_apply() will read the store when it is. */
}

/*
 * A hint changed on @x's path: give every current file version it may
 * reach its effective advice again. Each version's advice is computed and
 * stored under its inode lock, so that of two concurrent changes the last
 * computation (which sees both) wins. For a directory, the regular files
 * known now are pinned with a lookup reference under fs->lock, then visited
 * without it: an inode lock may be held across a scan, and lookups must
 * not wait for that.
 */
static void reapply(struct xctx *x)
{
	struct bfs_fs *fs = x->fs;
	struct bfs_inode **pin = NULL;
	size_t n = 0;

	if (x->in->type == S_IFREG) {
		reapply_one(fs, x->in, NULL);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	if (fs->count)
		pin = malloc(fs->count * sizeof(*pin));
	for (size_t i = 0; pin && i < fs->nbuckets; i++) {
		for (struct bfs_inode *in = fs->table[i]; in; in = in->hnext) {
			if (in->type != S_IFREG)
				continue;
			in->nlookup++;		/* dropped by bfs_inode_forget() below */
			pin[n++] = in;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	for (size_t i = 0; i < n; i++) {
		reapply_one(fs, pin[i], x->rpath);
		bfs_inode_forget(fs, pin[i], 1);
	}
	free(pin);
}

/* --- hints: the attributes ------------------------------------------------ */

/* XATTR_CREATE / XATTR_REPLACE against the path's own hint of @kind. */
static int check_flags(struct xctx *x, enum bfs_hint_kind kind, int flags)
{
	int v;
	bool own = bfs_hints_own(&x->fs->hints, x->rpath, kind, &v);

	if ((flags & XATTR_CREATE) && own)
		return -EEXIST;
	if ((flags & XATTR_REPLACE) && !own)
		return -ENODATA;
	return 0;
}

static int get_advice(struct xctx *x, char *out, bool bound)
{
	(void)bound;
	return snprintf(out, VALUE_MAX, "%s", bfs_advice_name(effective_advice(x->fs, x->rpath)));
}

/* willneed / dontneed on a file: act on the range now; nothing is stored. */
static int act(struct xctx *x, const struct bfs_advice_req *r, struct bfs_xattr_inval *inval)
{
	uint64_t size, off = r->ranged ? r->off : 0, len;
	bool changed;
	int rc = bfs_inode_file(x->fs, x->in, &x->f, &changed);

	if (rc < 0)
		return rc;
	size = bfs_file_size(x->f);

	if (off >= size)
		return 0;		/* past the end: nothing to do, as posix_fadvise */
	len = r->ranged && r->len < size - off ? r->len : size - off;
	if (r->advice == BFS_ADV_WILLNEED) {
		/* the jobs read the file: they need its descriptor open */
		rc = bfs_inode_use(x->fs, x->in, x->f);
		if (rc < 0)
			return rc;
		advise_backing(x->f, BFS_ADV_WILLNEED, off, len);
		/* the FUSE inode number is the inode's address (ops.c) */
		(void)bfs_push_willneed(x->fs->env.workq, x->f,
					x->fs->opts->willneed_kernel ? (uintptr_t)x->in : 0, off, len);
		bfs_file_unuse(x->f);	/* the queued jobs hold their own */
		return 0;
	}
	bfs_file_drop_range(x->f, off, len);
	advise_backing(x->f, BFS_ADV_DONTNEED, off, len);
	*inval = (struct bfs_xattr_inval){ .set = true, .off = off,
					   .len = off + len >= size ? 0 : len };
	return 0;
}

static int set_advice(struct xctx *x, const char *val, size_t len, int flags,
		      struct bfs_xattr_inval *inval)
{
	struct bfs_advice_req r;
	bool dir = x->in->type == S_IFDIR;
	int rc = bfs_advice_parse(val, len, &r);

	if (rc < 0)
		return rc;
	if (r.advice == BFS_ADV_DONTNEED || (r.advice == BFS_ADV_WILLNEED && (r.ranged || !dir))) {
		/* An action on a file's bytes; a directory has none. */
		if (dir)
			return -EINVAL;
		return act(x, &r, inval);
	}
	/* A state: normal, sequential, random, noreuse; willneed as a directory's default. */
	rc = check_flags(x, BFS_HINT_ADVICE, flags);
	if (rc == 0)
		rc = bfs_hints_set(&x->fs->hints, x->rpath, BFS_HINT_ADVICE, (int)r.advice);
	if (rc == 0)
		reapply(x);
	return rc;
}

static int del_advice(struct xctx *x)
{
	int rc = bfs_hints_clear(&x->fs->hints, x->rpath, BFS_HINT_ADVICE);

	if (rc == 0)
		reapply(x);
	return rc;
}

static int get_readpath(struct xctx *x, char *out, bool bound)
{
	int rp = effective_readpath(x->fs, x->rpath);

	(void)bound;
	return snprintf(out, VALUE_MAX, "%s", bfs_readpath_name(rp));
}

static int set_readpath(struct xctx *x, const char *val, size_t len, int flags,
			struct bfs_xattr_inval *inval)
{
	enum bfs_readpath rp;
	int rc = bfs_readpath_parse(val, len, &rp);

	(void)inval;
	if (rc < 0)
		return rc;
	rc = check_flags(x, BFS_HINT_READPATH, flags);
	if (rc == 0)
		rc = bfs_hints_set(&x->fs->hints, x->rpath, BFS_HINT_READPATH, (int)rp);
	if (rc == 0)
		reapply(x);
	return rc;
}

static int del_readpath(struct xctx *x)
{
	int rc = bfs_hints_clear(&x->fs->hints, x->rpath, BFS_HINT_READPATH);

	if (rc == 0)
		reapply(x);
	return rc;
}

/* --- the table ------------------------------------------------------------ */

static const struct attr {
	const char *name;
	unsigned int where;	/* ON_* */
	bool needs_file;	/* on a regular file, the getter reads its version */
	get_fn get;
	set_fn set;		/* NULL: read-only */
	del_fn del;
} attrs[] = {
	{ BFS_XATTR_PREFIX "format", ON_REG, true, get_format, NULL, NULL },
	{ BFS_XATTR_PREFIX "compressed_size", ON_REG, true, get_csize, NULL, NULL },
	{ BFS_XATTR_PREFIX "block_size", ON_REG, true, get_block_size, NULL, NULL },
	{ BFS_XATTR_PREFIX "blocks", ON_REG, true, get_blocks, NULL, NULL },
	{ BFS_XATTR_PREFIX "cached", ON_REG, true, get_cached, NULL, NULL },
	{ BFS_XATTR_PREFIX "index_source", ON_REG | UNLISTED, true, get_index_source, NULL, NULL },
	{ BFS_XATTR_PREFIX "index_bytes", ON_REG | UNLISTED, true, get_index_bytes, NULL, NULL },
	{ BFS_XATTR_PREFIX "checkpoints", ON_REG | UNLISTED, true, get_checkpoints, NULL, NULL },
	{ BFS_XATTR_PREFIX "walk", ON_REG | UNLISTED, true, get_walk, NULL, NULL },
	{ BFS_XATTR_PREFIX "stats", ON_REG | ON_ROOT, true, get_stats, NULL, NULL },
	{ BFS_XATTR_PREFIX "advice", ON_REG | ON_DIR, false, get_advice, set_advice, del_advice },
	{ BFS_XATTR_PREFIX "readpath", ON_REG | ON_DIR, false, get_readpath, set_readpath,
	  del_readpath },
};

static const struct attr *find_attr(const char *name)
{
	for (size_t i = 0; i < BFS_ARRAY_SIZE(attrs); i++)
		if (strcmp(name, attrs[i].name) == 0)
			return &attrs[i];
	return NULL;
}

static unsigned int where_of(struct bfs_fs *fs, const struct bfs_inode *in)
{
	if (in == &fs->root)
		return ON_DIR | ON_ROOT;
	if (in->type == S_IFREG)
		return ON_REG;
	return in->type == S_IFDIR ? ON_DIR : 0;
}

static bool ours(const char *name)
{
	return strncmp(name, BFS_XATTR_PREFIX, sizeof(BFS_XATTR_PREFIX) - 1) == 0;
}

/* Fill @x for @in; with @file, also the current version of a regular file. */
static int ctx_init(struct xctx *x, struct bfs_fs *fs, struct bfs_inode *in, bool file)
{
	bool changed;
	int rc;

	*x = (struct xctx){ .fs = fs, .in = in };
	pthread_mutex_lock(&in->lock);
	x->rpath = strdup(in->rpath ? in->rpath : "");
	pthread_mutex_unlock(&in->lock);
	if (!x->rpath)
		return -ENOMEM;
	if (file && in->type == S_IFREG) {
		rc = bfs_inode_file(fs, in, &x->f, &changed);
		if (rc < 0) {
			free(x->rpath);
			return rc;
		}
	}
	return 0;
}

static void ctx_release(struct xctx *x)
{
	bfs_file_put(x->f);
	free(x->rpath);
}

static ssize_t reply_value(const char *val, size_t len, char *buf, size_t size)
{
	if (size == 0)
		return (ssize_t)len;
	if (size < len)
		return -ERANGE;
	memcpy(buf, val, len);
	return (ssize_t)len;
}

/* A path for the backing object's own attributes: @fd, its pinned descriptor. */
static void procpath(int fd, char *path, size_t len)
{
	snprintf(path, len, "/proc/self/fd/%d", fd);
}

/* Only regular files and directories carry attributes we pass through. */
static bool passes_through(const struct bfs_inode *in)
{
	return in->type == S_IFREG || in->type == S_IFDIR;
}

ssize_t bfs_xattr_get(struct bfs_fs *fs, struct bfs_inode *in, const char *name, char *buf,
		      size_t size)
{
	char val[VALUE_MAX], path[64];
	const struct attr *a;
	struct xctx x;
	ssize_t n;
	int rc;

	if (!ours(name)) {
		if (!passes_through(in))
			return -ENODATA;
		rc = bfs_inode_fd(fs, in);
		if (rc < 0)
			return rc;
		procpath(rc, path, sizeof(path));
		n = getxattr(path, name, buf, size);
		n = n < 0 ? -errno : n;
		bfs_inode_fd_put(fs, in);
		return n;
	}
	a = find_attr(name);
	if (!a || !(a->where & where_of(fs, in)))
		return -ENODATA;
	rc = ctx_init(&x, fs, in, a->needs_file);
	if (rc < 0)
		return rc;
	rc = a->get(&x, val, size == 0);
	ctx_release(&x);
	return rc < 0 ? rc : reply_value(val, (size_t)rc, buf, size);
}

/*
 * The backing object's attribute names (at @path) after our @len bytes of
 * @list, straight into the reply @buf. 0 when it has none: reply ours alone.
 */
static ssize_t list_backing(const char *path, const char *list, size_t len, char *buf,
			    size_t size)
{
	ssize_t n = listxattr(path, NULL, 0);

	if (n < 0)
		return errno == ENOTSUP ? 0 : -errno;
	if (n == 0)
		return 0;
	if (size == 0)
		return (ssize_t)len + n;
	if (size < len)
		return -ERANGE;
	n = listxattr(path, buf + len, size - len);
	if (n < 0)
		return -errno;
	memcpy(buf, list, len);
	return (ssize_t)len + n;
}

ssize_t bfs_xattr_list(struct bfs_fs *fs, struct bfs_inode *in, char *buf, size_t size)
{
	char list[1024], path[64], val[VALUE_MAX];
	unsigned int where = where_of(fs, in);
	size_t len = 0;
	struct xctx x;
	ssize_t n;
	int rc;

	rc = ctx_init(&x, fs, in, true);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < BFS_ARRAY_SIZE(attrs); i++) {
		size_t nl = strlen(attrs[i].name) + 1;

		if ((attrs[i].where & UNLISTED) || !(attrs[i].where & where) ||
		    attrs[i].get(&x, val, true) < 0)
			continue;
		memcpy(list + len, attrs[i].name, nl);	/* the table fits: see list[] */
		len += nl;
	}
	ctx_release(&x);
	if (passes_through(in)) {
		rc = bfs_inode_fd(fs, in);
		if (rc < 0)
			return rc;
		procpath(rc, path, sizeof(path));
		n = list_backing(path, list, len, buf, size);
		bfs_inode_fd_put(fs, in);
		if (n != 0)
			return n;
	}
	return reply_value(list, len, buf, size);
}

/* The attribute @name names for a change, or why it cannot be changed. */
static int writable(struct bfs_fs *fs, struct bfs_inode *in, const char *name,
		    const struct attr **out)
{
	const struct attr *a;

	if (!ours(name))
		return -EROFS;		/* the backing file's own: shown read-only */
	a = find_attr(name);
	if (!a)
		return -ENOTSUP;
	if (!a->set || !(a->where & where_of(fs, in)))
		return -EPERM;		/* a fact, or a hint where hints do not apply */
	*out = a;
	return 0;
}

int bfs_xattr_set(struct bfs_fs *fs, struct bfs_inode *in, const char *name, const char *value,
		  size_t size, int flags, struct bfs_xattr_inval *inval)
{
	const struct attr *a = NULL;
	struct xctx x;
	int rc = writable(fs, in, name, &a);

	*inval = (struct bfs_xattr_inval){ 0 };
	if (rc < 0)
		return rc;
	if (size > BFS_HINT_VALUE_MAX)
		return -E2BIG;		/* before touching the file: no valid value is this long */
	rc = ctx_init(&x, fs, in, false);
	if (rc < 0)
		return rc;
	rc = a->set(&x, value ? value : "", size, flags, inval);
	ctx_release(&x);
	return rc;
}

int bfs_xattr_remove(struct bfs_fs *fs, struct bfs_inode *in, const char *name)
{
	const struct attr *a = NULL;
	struct xctx x;
	int rc = writable(fs, in, name, &a);

	if (rc < 0)
		return rc;
	rc = ctx_init(&x, fs, in, false);
	if (rc < 0)
		return rc;
	rc = a->del(&x);
	ctx_release(&x);
	return rc;
}
