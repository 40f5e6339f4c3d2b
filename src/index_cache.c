// SPDX-License-Identifier: MIT
/*
 * The index cache (layout and contract in index_cache.h): encoding and
 * checked decoding of entries, and their files in the cache directory
 * (directory memos' records are dirmemo.c's).
 * The checks are the seek table's: nothing an entry says is used before
 * it has been bounded by the file it claims to describe.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blockfs/codec.h"
#include "blockfs/index.h"
#include "blockfs/index_cache.h"
#include "blockfs/log.h"
#include "blockfs/xxh32.h"

/* Header fields (index_cache.h) */
#define H_MAGIC	     0
#define H_VERSION    8
#define H_HDR_LEN    12
#define H_CODEC	     16
#define H_DEV	     32
#define H_INO	     40
#define H_SIZE	     48
#define H_MTIME	     56
#define H_MTIME_NS   64
#define H_CTIME	     72
#define H_CTIME_NS   80
#define H_COUNT	     88
#define H_USIZE	     96
#define H_BLOCK_SIZE 104
#define H_ENTRY_LEN  108
#define H_PRIV_LEN   112
#define H_RESERVED   120

/* Block entry fields */
#define E_COFF	0
#define E_CLEN	8
#define E_USIZE 12
#define E_FLAGS 16
#define E_AUX	20

/* Flags an entry may carry: what a good index holds after its scan. */
#define KEPT_FLAGS (BFS_BLK_CSUM | BFS_BLK_GUESS | BFS_BLK_CLAIMED | BFS_BLK_CHAIN | BFS_BLK_OPEN)

/*
 * Private bytes per block an entry may claim, at most: a gzip checkpoint
 * with its window is far below. It bounds what a lying header can make
 * us read before the checksum is even looked at.
 */
#define PRIV_PER_BLOCK_MAX (64u << 10)

/* ".entry" and temporary names: dev and ino in hex, and a counter. */
#define NAME_LEN 64

/*
 * With a bound: an entry read this long after its last write or touch
 * has its mtime renewed, so that trims drop the least recently used.
 */
#define TOUCH_AFTER_S 3600

struct bfs_icache {
	int dirfd;		  /* O_DIRECTORY of the cache directory */
	char *dir;		  /* for log lines */
	uint64_t limit;		  /* bytes of entries kept; 0: no bound */
	atomic_bool no_save;	  /* a save failed: saving is off for this mount */
	atomic_uint_fast64_t seq; /* temporary names */
	/* With a limit: */
	pthread_mutex_t trim_lock; /* one trim at a time */
	atomic_bool counted;	   /* used was counted from the directory */
	atomic_uint_fast64_t used; /* bytes of entries, as this mount knows them */
	atomic_bool again;	   /* a save passed the bound while a trim was under way */
};

void bfs_icache_key_of(const struct stat *st, struct bfs_icache_key *key)
{
	*key = (struct bfs_icache_key){
		.dev = (uint64_t)st->st_dev,
		.ino = (uint64_t)st->st_ino,
		.size = (uint64_t)st->st_size,
		.mtime_sec = (int64_t)st->st_mtim.tv_sec,
		.mtime_nsec = (uint64_t)st->st_mtim.tv_nsec,
		.ctime_sec = (int64_t)st->st_ctim.tv_sec,
		.ctime_nsec = (uint64_t)st->st_ctim.tv_nsec,
	};
}

static void put_key(uint8_t *h, const struct bfs_icache_key *k)
{
	bfs_put_le64(h + H_DEV, k->dev);
	bfs_put_le64(h + H_INO, k->ino);
	bfs_put_le64(h + H_SIZE, k->size);
	bfs_put_le64(h + H_MTIME, (uint64_t)k->mtime_sec);
	bfs_put_le64(h + H_MTIME_NS, k->mtime_nsec);
	bfs_put_le64(h + H_CTIME, (uint64_t)k->ctime_sec);
	bfs_put_le64(h + H_CTIME_NS, k->ctime_nsec);
}

