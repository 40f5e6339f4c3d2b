// SPDX-License-Identifier: MIT
/*
 * Hint values, the hint store and its inheritance rule, the stats text
 * (blockfs(8), EXTENDED ATTRIBUTES).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "blockfs/cache.h"
#include "blockfs/hints.h"
#include "blockfs/opts.h"

static int parse(const char *s, struct bfs_advice_req *r)
{
	return bfs_advice_parse(s, strlen(s), r);
}

static void test_advice_names(void **state)
{
	static const char *const names[] = { "normal",	 "sequential", "random",
					     "willneed", "dontneed",   "noreuse" };
	struct bfs_advice_req r;

	(void)state;
	for (int i = 0; i < (int)BFS_ARRAY_SIZE(names); i++) {
		assert_int_equal(parse(names[i], &r), 0);
		assert_int_equal(r.advice, i);
		assert_false(r.ranged);
		assert_string_equal(bfs_advice_name(i), names[i]);
	}
	assert_null(bfs_advice_name(-1));
	assert_null(bfs_advice_name(BFS_ADV_COUNT));
}

static void test_advice_trailing_nul(void **state)
{
	struct bfs_advice_req r;

	(void)state;
	/* C callers pass strlen + 1: one NUL at the end is the string's end. */
	assert_int_equal(bfs_advice_parse("random", 7, &r), 0);
	assert_int_equal(r.advice, BFS_ADV_RANDOM);
	assert_int_equal(bfs_advice_parse("random\0\0", 8, &r), -EINVAL);
	assert_int_equal(bfs_advice_parse("ran\0dom", 7, &r), -EINVAL);
	/* Not NUL-terminated: only @len bytes count. */
	assert_int_equal(bfs_advice_parse("randomXYZ", 6, &r), 0);
	assert_int_equal(r.advice, BFS_ADV_RANDOM);
}

