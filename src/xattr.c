// SPDX-License-Identifier: MIT
/*
 * user.blockfs.* attributes: one table of {name, where, get, set} walked
 * by get, set, remove and list. Facts about a file (format, sizes, cache,
 * counters) are read-only and read by name only; the hints (advice,
 * readpath) are kept in fs->hints by backing path, applied here to file
 * versions, and listed where they are set. The backing file's own
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
#include <time.h>
#include <unistd.h>

#include "blockfs/cache.h"
#include "blockfs/codec.h"
#include "blockfs/file.h"
#include "blockfs/mmap.h"
#include "blockfs/hints.h"
#include "blockfs/spill.h"
#include "fs_i.h"
#include "xattr.h"

/* Longest value any getter writes, NUL included. */
#define VALUE_MAX BFS_STATS_MAX

/* Where a name applies. */
enum {
	ON_REG = 1 << 0,  /* regular files */
	ON_DIR = 1 << 1,  /* every directory */
	ON_ROOT = 1 << 2, /* the mount root */
};

/* One request on one inode: what the getters and setters may need. */
struct xctx {
	struct bfs_fs *fs;
	struct bfs_inode *in;
	struct bfs_file *f; /* current version of a regular file, or NULL */
	char *rpath;	    /* copy of in->rpath ("" when unknown) */
};

/*
 * Writes the value into @out (VALUE_MAX bytes) and returns its length, or
 * -ENODATA when it does not apply.
 */
typedef int (*get_fn)(struct xctx *x, char *out);
typedef int (*set_fn)(struct xctx *x, const char *val, size_t len, int flags,
		      struct bfs_xattr_act *act);
typedef int (*del_fn)(struct xctx *x);

/* --- read-only facts ------------------------------------------------------ */

static int get_format(struct xctx *x, char *out)
{
	if (x->f->found) /* named for one format, holding another */
		return snprintf(out, VALUE_MAX, "%s (not %s)", x->f->found, x->f->named->name);
	return snprintf(out, VALUE_MAX, "%s", x->f->codec ? x->f->codec->name : "raw");
}

static int get_csize(struct xctx *x, char *out)
{
	return snprintf(out, VALUE_MAX, "%" PRIu64, (uint64_t)x->f->st.st_size);
}

static int get_block_size(struct xctx *x, char *out)
{
	if (!x->f->codec)
		return -ENODATA;
	return snprintf(out, VALUE_MAX, "%" PRIu32, x->f->idx.block_size);
}

static int get_blocks(struct xctx *x, char *out)
{
	if (!x->f->codec)
		return -ENODATA;
	/* The poison entry that marks damage is not a block of the file. */
	return snprintf(out, VALUE_MAX, "%zu", x->f->idx.n - (x->f->idx.broken ? 1 : 0));
}

/*
 * The units of @idx a read decodes from their own start: each block, but
 * a chain of spans (one zstd frame or xz block, BFS_BLK_CHAIN) as one,
 * since a read far from any parked decoder decodes from its first span.
 * *@max: the decoded bytes of the largest. The poison entry of damage
 * is not counted.
 */
static size_t units_of(const struct bfs_codec *c, const struct bfs_index *idx, uint64_t *max)
{
	size_t n = idx->n - (idx->broken ? 1 : 0), units = 0;
	uint64_t cur = 0;

	*max = 0;
	for (size_t k = 0; k < n; k++) {
		const struct bfs_blk *b = &idx->blk[k];
		bool joins = k > 0 && (b->flags & BFS_BLK_CHAIN) &&
			     (idx->blk[k - 1].flags & BFS_BLK_CHAIN) && c->chain_head &&
			     !c->chain_head(b);

		if (!joins) {
			units++;
			cur = 0;
		}
		cur += b->usize;
		if (cur > *max)
			*max = cur;
	}
	return units;
}

static int get_units(struct xctx *x, char *out)
{
	uint64_t max;

	if (!x->f->codec)
		return -ENODATA;
	return snprintf(out, VALUE_MAX, "%zu", units_of(x->f->codec, &x->f->idx, &max));
}