int bfs_icache_encode(const struct bfs_icache_key *key, const struct bfs_codec *codec,
		      const struct bfs_index *idx, uint8_t **out, size_t *len)
{
	uint8_t *priv = NULL, *buf, *e;
	size_t plen = 0, total;
	int rc;

	if (!codec->cache_load || idx->broken || idx->n == 0 ||
	    strlen(codec->name) >= BFS_ICACHE_CODEC_LEN)
		return -EINVAL;
	for (size_t k = 0; k < idx->n; k++)
		if (idx->blk[k].flags & ~KEPT_FLAGS)
			return -EINVAL; /* a poisoned block: walk again next time */
	if (codec->cache_save) {
		rc = codec->cache_save(idx, &priv, &plen);
		if (rc < 0)
			return rc;
	}
	total = BFS_ICACHE_HDR_LEN + idx->n * BFS_ICACHE_ENTRY_LEN + plen + BFS_ICACHE_CSUM_LEN;
	buf = calloc(1, total);
	if (!buf) {
		free(priv);
		return -ENOMEM;
	}
	memcpy(buf + H_MAGIC, BFS_ICACHE_MAGIC, 8);
	bfs_put_le32(buf + H_VERSION, BFS_ICACHE_VERSION);
	bfs_put_le32(buf + H_HDR_LEN, BFS_ICACHE_HDR_LEN);
	memcpy(buf + H_CODEC, codec->name, strlen(codec->name));
	put_key(buf, key);
	bfs_put_le64(buf + H_COUNT, idx->n);
	bfs_put_le64(buf + H_USIZE, atomic_load(&idx->usize));
	bfs_put_le32(buf + H_BLOCK_SIZE, idx->block_size);
	bfs_put_le32(buf + H_ENTRY_LEN, BFS_ICACHE_ENTRY_LEN);
	bfs_put_le64(buf + H_PRIV_LEN, plen);
	e = buf + BFS_ICACHE_HDR_LEN;
	for (size_t k = 0; k < idx->n; k++, e += BFS_ICACHE_ENTRY_LEN) {
		const struct bfs_blk *b = &idx->blk[k];

		bfs_put_le64(e + E_COFF, b->coff);
		bfs_put_le32(e + E_CLEN, b->clen);
		bfs_put_le32(e + E_USIZE, b->usize);
		bfs_put_le32(e + E_FLAGS, b->flags);
		bfs_put_le32(e + E_AUX, b->aux);
	}
	if (plen)
		memcpy(e, priv, plen);
	free(priv);
	bfs_put_le32(buf + total - BFS_ICACHE_CSUM_LEN,
		     bfs_xxh32(buf, total - BFS_ICACHE_CSUM_LEN, 0));
	*out = buf;
	*len = total;
	return 0;
}

