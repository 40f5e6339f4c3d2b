// SPDX-License-Identifier: MIT
/*
 * Fuzzes the parsers of writable attribute values (setfattr -v): the
 * user.blockfs.advice and user.blockfs.readpath parsers in hints.c, and
 * bfs_parse_size() that reads their ranges. The input is the value, bytes
 * as setxattr(2) passes them (not NUL-terminated).
 *
 * Checks: only -E2BIG (exactly when too long) and -EINVAL as errors; an
 * accepted value names what was parsed and reads back the same when
 * printed canonically; ranges are non-empty and do not wrap; sizes print
 * and parse back to themselves.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockfs/hints.h"
#include "blockfs/opts.h"
#include "fuzz.h"

static void check_advice(const char *val, size_t len)
{
	struct bfs_advice_req r, r2;
	char canon[BFS_HINT_VALUE_MAX + 1];
	const char *name;
	int rc = bfs_advice_parse(val, len, &r), n;

	FZ_CHECK(rc == 0 || rc == -E2BIG || rc == -EINVAL);
	FZ_CHECK((rc == -E2BIG) == (len > BFS_HINT_VALUE_MAX));
	if (rc < 0)
		return;
	name = bfs_advice_name((int)r.advice);
	FZ_CHECK(name != NULL);
	FZ_CHECK(len >= strlen(name) && memcmp(val, name, strlen(name)) == 0);
	if (r.ranged) {
		FZ_CHECK(r.advice == BFS_ADV_WILLNEED || r.advice == BFS_ADV_DONTNEED);
		FZ_CHECK(r.len >= 1 && r.off <= UINT64_MAX - r.len);
		n = snprintf(canon, sizeof(canon), "%s %" PRIu64 " %" PRIu64, name, r.off, r.len);
	} else {
		n = snprintf(canon, sizeof(canon), "%s", name);
	}
	FZ_CHECK(n > 0 && (size_t)n < sizeof(canon));
	FZ_CHECK(bfs_advice_parse(canon, (size_t)n, &r2) == 0);
	FZ_CHECK(r2.advice == r.advice && r2.ranged == r.ranged);
	FZ_CHECK(!r.ranged || (r2.off == r.off && r2.len == r.len));
}

static void check_readpath(const char *val, size_t len)
{
	enum bfs_readpath rp;
	const char *name;
	int rc = bfs_readpath_parse(val, len, &rp);

	FZ_CHECK(rc == 0 || rc == -E2BIG || rc == -EINVAL);
	FZ_CHECK((rc == -E2BIG) == (len > BFS_HINT_VALUE_MAX));
	if (rc < 0)
		return;
	name = bfs_readpath_name((int)rp);
	FZ_CHECK(name != NULL);
	/* the name itself, or the name and one NUL */
	FZ_CHECK(len == strlen(name) || (len == strlen(name) + 1 && val[len - 1] == '\0'));
	FZ_CHECK(memcmp(val, name, strlen(name)) == 0);
}

static void check_size(const char *s)
{
	char canon[32];
	uint64_t v, v2;
	int rc = bfs_parse_size(s, &v);

	FZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
	if (rc < 0)
		return;
	snprintf(canon, sizeof(canon), "%" PRIu64, v);
	FZ_CHECK(bfs_parse_size(canon, &v2) == 0 && v2 == v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* an exact-size copy: a parser reading one byte too far shows in ASan */
	char *val = malloc(size ? size : 1), *s = malloc(size + 1);

	FZ_CHECK(val && s);
	memcpy(val, data, size);
	check_advice(val, size);
	check_readpath(val, size);
	memcpy(s, data, size);
	s[size] = '\0';
	check_size(s);
	free(val);
	free(s);
	return 0;
}
