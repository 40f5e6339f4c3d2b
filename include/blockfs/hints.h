/* SPDX-License-Identifier: MIT */
/*
 * Access hints (SPEC §4), in the spirit of madvise(2): what a reader of a
 * file is likely to do next, set per file or directory with setfattr.
 *
 * This module owns the values (parsing and naming them), the store that
 * keeps them for the life of the mount, the inheritance rule, and the
 * text of user.blockfs.stats. It knows nothing of FUSE or of inodes: the
 * store is keyed by a backing path below SOURCE ("." is SOURCE itself,
 * then "dir", "dir/file.lz4"), so a hint outlives the inode it was set
 * through, and belongs to the path, not to the object behind it.
 */
#ifndef BLOCKFS_HINTS_H
#define BLOCKFS_HINTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"
#include "blockfs/opts.h"

struct bfs_counters;
struct bfs_cache;

enum bfs_advice {
	BFS_ADV_NORMAL,		/* the default heuristics: read ahead once sequential */
	BFS_ADV_SEQUENTIAL,	/* read ahead aggressively, drop blocks behind the reader */
	BFS_ADV_RANDOM,		/* no read-ahead */
	BFS_ADV_WILLNEED,	/* a range will be read soon: decode it now */
	BFS_ADV_DONTNEED,	/* a range will not be read: drop it */
	BFS_ADV_NOREUSE,	/* read once: do not keep blocks */
};
#define BFS_ADV_COUNT (BFS_ADV_NOREUSE + 1)

/*
 * Longest value user.blockfs.advice or .readpath takes, in bytes: the
 * longest valid one ("willneed " and two 20-digit numbers) fits with room.
 * Longer values are refused with -E2BIG before they are parsed.
 */
#define BFS_HINT_VALUE_MAX 64

/* A parsed user.blockfs.advice value. */
struct bfs_advice_req {
	enum bfs_advice advice;
	bool ranged;		/* "willneed OFF LEN" / "dontneed OFF LEN" */
	uint64_t off, len;	/* when ranged: len >= 1 and off + len does not wrap */
};

/* "normal", "sequential", ...; NULL when @advice is out of range. */
const char *bfs_advice_name(int advice);
/* "pread", "mmap", "auto"; NULL when out of range. */
const char *bfs_readpath_name(int readpath);

/* What @advice asks of the kernel for the backing file: posix_fadvise(2) ... */
int bfs_advice_fadv(int advice);
/* ... and madvise(2) on its mapping (-1: nothing, e.g. noreuse). */
int bfs_advice_madv(int advice);

/**
 * bfs_advice_parse() - read a user.blockfs.advice value.
 * @val, @len: the bytes as setxattr(2) passed them, not NUL-terminated;
 *             one trailing NUL is allowed (C callers often pass strlen + 1).
 * Grammar: NAME | ("willneed" | "dontneed") SP OFF SP LEN, single spaces,
 * lower case, OFF and LEN as bfs_parse_size() reads them ("0", "64K",
 * "64M", "1G"), LEN at least 1 and OFF + LEN below 2^64.
 * Return: 0, -E2BIG when @len exceeds BFS_HINT_VALUE_MAX, -EINVAL for
 * anything else malformed (unknown name, range on another advice, junk).
 */
BFS_MUST_CHECK int bfs_advice_parse(const char *val, size_t len, struct bfs_advice_req *out);

/**
 * bfs_readpath_parse() - read a user.blockfs.readpath value: "pread",
 * "mmap" or "auto", same byte rules as bfs_advice_parse(). Whether a read
 * path is built is the caller's business.
 * Return: 0, -E2BIG, -EINVAL.
 */
BFS_MUST_CHECK int bfs_readpath_parse(const char *val, size_t len, enum bfs_readpath *out);

/* --- the store ------------------------------------------------------------ */

enum bfs_hint_kind { BFS_HINT_ADVICE, BFS_HINT_READPATH, BFS_HINT_KINDS };

/*
 * Hints set on paths below SOURCE, for the life of the mount. Embedded in
 * the mount; bfs_hints_init() cannot fail (the table is allocated on the
 * first set). Used on open and setxattr only: one mutex, a leaf lock
 * (callers may hold inode locks; nothing is called with it held).
 */
struct bfs_hint_ent;
struct bfs_hints {
	pthread_mutex_t lock;
	struct bfs_hint_ent **tab;	/* protected by lock; NULL until the first set */
	size_t nbuckets, count;		/* protected by lock */
};

void bfs_hints_init(struct bfs_hints *h);
void bfs_hints_destroy(struct bfs_hints *h);

/* Set @path's own hint of @kind to @value. Return: 0 or -ENOMEM. */
BFS_MUST_CHECK int bfs_hints_set(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind,
				 int value);
/* Remove @path's own hint of @kind. Return: 0, or -ENODATA when it had none. */
int bfs_hints_clear(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind);
/* @path's own hint of @kind into *@value; false when it has none. */
bool bfs_hints_own(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind, int *value);

/**
 * bfs_hints_effective() - the hint of @kind that applies to @path: its
 * own, else that of its nearest ancestor directory ("a/b/f" asks "a/b",
 * "a", then "."), else @dflt (the mount option).
 */
int bfs_hints_effective(struct bfs_hints *h, const char *path, enum bfs_hint_kind kind, int dflt);

/* --- user.blockfs.stats --------------------------------------------------- */

/**
 * bfs_stats_format() - counters @c as "key value\n" lines into @buf.
 * @cache: for the mount root, the cache whose bytes and bound are added
 *         (cache_bytes, cache_limit); NULL for a file.
 * Keys, in order: reads bytes cache_hits cache_misses blocks_decompressed
 * decompress_ns blocks_prefetched prefetched_used backing_syscalls
 * checksum_failures errors cached_bytes [cache_bytes cache_limit].
 * Return: length written (no NUL counted), or -ERANGE when @len is short.
 */
int bfs_stats_format(const struct bfs_counters *c, const struct bfs_cache *cache, char *buf,
		     size_t len);

/* A buffer this big holds any bfs_stats_format() output. */
#define BFS_STATS_MAX 1024

#endif