/* Header checks that need neither the blocks nor the checksum. */
static const char *check_header(const uint8_t *p, size_t len, const struct bfs_icache_key *key,
				const struct bfs_codec *codec, const struct bfs_index *idx,
				uint64_t *n, uint64_t *plen)
{
	uint8_t want[BFS_ICACHE_HDR_LEN] = { 0 };
	char name[BFS_ICACHE_CODEC_LEN] = { 0 };

	if (len < BFS_ICACHE_HDR_LEN + BFS_ICACHE_CSUM_LEN)
		return "truncated header";
	if (memcmp(p + H_MAGIC, BFS_ICACHE_MAGIC, 8) != 0)
		return "not an index cache entry";
	if (bfs_le32(p + H_VERSION) != BFS_ICACHE_VERSION ||
	    bfs_le32(p + H_HDR_LEN) != BFS_ICACHE_HDR_LEN ||
	    bfs_le32(p + H_ENTRY_LEN) != BFS_ICACHE_ENTRY_LEN)
		return "another format version";
	if (strlen(codec->name) >= sizeof(name))
		return "codec name too long";
	memcpy(name, codec->name, strlen(codec->name));
	if (memcmp(p + H_CODEC, name, sizeof(name)) != 0)
		return "another codec";
	put_key(want, key);
	if (memcmp(p + H_DEV, want + H_DEV, H_COUNT - H_DEV) != 0)
		return "another file or version (identity differs)";
	*n = bfs_le64(p + H_COUNT);
	*plen = bfs_le64(p + H_PRIV_LEN);
	if (*n == 0 || *n > idx->max_blocks)
		return "block count out of range for the file's size";
	if (*plen > *n * PRIV_PER_BLOCK_MAX)
		return "codec-private bytes out of range";
	/* n and plen are bounded: no overflow below */
	if (len != BFS_ICACHE_HDR_LEN + *n * BFS_ICACHE_ENTRY_LEN + *plen + BFS_ICACHE_CSUM_LEN)
		return "length does not match the header (truncated or extended)";
	if (bfs_le64(p + H_RESERVED) != 0)
		return "reserved field set";
	if (bfs_le32(p + len - BFS_ICACHE_CSUM_LEN) != bfs_xxh32(p, len - BFS_ICACHE_CSUM_LEN, 0))
		return "checksum mismatch";
	if (bfs_le32(p + H_BLOCK_SIZE) == 0)
		return "block size 0";
	return NULL;
}

/* Add the @n blocks at @e to @idx, checking each against the file and the format. */
static int add_blocks(struct bfs_index *idx, const uint8_t *e, uint64_t n, uint64_t size,
		      const struct bfs_codec *codec, const char **why)
{
	struct bfs_blk prev = { 0 };
	uint64_t end = 0;

	for (uint64_t k = 0; k < n; k++, e += BFS_ICACHE_ENTRY_LEN) {
		struct bfs_blk b = {
			.coff = bfs_le64(e + E_COFF),
			.clen = bfs_le32(e + E_CLEN),
			.usize = bfs_le32(e + E_USIZE),
			.flags = bfs_le32(e + E_FLAGS),
			.aux = bfs_le32(e + E_AUX),
		};
		/* open spans of one chain all state its input (index.h) */
		bool same = (b.flags & prev.flags & BFS_BLK_OPEN) && b.coff == prev.coff &&
			    b.clen == prev.clen;
		int rc;

		/* in file order, apart, inside the file */
		if ((b.coff < end && !same) || b.clen == 0 || !bfs_range_ok(b.coff, b.clen, size)) {
			*why = "block offsets out of order or outside the file";
			return 1;
		}
		if (b.usize == 0 || (b.flags & ~KEPT_FLAGS) ||
		    !(b.flags & BFS_BLK_GUESS) != !(b.flags & BFS_BLK_CLAIMED) ||
		    !codec->check_entry || !codec->check_entry(&b)) {
			*why = "block outside the format's limits";
			return 1;
		}
		end = b.coff + b.clen;
		prev = b;
		rc = bfs_index_add(idx, b.coff, b.clen, b.usize, b.flags);
		if (rc == -EFBIG) {
			*why = "too many blocks or bytes";
			return 1;
		}
		if (rc < 0)
			return rc;
		idx->blk[idx->n - 1].aux = b.aux;
	}
	return 0;
}

/*
 * Empty @idx again, keeping what bfs_index_init() set from the file's size
 * and the codec settings it was given.
 */
static void reset(struct bfs_index *idx, uint64_t size)
{
	const struct bfs_codec_conf *conf = idx->conf;

	bfs_index_destroy(idx);
	bfs_index_init(idx, size);
	idx->conf = conf;
}