static int get_unit_max(struct xctx *x, char *out)
{
	uint64_t max;

	if (!x->f->codec)
		return -ENODATA;
	(void)units_of(x->f->codec, &x->f->idx, &max);
	return snprintf(out, VALUE_MAX, "%" PRIu64, max);
}

/* --- index facts (index_cache.h, codec_gzip.c) ------------------------------ */

/* Where the index came from: "lz4-walk", "seektable", "gzi", "cache", ... */
static int get_index_source(struct xctx *x, char *out)
{
	static const char *const src[] = {
		[BFS_SRC_WALK] = "walk",
		[BFS_SRC_SEEKTABLE] = "seektable",
		[BFS_SRC_GZI] = "gzi",
		[BFS_SRC_CACHE] = "cache",
	};
	unsigned int s = x->f->idx.source;

	if (!x->f->codec || s >= BFS_ARRAY_SIZE(src))
		return -ENODATA;
	if (s == BFS_SRC_WALK)
		return snprintf(out, VALUE_MAX, "%s-walk", x->f->codec->name);
	return snprintf(out, VALUE_MAX, "%s", src[s]);
}

/* Heap bytes of the index: its entries and the codec's private data (gzip windows). */
static int get_index_bytes(struct xctx *x, char *out)
{
	const struct bfs_index *idx = &x->f->idx;

	if (!x->f->codec)
		return -ENODATA;
	return snprintf(out, VALUE_MAX, "%zu", idx->cap * sizeof(*idx->blk) + idx->priv_bytes);
}

/* gzip: checkpoints, one per span (block) */
static int get_checkpoints(struct xctx *x, char *out)
{
	if (x->f->codec != &bfs_codec_gzip)
		return -ENODATA;
	return get_blocks(x, out);
}

/*
 * A file whose index a walk made (now or, kept in the index cache, at an
 * earlier mount): "complete", or "damaged" when the walk
 * stopped at damage (reads past it fail). While the walk goes on,
 * bfs_xattr_get() answers "walking ..." without waiting for it.
 */
static int get_walk(struct xctx *x, char *out)
{
	if (!x->f->codec || (x->f->idx.source != BFS_SRC_WALK && x->f->idx.source != BFS_SRC_CACHE))
		return -ENODATA; /* a seek table or a .gzi: nothing was walked */
	return snprintf(out, VALUE_MAX, "%s", x->f->idx.broken ? "damaged" : "complete");
}

/* Values that change on their own (VOLATILE in the table). */
static int get_cached(struct xctx *x, char *out)
{
	return snprintf(out, VALUE_MAX, "%" PRIu64, (uint64_t)atomic_load(&x->f->ctr->cached));
}

static int get_stats(struct xctx *x, char *out)
{
	bool root = x->in == &x->fs->root;
	struct bfs_spill_stats sp = { 0 };
	struct bfs_stats_cache cache;

	if (root)
		bfs_spill_stats(&sp);
	cache = (struct bfs_stats_cache){
		.bytes = root ? bfs_cache_bytes(x->fs->env.cache) : 0,
		.limit = root ? bfs_cache_limit(x->fs->env.cache) : 0,
		.inodes = root ? bfs_inode_count(x->fs) : 0,
		.spill_bytes = sp.bytes,
		.spill_limit = sp.limit,
		.spill_proofs = sp.proofs,
		.spill_sealed = sp.sealed,
		.spill_reads = sp.reads,
		.spill_dropped = sp.dropped,
		.spill_failed = sp.failed,
		.spill_units = sp.units,
	};

	return bfs_stats_format(root ? x->fs->env.mount : x->f->ctr, root ? &cache : NULL, out,
				VALUE_MAX);
}

/* --- hints: applying them ------------------------------------------------- */

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