static void test_advice_bad(void **state)
{
	static const char *const bad[] = {
		"",
		"Random",
		"RANDOM",
		"rand",
		"randomly",
		" random",
		"random ",
		"random\n",
		"\tnormal",
		"sequential,random",
		"normal normal",
		"-",
		"0",
	};
	struct bfs_advice_req r;

	(void)state;
	for (size_t i = 0; i < BFS_ARRAY_SIZE(bad); i++) {
		if (parse(bad[i], &r) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
	}
	assert_int_equal(bfs_advice_parse("\0", 1, &r), -EINVAL);
	assert_int_equal(bfs_advice_parse(NULL, 0, &r), -EINVAL);
}

static void test_advice_ranges(void **state)
{
	struct bfs_advice_req r;

	(void)state;
	assert_int_equal(parse("willneed 0 64M", &r), 0);
	assert_int_equal(r.advice, BFS_ADV_WILLNEED);
	assert_true(r.ranged);
	assert_int_equal(r.off, 0);
	assert_int_equal(r.len, 64ull << 20);
	assert_int_equal(parse("dontneed 1G 4096", &r), 0);
	assert_int_equal(r.advice, BFS_ADV_DONTNEED);
	assert_int_equal(r.off, 1ull << 30);
	assert_int_equal(r.len, 4096);
	assert_int_equal(parse("willneed 64k 1", &r), 0);
	assert_int_equal(r.off, 65536);
	assert_int_equal(r.len, 1);
	/* The largest range that does not wrap. */
	assert_int_equal(parse("willneed 0 18446744073709551615", &r), 0);
	assert_int_equal(r.len, UINT64_MAX);
	assert_int_equal(parse("willneed 18446744073709551614 1", &r), 0);
}

static void test_advice_bad_ranges(void **state)
{
	static const char *const bad[] = {
		"willneed 0",
		"willneed 0 ",
		"willneed  0 1",
		"willneed 0  1",
		"willneed 0 1 ",
		"willneed 0 1 2",
		"willneed -1 10",
		"willneed 0 -10",
		"willneed +0 1",
		"willneed 0 0", /* empty: surely a mistake */
		"willneed 0x10 1",
		"willneed 1.5M 1",
		"willneed 0 1T",
		"willneed 0 64MB",
		"willneed a b",
		"willneed 0 1M\n",
		"willneed\t0 1",
		"willneed 18446744073709551616 1", /* past 2^64 */
		"willneed 0 18446744073709551616",
		"willneed 17179869184G 1",	   /* the suffix overflows */
		"willneed 1 18446744073709551615", /* off + len wraps */
		"willneed 18446744073709551615 1",
		"normal 0 1",
		"sequential 0 1M",
		"random 0 1",
		"noreuse 0 1",
		"willneed 0 1M junk",
	};
	struct bfs_advice_req r;

	(void)state;
	for (size_t i = 0; i < BFS_ARRAY_SIZE(bad); i++) {
		if (parse(bad[i], &r) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
	}
}

static void test_value_length_limit(void **state)
{
	char s[BFS_HINT_VALUE_MAX + 2];
	struct bfs_advice_req r;
	enum bfs_readpath rp;

	(void)state;
	/* The longest valid value is far below the limit. */
	assert_true(strlen("willneed 18446744073709551614 1") < BFS_HINT_VALUE_MAX);
	memset(s, ' ', sizeof(s));
	memcpy(s, "normal", 6);
	assert_int_equal(bfs_advice_parse(s, BFS_HINT_VALUE_MAX, &r), -EINVAL);
	assert_int_equal(bfs_advice_parse(s, BFS_HINT_VALUE_MAX + 1, &r), -E2BIG);
	assert_int_equal(bfs_advice_parse(s, 65536, &r), -E2BIG);
	assert_int_equal(bfs_readpath_parse(s, BFS_HINT_VALUE_MAX + 1, &rp), -E2BIG);
	/* Digits up to the limit still parse, and then fail as numbers. */
	memset(s, '0', sizeof(s));
	memcpy(s, "willneed 1 ", 11);
	s[BFS_HINT_VALUE_MAX - 1] = '1';
	assert_int_equal(bfs_advice_parse(s, BFS_HINT_VALUE_MAX, &r), 0);
	assert_int_equal(r.off, 1);
	assert_int_equal(r.len, 1);
}

static void test_readpath_parse(void **state)
{
	enum bfs_readpath rp;

	(void)state;
	assert_int_equal(bfs_readpath_parse("pread", 5, &rp), 0);
	assert_int_equal(rp, BFS_READPATH_PREAD);
	assert_int_equal(bfs_readpath_parse("mmap", 4, &rp), 0);
	assert_int_equal(rp, BFS_READPATH_MMAP);
	assert_int_equal(bfs_readpath_parse("auto", 5, &rp), 0); /* trailing NUL */
	assert_int_equal(rp, BFS_READPATH_AUTO);
	assert_string_equal(bfs_readpath_name(BFS_READPATH_PREAD), "pread");
	assert_string_equal(bfs_readpath_name(BFS_READPATH_AUTO), "auto");
	assert_null(bfs_readpath_name(3));
	assert_int_equal(bfs_readpath_parse("", 0, &rp), -EINVAL);
	assert_int_equal(bfs_readpath_parse("PREAD", 5, &rp), -EINVAL);
	assert_int_equal(bfs_readpath_parse("pread ", 6, &rp), -EINVAL);
	assert_int_equal(bfs_readpath_parse("pread 0 1", 9, &rp), -EINVAL);
	assert_int_equal(bfs_readpath_parse("read", 4, &rp), -EINVAL);
}

/* --- the store ------------------------------------------------------------ */

static int store_setup(void **state)
{
	static struct bfs_hints h;

	bfs_hints_init(&h);
	*state = &h;
	return 0;
}

static int store_teardown(void **state)
{
	bfs_hints_destroy(*state);
	return 0;
}

#define ADV	  BFS_HINT_ADVICE
#define EFF(h, p) bfs_hints_effective((h), (p), ADV, BFS_ADV_NORMAL)

static void test_store_empty_is_default(void **state)
{
	struct bfs_hints *h = *state;
	int v;

	assert_int_equal(EFF(h, "a/b/c"), BFS_ADV_NORMAL);
	assert_int_equal(bfs_hints_effective(h, ".", ADV, BFS_ADV_RANDOM), BFS_ADV_RANDOM);
	assert_int_equal(bfs_hints_effective(h, "x", BFS_HINT_READPATH, BFS_READPATH_PREAD),
			 BFS_READPATH_PREAD);
	assert_false(bfs_hints_own(h, "a", ADV, &v));
	assert_int_equal(bfs_hints_clear(h, "a", ADV), -ENODATA);
}

static void test_store_inheritance(void **state)
{
	struct bfs_hints *h = *state;
	int v;

	assert_int_equal(bfs_hints_set(h, "a", ADV, BFS_ADV_SEQUENTIAL), 0);
	assert_int_equal(bfs_hints_set(h, "a/b/f.lz4", ADV, BFS_ADV_RANDOM), 0);
	/* Own beats every ancestor. */
	assert_int_equal(EFF(h, "a/b/f.lz4"), BFS_ADV_RANDOM);
	/* The nearest ancestor that has one. */
	assert_int_equal(EFF(h, "a/b/g.lz4"), BFS_ADV_SEQUENTIAL);
	assert_int_equal(EFF(h, "a/b"), BFS_ADV_SEQUENTIAL);
	assert_int_equal(EFF(h, "a"), BFS_ADV_SEQUENTIAL);
	/* Neither a sibling nor a name sharing a prefix inherits. */
	assert_int_equal(EFF(h, "ab/f"), BFS_ADV_NORMAL);
	assert_int_equal(EFF(h, "a.lz4"), BFS_ADV_NORMAL);
	assert_int_equal(EFF(h, "c/a"), BFS_ADV_NORMAL);
	/* A nearer directory beats a farther one; the root is the farthest. */
	assert_int_equal(bfs_hints_set(h, "a/b", ADV, BFS_ADV_NOREUSE), 0);
	assert_int_equal(bfs_hints_set(h, ".", ADV, BFS_ADV_WILLNEED), 0);
	assert_int_equal(EFF(h, "a/b/g.lz4"), BFS_ADV_NOREUSE);
	assert_int_equal(EFF(h, "c/a"), BFS_ADV_WILLNEED);
	assert_int_equal(EFF(h, "top"), BFS_ADV_WILLNEED);
	assert_int_equal(EFF(h, "."), BFS_ADV_WILLNEED);
	assert_int_equal(EFF(h, ""), BFS_ADV_WILLNEED); /* unknown path: the root's */
	/* Hints of one kind do not leak into the other. */
	assert_int_equal(bfs_hints_effective(h, "a/b/f.lz4", BFS_HINT_READPATH, 7), 7);
	assert_true(bfs_hints_own(h, "a/b", ADV, &v));
	assert_int_equal(v, BFS_ADV_NOREUSE);
	assert_false(bfs_hints_own(h, "a/b/g.lz4", ADV, &v));
}

static void test_store_removal_falls_back(void **state)
{
	struct bfs_hints *h = *state;

	assert_int_equal(bfs_hints_set(h, "d", ADV, BFS_ADV_SEQUENTIAL), 0);
	assert_int_equal(bfs_hints_set(h, "d/f", ADV, BFS_ADV_RANDOM), 0);
	assert_int_equal(bfs_hints_set(h, "d/f", BFS_HINT_READPATH, BFS_READPATH_PREAD), 0);
	assert_int_equal(bfs_hints_clear(h, "d/f", ADV), 0);
	assert_int_equal(EFF(h, "d/f"), BFS_ADV_SEQUENTIAL); /* now the directory's */
	assert_int_equal(bfs_hints_clear(h, "d/f", ADV), -ENODATA);
	/* The other kind stayed. */
	assert_int_equal(bfs_hints_effective(h, "d/f", BFS_HINT_READPATH, -1), BFS_READPATH_PREAD);
	assert_int_equal(bfs_hints_clear(h, "d/f", BFS_HINT_READPATH), 0);
	assert_int_equal(bfs_hints_clear(h, "d/f", BFS_HINT_READPATH), -ENODATA);
	assert_int_equal(bfs_hints_clear(h, "d", ADV), 0);
	assert_int_equal(EFF(h, "d/f"), BFS_ADV_NORMAL); /* now the mount's */
	assert_int_equal(bfs_hints_effective(h, "d/f", ADV, BFS_ADV_NOREUSE), BFS_ADV_NOREUSE);
	/* Set again after removal; overwrite. */
	assert_int_equal(bfs_hints_set(h, "d/f", ADV, BFS_ADV_RANDOM), 0);
	assert_int_equal(bfs_hints_set(h, "d/f", ADV, BFS_ADV_NORMAL), 0);
	assert_int_equal(EFF(h, "d/f"), BFS_ADV_NORMAL);
	assert_int_equal(bfs_hints_set(h, "d", ADV, BFS_ADV_RANDOM), 0);
	assert_int_equal(EFF(h, "d/f"), BFS_ADV_NORMAL); /* its own normal still wins */
}

static void test_store_many(void **state)
{
	struct bfs_hints *h = *state;
	char p[64];

	/* Enough paths to grow the table a few times. */
	for (int i = 0; i < 5000; i++) {
		snprintf(p, sizeof(p), "dir%d/file%d", i % 7, i);
		assert_int_equal(bfs_hints_set(h, p, ADV, i % BFS_ADV_COUNT), 0);
	}
	for (int i = 0; i < 5000; i++) {
		snprintf(p, sizeof(p), "dir%d/file%d", i % 7, i);
		assert_int_equal(EFF(h, p), i % BFS_ADV_COUNT);
		if (i % 2)
			assert_int_equal(bfs_hints_clear(h, p, ADV), 0);
	}
	for (int i = 0; i < 5000; i++) {
		snprintf(p, sizeof(p), "dir%d/file%d", i % 7, i);
		assert_int_equal(EFF(h, p), i % 2 ? BFS_ADV_NORMAL : i % BFS_ADV_COUNT);
	}
}

/* --- stats ---------------------------------------------------------------- */

static void test_stats_file(void **state)
{
	struct bfs_counters *m = bfs_counters_new(NULL), *c = bfs_counters_new(m);
	char buf[BFS_STATS_MAX];
	int n;

	(void)state;
	assert_non_null(c);
	BFS_COUNT(c, reads, 3);
	BFS_COUNT(c, bytes, 12288);
	BFS_COUNT(c, hits, 2);
	BFS_COUNT(c, misses, 1);
	BFS_COUNT(c, decoded, 1);
	BFS_COUNT(c, decode_ns, 999);
	BFS_COUNT(c, prefetched, 4);
	BFS_COUNT(c, prefetch_used, 3);
	BFS_COUNT(c, pushed, 8192);
	BFS_COUNT(c, syscalls, 5);
	BFS_COUNT(c, csum_failures, 6);
	BFS_COUNT(c, errors, 7);
	BFS_COUNT(c, cached, 65536);
	n = bfs_stats_format(c, NULL, buf, sizeof(buf));
	assert_int_equal(n, (int)strlen(buf));
	assert_string_equal(buf, "reads 3\n"
				 "bytes 12288\n"
				 "cache_hits 2\n"
				 "cache_misses 1\n"
				 "blocks_decompressed 1\n"
				 "decompress_ns 999\n"
				 "blocks_prefetched 4\n"
				 "prefetched_used 3\n"
				 "pushed_bytes 8192\n"
				 "backing_syscalls 5\n"
				 "checksum_failures 6\n"
				 "errors 7\n"
				 "cached_bytes 65536\n");
	/* The parent counted too. */
	n = bfs_stats_format(m, NULL, buf, sizeof(buf));
	assert_non_null(strstr(buf, "reads 3\n"));
	bfs_counters_put(c);
	bfs_counters_put(m);
}

static void test_stats_root_and_short_buffer(void **state)
{
	struct bfs_counters *m = bfs_counters_new(NULL), max;
	struct bfs_stats_cache sc;
	struct bfs_cache *cache;
	char buf[BFS_STATS_MAX];
	int n;

	(void)state;
	assert_int_equal(bfs_cache_new(&cache, 1 << 20), 0);
	sc = (struct bfs_stats_cache){ .bytes = bfs_cache_bytes(cache),
				       .limit = bfs_cache_limit(cache),
				       .inodes = 7,
				       .spill_limit = 5,
				       .spill_reads = 3 };
	n = bfs_stats_format(m, &sc, buf, sizeof(buf));
	assert_true(n > 0);
	assert_non_null(strstr(buf, "reads 0\n"));
	assert_non_null(strstr(buf, "\ninodes 7\ncache_bytes 0\ncache_limit 1048576\n"));
	assert_non_null(strstr(buf, "\nspill_bytes 0\nspill_limit 5\nspill_proofs 0\n"
				    "spill_sealed 0\nspill_reads 3\nspill_dropped 0\n"
				    "spill_failed 0\n"));
	/* a file's counters have none of the root's rows */
	n = bfs_stats_format(m, NULL, buf, sizeof(buf));
	assert_true(n > 0);
	assert_null(strstr(buf, "inodes"));
	assert_null(strstr(buf, "probed_ahead"));
	assert_null(strstr(buf, "spill"));
	assert_non_null(strstr(buf, "\ncached_bytes 0\n"));
	n = bfs_stats_format(m, &sc, buf, sizeof(buf));
	assert_int_equal(buf[n - 1], '\n');
	/* Short buffers: never a truncated value. */
	for (size_t len = 0; len <= (size_t)n; len++)
		assert_int_equal(bfs_stats_format(m, &sc, buf, len), -ERANGE);
	assert_int_equal(bfs_stats_format(m, &sc, buf, (size_t)n + 1), n);
	/* Every counter at its widest still fits BFS_STATS_MAX. */
	memset(&max, 0xff, sizeof(max));
	memset(&sc, 0xff, sizeof(sc));
	n = bfs_stats_format(&max, &sc, buf, sizeof(buf));
	assert_true(n > 0 && n < BFS_STATS_MAX);
	bfs_cache_free(cache);
	bfs_counters_put(m);
}

/* Each hint maps to its kernel advice; noreuse has no madvise(2) match. */
static void test_advice_to_kernel(void **state)
{
	(void)state;
	assert_int_equal(bfs_advice_fadv(BFS_ADV_SEQUENTIAL), POSIX_FADV_SEQUENTIAL);
	assert_int_equal(bfs_advice_fadv(BFS_ADV_RANDOM), POSIX_FADV_RANDOM);
	assert_int_equal(bfs_advice_fadv(BFS_ADV_WILLNEED), POSIX_FADV_WILLNEED);
	assert_int_equal(bfs_advice_fadv(BFS_ADV_DONTNEED), POSIX_FADV_DONTNEED);
	assert_int_equal(bfs_advice_fadv(BFS_ADV_NOREUSE), POSIX_FADV_NOREUSE);
	assert_int_equal(bfs_advice_fadv(BFS_ADV_NORMAL), POSIX_FADV_NORMAL);
	assert_int_equal(bfs_advice_madv(BFS_ADV_SEQUENTIAL), MADV_SEQUENTIAL);
	assert_int_equal(bfs_advice_madv(BFS_ADV_RANDOM), MADV_RANDOM);
	assert_int_equal(bfs_advice_madv(BFS_ADV_WILLNEED), MADV_WILLNEED);
	assert_int_equal(bfs_advice_madv(BFS_ADV_DONTNEED), MADV_DONTNEED);
	assert_int_equal(bfs_advice_madv(BFS_ADV_NORMAL), MADV_NORMAL);
	assert_int_equal(bfs_advice_madv(BFS_ADV_NOREUSE), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_advice_names),
		cmocka_unit_test(test_advice_trailing_nul),
		cmocka_unit_test(test_advice_bad),
		cmocka_unit_test(test_advice_ranges),
		cmocka_unit_test(test_advice_bad_ranges),
		cmocka_unit_test(test_value_length_limit),
		cmocka_unit_test(test_readpath_parse),
		cmocka_unit_test(test_advice_to_kernel),
		cmocka_unit_test_setup_teardown(test_store_empty_is_default, store_setup,
						store_teardown),
		cmocka_unit_test_setup_teardown(test_store_inheritance, store_setup,
						store_teardown),
		cmocka_unit_test_setup_teardown(test_store_removal_falls_back, store_setup,
						store_teardown),
		cmocka_unit_test_setup_teardown(test_store_many, store_setup, store_teardown),
		cmocka_unit_test(test_stats_file),
		cmocka_unit_test(test_stats_root_and_short_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