int bfs_icache_decode(const uint8_t *p, size_t len, const struct bfs_icache_key *key,
		      const struct bfs_codec *codec, struct bfs_index *idx, const char **why)
{
	uint64_t n = 0, plen = 0;
	const uint8_t *blocks;
	int rc;

	if (!codec->cache_load) {
		*why = "codec without a cache format";
		return 1;
	}
	*why = check_header(p, len, key, codec, idx, &n, &plen);
	if (*why)
		return 1;
	blocks = p + BFS_ICACHE_HDR_LEN;
	rc = add_blocks(idx, blocks, n, key->size, codec, why);
	if (rc == 0 && atomic_load(&idx->usize) != bfs_le64(p + H_USIZE)) {
		*why = "blocks do not add up to the stated size";
		rc = 1;
	}
	if (rc == 0) {
		idx->block_size = bfs_le32(p + H_BLOCK_SIZE);
		rc = codec->cache_load(idx, blocks + n * BFS_ICACHE_ENTRY_LEN, (size_t)plen);
		if (rc > 0)
			*why = "codec-private bytes unusable";
	}
	if (rc != 0) {
		reset(idx, key->size);
		return rc;
	}
	idx->source = BFS_SRC_CACHE;
	return 0;
}

/* --- the directory -------------------------------------------------------- */

int bfs_icache_open(struct bfs_icache **out, const char *dir, char *err, size_t errlen)
{
	struct bfs_icache *c;
	struct stat st;
	int fd, rc;

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "index_cache directory '%s': %s", dir, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "index_cache directory '%s': %s", dir, strerror(errno));
		goto out_close;
	}
	if ((st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(err, errlen,
			 "index_cache directory '%s' may be written by others "
			 "(owner %u, mode %04o): it must belong to the daemon's user and not be "
			 "group or world writable",
			 dir, (unsigned int)st.st_uid, (unsigned int)(st.st_mode & 07777));
		rc = -EPERM;
		goto out_close;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->dir = strdup(dir))) {
		free(c);
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out_close;
	}
	c->dirfd = fd;
	pthread_mutex_init(&c->trim_lock, NULL);
	*out = c;
	return 0;

out_close:
	close(fd);
	return rc;
}

void bfs_icache_free(struct bfs_icache *c)
{
	if (!c)
		return;
	close(c->dirfd);
	pthread_mutex_destroy(&c->trim_lock);
	free(c->dir);
	free(c);
}

void bfs_icache_set_limit(struct bfs_icache *c, uint64_t bytes)
{
	c->limit = bytes;
}

const char *bfs_icache_dir(const struct bfs_icache *c)
{
	return c->dir;
}

/* mkdir @path, mode 0700, unless it is there. Return: 0 or -errno. */
static int make_dir(const char *path)
{
	return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

int bfs_icache_default_dir(char **out, char *err, size_t errlen)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char base[PATH_MAX], path[PATH_MAX];
	int rc;

	/* The XDG base directory rules: a relative XDG_CACHE_HOME is ignored. */
	if (xdg && xdg[0] == '/') {
		if ((size_t)snprintf(base, sizeof(base), "%s", xdg) >= sizeof(base))
			goto too_long;
	} else if (home && home[0] == '/') {
		if ((size_t)snprintf(base, sizeof(base), "%s/.cache", home) >= sizeof(base))
			goto too_long;
	} else {
		snprintf(err, errlen, "neither XDG_CACHE_HOME nor HOME names a directory");
		return 1;
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/blockfs", base) >= sizeof(path))
		goto too_long;
	rc = make_dir(base);
	if (rc == 0)
		rc = make_dir(path);
	if (rc < 0) {
		snprintf(err, errlen, "cannot make '%s': %s", path, strerror(-rc));
		return rc;
	}
	*out = strdup(path);
	if (!*out) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;

too_long:
	snprintf(err, errlen, "the cache directory's path is too long");
	return -ENAMETOOLONG;
}

/* An entry's name: @dev and @ino in hex, then @kind ("idx", "dir"). */
static void entry_name(uint64_t dev, uint64_t ino, const char *kind, char *name)
{
	snprintf(name, NAME_LEN, "%016" PRIx64 "-%016" PRIx64 ".%s", dev, ino, kind);
}

/* Read all of @fd (@len bytes) into a new buffer. Return: 0, -errno. */
static int read_all(int fd, size_t len, uint8_t **out)
{
	uint8_t *buf = malloc(len ? len : 1);
	size_t done = 0;

	if (!buf)
		return -ENOMEM;
	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done, (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			return n < 0 ? -errno : -EIO; /* shrank: a writer is not atomic */
		}
		done += (size_t)n;
	}
	*out = buf;
	return 0;
}