/* A hint changed on @x's path: every file version it reaches takes it now. */
static void reapply(struct xctx *x)
{
	bfs_inode_reapply_hints(x->fs, x->in, x->in->type == S_IFREG ? NULL : x->rpath);
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

static int get_advice(struct xctx *x, char *out)
{
	return snprintf(out, VALUE_MAX, "%s", bfs_advice_name(effective_advice(x->fs, x->rpath)));
}

/* willneed / dontneed on a file: act on the range now; nothing is stored. */
static int act(struct xctx *x, const struct bfs_advice_req *r, struct bfs_xattr_act *act)
{
	uint64_t size, off = r->ranged ? r->off : 0, len;
	bool changed;
	int rc = bfs_version_current(x->fs, x->in, &x->f, &changed);

	if (rc < 0)
		return rc;
	size = bfs_file_size(x->f);

	if (off >= size)
		return 0; /* past the end: nothing to do, as posix_fadvise */
	len = r->ranged && r->len < size - off ? r->len : size - off;
	if (r->advice == BFS_ADV_WILLNEED) {
		/* the decoding reads the file: it needs its descriptor open */
		rc = bfs_version_use(x->fs, x->in, x->f);
		if (rc < 0)
			return rc;
		bfs_file_advise(x->f, BFS_ADV_WILLNEED, off, len);
		/* ops.c decodes ahead: it knows the FUSE inode to push to */
		*act = (struct bfs_xattr_act){ .kind = BFS_XATTR_WILLNEED,
					       .off = off,
					       .len = len,
					       .f = bfs_file_get(x->f) };
		return 0;
	}
	bfs_file_drop_range(x->f, off, len);
	bfs_file_advise(x->f, BFS_ADV_DONTNEED, off, len);
	*act = (struct bfs_xattr_act){ .kind = BFS_XATTR_DROP_PAGES,
				       .off = off,
				       .len = off + len >= size ? 0 : len };
	return 0;
}

static int set_advice(struct xctx *x, const char *val, size_t len, int flags,
		      struct bfs_xattr_act *out)
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
		return act(x, &r, out);
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

static int get_readpath(struct xctx *x, char *out)
{
	int rp = effective_readpath(x->fs, x->rpath);

	return snprintf(out, VALUE_MAX, "%s", bfs_readpath_name(rp));
}

static int set_readpath(struct xctx *x, const char *val, size_t len, int flags,
			struct bfs_xattr_act *out)
{
	enum bfs_readpath rp;
	int rc = bfs_readpath_parse(val, len, &rp);

	(void)out;
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
	unsigned int where; /* ON_* */
	bool needs_file;    /* on a regular file, the getter reads its version */
	bool changes;	    /* changes on its own: a size query keeps the value (memo) */
	int hint;	    /* enum bfs_hint_kind of a hint; -1: a fact */
	get_fn get;
	set_fn set; /* NULL: read-only */
	del_fn del;
} attrs[] = {
	{ BFS_XATTR_PREFIX "format", ON_REG, true, false, -1, get_format, NULL, NULL },
	{ BFS_XATTR_PREFIX "compressed_size", ON_REG, true, false, -1, get_csize, NULL, NULL },
	{ BFS_XATTR_PREFIX "block_size", ON_REG, true, false, -1, get_block_size, NULL, NULL },
	{ BFS_XATTR_PREFIX "blocks", ON_REG, true, false, -1, get_blocks, NULL, NULL },
	{ BFS_XATTR_PREFIX "units", ON_REG, true, false, -1, get_units, NULL, NULL },
	{ BFS_XATTR_PREFIX "unit_max", ON_REG, true, false, -1, get_unit_max, NULL, NULL },
	{ BFS_XATTR_PREFIX "cached", ON_REG, true, true, -1, get_cached, NULL, NULL },
	{ BFS_XATTR_PREFIX "stats", ON_REG | ON_ROOT, true, true, -1, get_stats, NULL, NULL },
	{ BFS_XATTR_PREFIX "advice", ON_REG | ON_DIR, false, false, BFS_HINT_ADVICE, get_advice,
	  set_advice, del_advice },
	{ BFS_XATTR_PREFIX "readpath", ON_REG | ON_DIR, false, false, BFS_HINT_READPATH,
	  get_readpath, set_readpath, del_readpath },
	{ BFS_XATTR_PREFIX "index_source", ON_REG, true, false, -1, get_index_source, NULL, NULL },
	{ BFS_XATTR_PREFIX "index_bytes", ON_REG, true, false, -1, get_index_bytes, NULL, NULL },
	{ BFS_XATTR_PREFIX "checkpoints", ON_REG, true, false, -1, get_checkpoints, NULL, NULL },
	{ BFS_XATTR_PREFIX "walk", ON_REG, true, true, -1, get_walk, NULL, NULL },
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
	bfs_mutex_lock(bfs_ilock(fs, in));
	x->rpath = strdup(in->rpath ? in->rpath : "");
	bfs_mutex_unlock(bfs_ilock(fs, in));
	if (!x->rpath)
		return -ENOMEM;
	if (file && in->type == S_IFREG) {
		rc = bfs_version_current(fs, in, &x->f, &changed);
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

/*
 * Values that change on their own (cached, stats) may change length
 * between a size query and the get that follows it, and xattr(7) callers
 * such as rsync and getfattr take any difference for an error. So a size
 * query on them keeps the value it measured for the next get from the
 * same thread within MEMO_NS, which returns exactly that value if it
 * fits. A get that finds none reads the value afresh, and is -ERANGE only
 * when that does not fit. A few slots: the pattern is ask, then read at
 * once. Static, as ops.c's handles: one mount per process.
 */
#define MEMO_SLOTS 8
#define MEMO_NS	   1000000000ll

static struct memo {
	const struct bfs_inode *in; /* and its identity: an address may be reused */
	dev_t dev;
	ino_t ino;
	const struct attr *a;
	pid_t who;
	int64_t at; /* CLOCK_MONOTONIC ns when kept; 0: free */
	size_t len;
	char val[VALUE_MAX];
} memos[MEMO_SLOTS]; /* protected by memo_lock */
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static bool memo_is(const struct memo *m, const struct bfs_inode *in, const struct attr *a,
		    pid_t who, int64_t now)
{
	return m->at && now - m->at < MEMO_NS && m->in == in && m->dev == in->dev &&
	       m->ino == in->ino && m->a == a && m->who == who;
}

/* Keep @val for @who's next get of @a on @in: its slot, else a free or the oldest one. */
static void memo_keep(const struct bfs_inode *in, const struct attr *a, pid_t who, const char *val,
		      size_t len)
{
	int64_t now = now_ns();
	struct memo *m = &memos[0];

	bfs_mutex_lock(&memo_lock);
	for (size_t i = 0; i < MEMO_SLOTS; i++) {
		if (memo_is(&memos[i], in, a, who, now)) {
			m = &memos[i];
			break;
		}
		if (memos[i].at < m->at || now - memos[i].at >= MEMO_NS)
			m = &memos[i];
	}
	*m = (struct memo){ .in = in,
			    .dev = in->dev,
			    .ino = in->ino,
			    .a = a,
			    .who = who,
			    .at = now,
			    .len = len };
	memcpy(m->val, val, len);
	bfs_mutex_unlock(&memo_lock);
}

/* The value kept for @who, used up: its length if it fits @size, else -ERANGE; -ENOENT: none. */
static ssize_t memo_take(const struct bfs_inode *in, const struct attr *a, pid_t who, char *buf,
			 size_t size)
{
	int64_t now = now_ns();
	ssize_t n = -ENOENT;

	bfs_mutex_lock(&memo_lock);
	for (size_t i = 0; i < MEMO_SLOTS; i++) {
		if (!memo_is(&memos[i], in, a, who, now))
			continue;
		memos[i].at = 0;
		n = -ERANGE;
		if (memos[i].len <= size) {
			memcpy(buf, memos[i].val, memos[i].len);
			n = (ssize_t)memos[i].len;
		}
		break;
	}
	bfs_mutex_unlock(&memo_lock);
	return n;
}

ssize_t bfs_xattr_get(struct bfs_fs *fs, struct bfs_inode *in, const char *name, char *buf,
		      size_t size, pid_t who)
{
	char val[VALUE_MAX], path[64];
	const struct attr *a;
	struct xctx x;
	ssize_t n;
	int rc;

	if (!ours(name)) {
		if (!passes_through(in))
			return -ENODATA;
		rc = bfs_backing_fd(fs, in);
		if (rc < 0)
			return rc;
		/*
		 * A regular file's descriptor is open for reading: asked directly
		 * (ls -l asks two names of every file). O_PATH ones are EBADF
		 * there and go through /proc.
		 */
		n = fgetxattr(rc, name, buf, size);
		if (n < 0 && errno == EBADF) {
			procpath(rc, path, sizeof(path));
			n = getxattr(path, name, buf, size);
		}
		n = n < 0 ? -errno : n;
		bfs_backing_fd_put(fs, in);
		return n;
	}
	a = find_attr(name);
	if (!a || !(a->where & where_of(fs, in)))
		return -ENODATA;
	if (a->changes && size > 0) {
		n = memo_take(in, a, who, buf, size);
		if (n >= 0)
			return n; /* exactly what the size query measured */
	}
	rc = a->get == get_walk ? bfs_version_walking(fs, in, val, sizeof(val)) : 0;
	if (rc > 0)
		goto reply; /* the walk holds the inode's lock: no version yet */
	rc = ctx_init(&x, fs, in, a->needs_file);
	if (rc < 0)
		return rc;
	rc = a->get(&x, val);
	ctx_release(&x);
reply:
	if (rc >= 0 && a->changes && size == 0)
		memo_keep(in, a, who, val, (size_t)rc);
	return rc < 0 ? rc : reply_value(val, (size_t)rc, buf, size);
}

/*
 * The backing object's attribute names (at @path) after our @len bytes of
 * @list, straight into the reply @buf. 0 when it has none: reply ours alone.
 */
static ssize_t list_backing(const char *path, const char *list, size_t len, char *buf, size_t size)
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

/*
 * Listed: the hints set on this very path, then the backing object's own
 * attributes. The facts (format, sizes, cached, stats) and inherited hints
 * are read by name only (getfattr -n), as CephFS does with its virtual
 * attributes: listing them made cp -a, rsync -X and tar --xattrs copy them
 * onto copies, where they are false.
 */
ssize_t bfs_xattr_list(struct bfs_fs *fs, struct bfs_inode *in, char *buf, size_t size)
{
	char list[1024], path[64];
	unsigned int where = where_of(fs, in);
	size_t len = 0;
	struct xctx x;
	ssize_t n;
	int rc, v;

	rc = ctx_init(&x, fs, in, false);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < BFS_ARRAY_SIZE(attrs); i++) {
		size_t nl = strlen(attrs[i].name) + 1;

		if (attrs[i].hint < 0 || !(attrs[i].where & where) ||
		    !bfs_hints_own(&fs->hints, x.rpath, (enum bfs_hint_kind)attrs[i].hint, &v))
			continue;
		memcpy(list + len, attrs[i].name, nl); /* the table fits: see list[] */
		len += nl;
	}
	ctx_release(&x);
	if (passes_through(in)) {
		rc = bfs_backing_fd(fs, in);
		if (rc < 0)
			return rc;
		procpath(rc, path, sizeof(path));
		n = list_backing(path, list, len, buf, size);
		bfs_backing_fd_put(fs, in);
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
		return -EROFS; /* the backing file's own: shown read-only */
	a = find_attr(name);
	if (!a)
		return -ENOTSUP;
	if (!a->set || !(a->where & where_of(fs, in)))
		return -EPERM; /* a fact, or a hint where hints do not apply */
	*out = a;
	return 0;
}

int bfs_xattr_set(struct bfs_fs *fs, struct bfs_inode *in, const char *name, const char *value,
		  size_t size, int flags, struct bfs_xattr_act *act)
{
	const struct attr *a = NULL;
	struct xctx x;
	int rc = writable(fs, in, name, &a);

	*act = (struct bfs_xattr_act){ .kind = BFS_XATTR_NONE };
	if (rc < 0)
		return rc;
	if (size > BFS_HINT_VALUE_MAX)
		return -E2BIG; /* before touching the file: no valid value is this long */
	rc = ctx_init(&x, fs, in, false);
	if (rc < 0)
		return rc;
	rc = a->set(&x, value ? value : "", size, flags, act);
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
