// SPDX-License-Identifier: MIT
/*
 * The shared words (contract in vocab.h): names, parsers, the kernel's
 * advice for each hint, sizes. Pure.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "blockfs/vocab.h"

static const char *const advice_names[BFS_ADV_COUNT] = {
	[BFS_ADV_NORMAL] = "normal",	 [BFS_ADV_SEQUENTIAL] = "sequential",
	[BFS_ADV_RANDOM] = "random",	 [BFS_ADV_WILLNEED] = "willneed",
	[BFS_ADV_DONTNEED] = "dontneed", [BFS_ADV_NOREUSE] = "noreuse",
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
		       readpath_names[readpath] :
		       NULL;
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

int bfs_pick(const char *s, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n && names[i]; i++)
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
	v = bfs_pick(s, advice_names, BFS_ADV_COUNT);
	if (v < 0)
		return -EINVAL;
	*out = (struct bfs_advice_req){ .advice = (enum bfs_advice)v };
	if (!off_s)
		return 0;
	if (v != BFS_ADV_WILLNEED && v != BFS_ADV_DONTNEED)
		return -EINVAL; /* only the actions take a range */
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
	v = bfs_pick(s, readpath_names, BFS_ARRAY_SIZE(readpath_names));
	if (v < 0)
		return -EINVAL;
	*out = (enum bfs_readpath)v;
	return 0;
}

int bfs_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!s || *s < '0' || *s > '9') /* strtoull would take "-1" and " 1" */
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	default:
		return -EINVAL;
	}
	if (shift && *++end != '\0')
		return -EINVAL;
	if (v > UINT64_MAX >> shift)
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}