/*
 * Entry @name, when it is a regular file of at most @max bytes, read
 * whole into a new buffer. Return: 0, 1 when there is none to use (absent,
 * or not such a file), -ENOMEM.
 */
static int get_entry(struct bfs_icache *c, const char *name, uint64_t max, uint8_t **out,
		     size_t *len)
{
	struct stat est;
	int fd, rc;

	fd = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 1; /* usually ENOENT: never kept */
	/* Bound the read by what an entry for this object could be, before allocating. */
	if (fstat(fd, &est) < 0 || !S_ISREG(est.st_mode) || (uint64_t)est.st_size > max) {
		close(fd);
		bfs_dbg("%s/%s: ignored: not a regular file of a possible size", c->dir, name);
		return 1;
	}
	rc = read_all(fd, (size_t)est.st_size, out);
	if (rc == 0 && c->limit && time(NULL) - est.st_mtim.tv_sec > TOUCH_AFTER_S)
		(void)futimens(fd, NULL); /* used: trimmed last (a read-only cache stays as is) */
	close(fd);
	if (rc < 0)
		return rc == -ENOMEM ? rc : 1;
	*len = (size_t)est.st_size;
	return 0;
}

int bfs_icache_load(struct bfs_icache *c, const struct stat *st, const struct bfs_codec *codec,
		    struct bfs_index *idx)
{
	struct bfs_icache_key key;
	char name[NAME_LEN];
	const char *why;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc;

	if (!c || !codec->cache_load)
		return 1;
	entry_name((uint64_t)st->st_dev, (uint64_t)st->st_ino, "idx", name);
	rc = get_entry(c, name,
		       BFS_ICACHE_HDR_LEN + BFS_ICACHE_CSUM_LEN +
			       (uint64_t)idx->max_blocks *
				       (BFS_ICACHE_ENTRY_LEN + PRIV_PER_BLOCK_MAX),
		       &buf, &len);
	if (rc != 0)
		return rc;
	bfs_icache_key_of(st, &key);
	rc = bfs_icache_decode(buf, len, &key, codec, idx, &why);
	free(buf);
	if (rc > 0)
		bfs_dbg("%s/%s: ignored: %s", c->dir, name, why);
	return rc;
}

/* Write @len bytes of @buf to @fd. Return: 0 or -errno. */
static int write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* --- the bound ------------------------------------------------------------ */

/* A temporary file this old was left by a writer that died. */
#define TMP_STALE_S    3600
/* entry_name()'s length: 16 hex digits, '-', 16 hex digits, '.', a 3-letter kind */
#define ENTRY_NAME_LEN 37

/* An entry as a trim sees it. */
struct kept {
	struct timespec used; /* its mtime */
	uint64_t size;
	char name[ENTRY_NAME_LEN + 1];
};

/* Is @name one entry_name() makes? Nothing else in the directory is ours to drop. */
static bool entry_named(const char *name)
{
	if (strlen(name) != ENTRY_NAME_LEN || name[16] != '-' ||
	    strspn(name, "0123456789abcdef") != 16 || strspn(name + 17, "0123456789abcdef") != 16)
		return false;
	return strcmp(name + 33, ".idx") == 0 || strcmp(name + 33, ".dir") == 0;
}

