/* SPDX-License-Identifier: MIT */
/*
 * The words that options, hints and the read path share: the advice and
 * read-path values, their names and parsers, what each advice asks of the
 * kernel (posix_fadvise, madvise), and sizes ("64K", "1G"). A leaf: no
 * state, no I/O, and it includes nothing of blockfs but common.h, so that
 * opts.c, hints.c, xattr.c and the read path can all use it without using
 * each other.
 */
#ifndef BLOCKFS_VOCAB_H
#define BLOCKFS_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfs/common.h"

enum bfs_readpath { BFS_READPATH_PREAD, BFS_READPATH_MMAP, BFS_READPATH_AUTO };

enum bfs_advice {
	BFS_ADV_NORMAL,	    /* the default heuristics: read ahead once sequential */
	BFS_ADV_SEQUENTIAL, /* read ahead aggressively, drop blocks behind the reader */
	BFS_ADV_RANDOM,	    /* no read-ahead */
	BFS_ADV_WILLNEED,   /* a range will be read soon: decode it now */
	BFS_ADV_DONTNEED,   /* a range will not be read: drop it */
	BFS_ADV_NOREUSE,    /* read once: do not keep blocks */
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
	bool ranged;	   /* "willneed OFF LEN" / "dontneed OFF LEN" */
	uint64_t off, len; /* when ranged: len >= 1 and off + len does not wrap */
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

/**
 * bfs_pick() - the index of @s in @names (@n of them, NULL ends early too).
 * Return: the index, or -1 when @s is none of them.
 */
int bfs_pick(const char *s, const char *const *names, size_t n);

/**
 * bfs_parse_size() - "4096", "64K", "256M", "1G" (powers of 1024).
 * Return: 0, or -EINVAL (malformed) / -ERANGE (does not fit 64 bits).
 */
BFS_MUST_CHECK int bfs_parse_size(const char *s, uint64_t *out);

#endif