/* qsort order: least recently used first. */
static int kept_cmp(const void *pa, const void *pb)
{
	const struct kept *a = pa, *b = pb;

	if (a->used.tv_sec != b->used.tv_sec)
		return a->used.tv_sec < b->used.tv_sec ? -1 : 1;
	if (a->used.tv_nsec != b->used.tv_nsec)
		return a->used.tv_nsec < b->used.tv_nsec ? -1 : 1;
	return strcmp(a->name, b->name);
}

/*
 * List the entries and count their bytes; if they pass the bound, drop
 * the least recently used down to three quarters of it. Removes stale
 * temporary files on the way. Return: 0, -ENOMEM or -errno of the listing.
 */
static int count_and_trim(struct bfs_icache *c)
{
	struct kept *k = NULL, *grown;
	size_t n = 0, cap = 0, dropped = 0;
	uint64_t sum = 0, goal;
	struct dirent *de;
	time_t now = time(NULL);
	int fd, rc = 0;
	DIR *d;

	fd = openat(c->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	while ((de = readdir(d))) {
		bool tmp = strncmp(de->d_name, ".tmp-", 5) == 0;
		struct stat st;

		if ((!tmp && !entry_named(de->d_name)) ||
		    fstatat(c->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (tmp) {
			if (now - st.st_mtim.tv_sec > TMP_STALE_S)
				(void)unlinkat(c->dirfd, de->d_name, 0);
			continue;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			grown = realloc(k, cap * sizeof(*k));
			if (!grown) {
				rc = -ENOMEM;
				goto out;
			}
			k = grown;
		}
		k[n].used = st.st_mtim;
		k[n].size = (uint64_t)st.st_size;
		memcpy(k[n].name, de->d_name, sizeof(k[n].name));
		sum += k[n++].size;
	}
	if (sum > c->limit) {
		goal = c->limit - c->limit / 4;
		qsort(k, n, sizeof(*k), kept_cmp);
		for (size_t i = 0; i < n && sum > goal; i++) {
			if (unlinkat(c->dirfd, k[i].name, 0) < 0 && errno != ENOENT)
				continue; /* ENOENT: another mount dropped it */
			sum -= k[i].size;
			dropped++;
		}
		bfs_dbg("%s: %zu entries dropped, %" PRIu64 " bytes left", c->dir, dropped, sum);
	}
	atomic_store(&c->used, sum);
	atomic_store(&c->counted, true);
out:
	closedir(d);
	free(k);
	return rc;
}

/*
 * An entry of @len bytes replaced one of @old bytes (0: none): count it,
 * and trim when the bound is passed. The first save of a mount counts
 * the directory. A thread that finds another trimming leaves it the work,
 * and says so first (c->again): the trimmer may have listed the directory
 * before this entry was written, so it counts again once it is done.
 */
static void account(struct bfs_icache *c, uint64_t len, uint64_t old)
{
	uint_fast64_t used = atomic_load(&c->used), now;

	do {
		now = used + len > old ? used + len - old : 0;
	} while (!atomic_compare_exchange_weak(&c->used, &used, now));
	if (atomic_load(&c->counted) && now <= c->limit)
		return;
	/* set before the try: a trimmer that holds the lock then sees it after its unlock */
	atomic_store(&c->again, true);
	while (pthread_mutex_trylock(&c->trim_lock) == 0) {
		atomic_store(&c->again, false);
		if (count_and_trim(c) < 0)
			bfs_dbg("%s: cannot count the entries: their bound waits for the next save",
				c->dir);
		pthread_mutex_unlock(&c->trim_lock);
		if (!atomic_load(&c->again))
			break;
	}
}

/* Saving failed for a reason of the directory's: say so once, save no more. */
static void saving_off(struct bfs_icache *c, int rc)
{
	if (!atomic_exchange(&c->no_save, true))
		bfs_warn("index_cache %s: cannot write entries (%s): not saving indexes on "
			 "this mount; entries already there are still used",
			 c->dir, strerror(-rc));
}

/*
 * Write entry @name as @len bytes of @buf: a temporary file renamed over
 * it. Return: 0; 1 when @len passes the bound (not kept); -errno (saving
 * is off for the mount then).
 */
static int put_entry(struct bfs_icache *c, const char *name, const uint8_t *buf, size_t len)
{
	char tmp[NAME_LEN];
	uint64_t old = 0;
	struct stat ost;
	int tfd, rc;

	if (c->limit) {
		if (len > c->limit) {
			bfs_dbg("%s/%s: not kept: %zu bytes, more than index_cache_size", c->dir,
				name, len);
			return 1;
		}
		if (fstatat(c->dirfd, name, &ost, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(ost.st_mode))
			old = (uint64_t)ost.st_size;
	}
	snprintf(tmp, sizeof(tmp), ".tmp-%ld-%" PRIu64, (long)getpid(),
		 (uint64_t)atomic_fetch_add(&c->seq, 1));
	tfd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (tfd < 0) {
		rc = -errno;
		saving_off(c, rc);
		return rc;
	}
	rc = write_all(tfd, buf, len);
	if (close(tfd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && renameat(c->dirfd, tmp, c->dirfd, name) < 0)
		rc = -errno;
	if (rc < 0) {
		(void)unlinkat(c->dirfd, tmp, 0);
		saving_off(c, rc);
	} else if (c->limit) {
		account(c, len, old);
	}
	return rc;
}

int bfs_icache_save(struct bfs_icache *c, int fd, const struct stat *st,
		    const struct bfs_codec *codec, const struct bfs_index *idx, uint64_t scan_reads)
{
	struct bfs_icache_key key, now_key;
	char name[NAME_LEN];
	struct stat now;
	uint8_t *buf;
	size_t len;
	int rc;

	if (!c || atomic_load(&c->no_save) || !codec->cache_load ||
	    scan_reads < BFS_ICACHE_MIN_READS || idx->broken || idx->source != BFS_SRC_WALK)
		return 1;
	/* A file that changed while it was walked has an index of neither version. */
	bfs_icache_key_of(st, &key);
	if (fstat(fd, &now) < 0)
		return 1;
	bfs_icache_key_of(&now, &now_key);
	if (memcmp(&key, &now_key, sizeof(key)) != 0)
		return 1;
	rc = bfs_icache_encode(&key, codec, idx, &buf, &len);
	if (rc < 0)
		return rc == -EINVAL ? 1 : rc;
	entry_name((uint64_t)st->st_dev, (uint64_t)st->st_ino, "idx", name);
	rc = put_entry(c, name, buf, len);
	free(buf);
	return rc;
}

int bfs_icache_dir_load(struct bfs_icache *c, const struct bfs_dirmemo_key *key,
			struct bfs_dirmemo_ent *e)
{
	size_t len = 0, max = bfs_dirmemo_len(key->n);
	char name[NAME_LEN];
	const char *why;
	uint8_t *buf = NULL;
	int rc;

	if (!c || max == 0)
		return 1;
	entry_name(key->dev, key->ino, "dir", name);
	rc = get_entry(c, name, max, &buf, &len);
	if (rc != 0)
		return rc;
	rc = bfs_dirmemo_decode(buf, len, key, e, &why);
	free(buf);
	if (rc > 0)
		bfs_dbg("%s/%s: ignored: %s", c->dir, name, why);
	return rc;
}

int bfs_icache_dir_save(struct bfs_icache *c, const struct bfs_dirmemo_key *key,
			const struct bfs_dirmemo_ent *e)
{
	char name[NAME_LEN];
	uint8_t *buf;
	size_t len;
	int rc;

	if (!c || atomic_load(&c->no_save))
		return 1;
	rc = bfs_dirmemo_encode(key, e, &buf, &len);
	if (rc < 0)
		return rc == -EINVAL ? 1 : rc;
	entry_name(key->dev, key->ino, "dir", name);
	rc = put_entry(c, name, buf, len);
	free(buf);
	return rc;
}
