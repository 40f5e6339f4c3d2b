// SPDX-License-Identifier: MIT
/* Mount option parsing and checking (blockfs(8), OPTIONS), and the size parser. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include <fuse_lowlevel.h>

#include "blockfs/hints.h"
#include "blockfs/mmap.h"
#include "blockfs/opts.h"

/* Parse argv; on success leave the remaining arguments in *rest. */
static int parse(struct bfs_opts *o, struct fuse_args *rest, int argc, char **argv)
{
	*rest = (struct fuse_args)FUSE_ARGS_INIT(0, NULL);
	for (int i = 0; i < argc; i++)
		assert_int_equal(fuse_opt_add_arg(rest, argv[i]), 0);
	return bfs_opts_parse(rest, o);
}

/* "blockfs -o @opt src mnt", or "blockfs src mnt" when @opt is NULL: accepted. */
static void expect_parsed(struct bfs_opts *o, struct fuse_args *rest, const char *opt)
{
	char *with[] = { "blockfs", "-o", (char *)opt, "src", "mnt" };
	char *without[] = { "blockfs", "src", "mnt" };

	if (opt)
		assert_int_equal(parse(o, rest, 5, with), 0);
	else
		assert_int_equal(parse(o, rest, 3, without), 0);
}

static void test_defaults(void **state)
{
	char *argv[] = { "blockfs", "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	assert_int_equal(parse(&o, &rest, 3, argv), 0);
	assert_string_equal(o.source, "src");
	assert_int_equal(o.readpath, BFS_READPATH_PREAD);
	assert_true(o.verify);
	assert_int_equal(o.cache_size, BFS_DEFAULT_CACHE_SIZE);
	assert_false(o.kernel_open);
	/* the mountpoint is taken too: main.c checks options before paths */
	assert_string_equal(o.mountpoint, "mnt");
	assert_int_equal(rest.argc, 1);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
}

static void test_ours_taken_fuse_kept(void **state)
{
	char *argv[] = { "blockfs", "-o", "readpath=pread,verify=off,allow_other", "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	assert_int_equal(parse(&o, &rest, 5, argv), 0);
	assert_int_equal(o.readpath, BFS_READPATH_PREAD);
	assert_false(o.verify);
	assert_int_equal(rest.argc, 3); /* blockfs -o allow_other */
	assert_string_equal(rest.argv[1], "-o");
	assert_string_equal(rest.argv[2], "allow_other");
	assert_string_equal(o.mountpoint, "mnt");
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
}

static void expect_refused(const char *opt)
{
	char *argv[] = { "blockfs", "-o", (char *)opt, "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;

	assert_int_equal(parse(&o, &rest, 5, argv), -1);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
}

static void test_bad_values_refused(void **state)
{
	(void)state;
	expect_refused("readpath=bogus");
	expect_refused("readpath=");
	expect_refused("readpath=PREAD");
	expect_refused("verify=maybe");
	expect_refused("verify=");
}

static void test_readpath_and_populate(void **state)
{
	char *argv[] = { "blockfs", "-o", "readpath=mmap,populate=async", "src", "mnt" };
	char *autop[] = { "blockfs", "-o", "readpath=auto", "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	assert_int_equal(parse(&o, &rest, 5, argv), 0);
	assert_int_equal(o.readpath, BFS_READPATH_MMAP);
	assert_int_equal(o.populate, BFS_POPULATE_ASYNC);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 5, autop), 0);
	assert_int_equal(o.readpath, BFS_READPATH_AUTO);
	assert_int_equal(o.populate, BFS_POPULATE_OFF);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	expect_refused("populate=maybe");
	expect_refused("populate=");
}

/* suid/dev are taken, never passed on: main.c adds them back only when asked. */
/* A flag of ours: taken, not passed on; with a value it is libfuse's to refuse. */
static void test_kernel_open(void **state)
{
	char *flag[] = { "blockfs", "-o", "kernel_open,allow_other", "src", "mnt" };
	char *valued[] = { "blockfs", "-o", "kernel_open=1", "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	assert_int_equal(parse(&o, &rest, 5, flag), 0);
	assert_true(o.kernel_open);
	assert_int_equal(rest.argc, 3); /* blockfs -o allow_other */
	assert_string_equal(rest.argv[2], "allow_other");
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 5, valued), 0);
	assert_false(o.kernel_open);
	assert_int_equal(rest.argc, 3); /* left for libfuse, which refuses it */
	assert_string_equal(rest.argv[2], "kernel_open=1");
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
}

static void test_suid_dev_taken_last_wins(void **state)
{
	char *none[] = { "blockfs", "src", "mnt" };
	char *ask[] = { "blockfs", "-o", "suid,allow_other,dev", "src", "mnt" };
	char *undo[] = { "blockfs", "-o", "suid,dev,nodev", "-o", "nosuid", "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	assert_int_equal(parse(&o, &rest, 3, none), 0);
	assert_false(o.suid);
	assert_false(o.dev);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 5, ask), 0);
	assert_true(o.suid);
	assert_true(o.dev);
	assert_int_equal(rest.argc, 3); /* blockfs -o allow_other */
	assert_string_equal(rest.argv[2], "allow_other");
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 7, undo), 0);
	assert_false(o.suid);
	assert_false(o.dev);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
}

/* max_read: checked here (the init op needs it), and still left for libfuse to mount with. */
static void test_max_read_checked_and_kept(void **state)
{
	char *argv[] = { "blockfs", "-o", "max_read=65536", "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	assert_int_equal(parse(&o, &rest, 5, argv), 0);
	assert_int_equal(o.max_read, 65536);
	assert_int_equal(rest.argc, 3); /* blockfs -o max_read=65536 */
	assert_string_equal(rest.argv[2], "max_read=65536");
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	expect_refused("max_read=");
	expect_refused("max_read=64K");
	expect_refused("max_read=-1");
	expect_refused("max_read= 1");
	expect_refused("max_read=4294967296");
}

/* A third positional argument is refused. */
static void test_third_argument_refused(void **state)
{
	char *argv[] = { "blockfs", "src", "mnt", "extra" };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	assert_int_equal(parse(&o, &rest, 4, argv), -1);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
}

static void test_cache_size(void **state)
{
	char *argv[] = { "blockfs", "-o", "cache_size=256M", "src", "mnt" };
	char *zero[] = { "blockfs", "-o", "cache_size=0", "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	assert_int_equal(parse(&o, &rest, 5, argv), 0);
	assert_int_equal(o.cache_size, 256ull << 20);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 5, zero), 0);
	assert_int_equal(o.cache_size, 0);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	expect_refused("cache_size=12Q");
	expect_refused("cache_size=");
	expect_refused("cache_size=-1M");
}

/* o.kernel_readahead once "-o @opt" is parsed; NULL: no -o at all. */
static uint64_t kernel_readahead_of(const char *opt)
{
	char *argv[] = { "blockfs", "-o", (char *)opt, "src", "mnt" };
	char *bare[] = { "blockfs", "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;
	uint64_t v;

	assert_int_equal(opt ? parse(&o, &rest, 5, argv) : parse(&o, &rest, 3, bare), 0);
	v = o.kernel_readahead;
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	return v;
}

static void test_kernel_readahead(void **state)
{
	(void)state;
	assert_int_equal(kernel_readahead_of(NULL), 1 << 20);
	assert_int_equal(kernel_readahead_of("kernel_readahead=4M"), 4 << 20);
	assert_int_equal(kernel_readahead_of("kernel_readahead=0"), 0);
	assert_int_equal(kernel_readahead_of("kernel_readahead=1G"), 1 << 30);
	assert_int_equal(kernel_readahead_of("kernel_readahead=4K"), 4 << 10);
	expect_refused("kernel_readahead=1025M");
	expect_refused("kernel_readahead=512"); /* read_ahead_kb 0: none at all */
	expect_refused("kernel_readahead=4095");
	expect_refused("kernel_readahead=lots");
	expect_refused("kernel_readahead=");
	expect_refused("kernel_readahead=-1");
}

static void test_timeouts(void **state)
{
	char *argv[] = { "blockfs", "-o", "entry_timeout=0.5,attr_timeout=3600,negative_timeout=2",
			 "src", "mnt" };
	char *bare[] = { "blockfs", "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	assert_int_equal(parse(&o, &rest, 3, bare), 0);
	assert_true(o.entry_timeout == 10.0 && o.attr_timeout == 10.0);
	assert_true(o.negative_timeout == 0.0); /* a new file shows at once */
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 5, argv), 0);
	assert_true(o.entry_timeout == 0.5 && o.attr_timeout == 3600.0);
	assert_true(o.negative_timeout == 2.0);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	expect_refused("negative_timeout=-1");
	expect_refused("negative_timeout=inf");
	expect_refused("entry_timeout=1s");
	expect_refused("attr_timeout=");
}

static void test_readdirplus(void **state)
{
	static const struct {
		const char *arg;
		size_t want;
		bool is_auto;
	} good[] = { { NULL, BFS_READDIRPLUS_ON, true },
		     { "readdirplus=auto", BFS_READDIRPLUS_ON, true },
		     { "readdirplus=on", BFS_READDIRPLUS_ON, false },
		     { "readdirplus=off", 0, false },
		     { "readdirplus=1", 1, false },
		     { "readdirplus=16", 16, false },
		     { "readdirplus=4294967295", 4294967295u, false } };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		expect_parsed(&o, &rest, good[i].arg);
		assert_true(o.readdirplus == good[i].want);
		assert_int_equal(o.readdirplus_auto, good[i].is_auto);
		bfs_opts_release(&o);
		fuse_opt_free_args(&rest);
	}
	expect_refused("readdirplus=0"); /* off says it */
	expect_refused("readdirplus=-1");
	expect_refused("readdirplus=4294967296");
	expect_refused("readdirplus=ON");
	expect_refused("readdirplus=AUTO");
	expect_refused("readdirplus=16k");
	expect_refused("readdirplus= 16");
	expect_refused("readdirplus=");
}

static void test_loop_and_busy_poll(void **state)
{
	static const struct {
		const char *arg;
		bool libfuse;
		unsigned int poll_us;
	} good[] = { { NULL, false, BFS_DEFAULT_BUSY_POLL_US },
		     { "loop=blockfs", false, BFS_DEFAULT_BUSY_POLL_US },
		     { "loop=libfuse", true, BFS_DEFAULT_BUSY_POLL_US },
		     { "busy_poll=0", false, 0 },
		     { "busy_poll=7", false, 7 },
		     { "loop=libfuse,busy_poll=200", true, 200 },
		     { "busy_poll=1000000", false, BFS_MAX_BUSY_POLL_US } };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		expect_parsed(&o, &rest, good[i].arg);
		assert_int_equal(o.libfuse_loop, good[i].libfuse);
		assert_int_equal(o.busy_poll_us, good[i].poll_us);
		assert_int_equal(rest.argc, 1); /* neither reaches libfuse */
		bfs_opts_release(&o);
		fuse_opt_free_args(&rest);
	}
	expect_refused("loop=fast");
	expect_refused("loop=LIBFUSE");
	expect_refused("loop=");
	expect_refused("busy_poll=-1");
	expect_refused("busy_poll=1000001");
	expect_refused("busy_poll=50us");
	expect_refused("busy_poll= 5");
	expect_refused("busy_poll=");
}

static void test_max_inodes(void **state)
{
	char *a1[] = { "blockfs", "src", "mnt" };
	char *a2[] = { "blockfs", "-o", "max_inodes=0", "src", "mnt" };
	char *a3[] = { "blockfs", "-o", "max_inodes=1024", "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	assert_int_equal(parse(&o, &rest, 3, a1), 0);
	assert_int_equal(o.max_inodes, BFS_DEFAULT_MAX_INODES);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 5, a2), 0);
	assert_int_equal(o.max_inodes, 0); /* no bound */
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 5, a3), 0);
	assert_int_equal(o.max_inodes, 1024);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	expect_refused("max_inodes=1023");
	expect_refused("max_inodes=-1");
	expect_refused("max_inodes=4294967296");
	expect_refused("max_inodes=1M");
	expect_refused("max_inodes=");
}

static void test_readahead_workers_advice(void **state)
{
	char *argv[] = { "blockfs", "-o", "readahead=512K,workers=0,advice=sequential", "src",
			 "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;

	(void)state;
	assert_int_equal(parse(&o, &rest, 5, argv), 0);
	assert_int_equal(o.readahead, 512 << 10);
	assert_int_equal(o.workers, 0);
	assert_int_equal(o.advice, BFS_ADV_SEQUENTIAL);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	expect_refused("readahead=fast");
	expect_refused("workers=-1");
	expect_refused("workers=two");
	expect_refused("workers=257");
	expect_refused("workers=");
	expect_refused("advice=dontneed"); /* an action on a range, not a default */
	expect_refused("advice=fast");
	expect_refused("advice=willneed 0 1M"); /* a range is an action, not a default */
	expect_refused("advice=");
}

/* willneed=kernel is the default; cache and kernel parse; anything else is refused. */
static void test_willneed(void **state)
{
	char *none[] = { "blockfs", "src", "mnt" };
	char *cache[] = { "blockfs", "-o", "willneed=cache", "src", "mnt" };
	struct fuse_args rest;
	struct bfs_opts o;
	struct bfs_opts bad = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(parse(&o, &rest, 3, none), 0);
	assert_true(o.willneed_kernel);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 5, cache), 0);
	assert_false(o.willneed_kernel);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	expect_refused("willneed=Kernel");
	expect_refused("willneed=");
	assert_int_equal(bfs_opts_give(&bad, "willneed", "pagecache"), 0);
	assert_int_equal(bfs_opts_check(&bad, err, sizeof(err)), -EINVAL);
	assert_string_equal(err,
			    "bad value 'pagecache' for option willneed: expected cache or kernel");
	bfs_opts_release(&bad);
}

/*
 * gzip=index|raw, gzip_span (64K..32M), index_cache=DIR|off (the directory
 * is checked by main: a string here), index_cache_size, spill_size
 */
static void test_gzip_and_index_cache(void **state)
{
	char *none[] = { "blockfs", "src", "mnt" };
	char *on[] = { "blockfs", "-o", "gzip=index,gzip_span=4M,index_cache=/var/cache/x", "src",
		       "mnt" };
	char *off[] = { "blockfs", "-o", "gzip=raw,index_cache=off,index_cache_size=0,spill_size=0",
			"src", "mnt" };
	char *dot_off[] = { "blockfs", "-o", "index_cache=./off,index_cache_size=2G,spill_size=64M",
			    "src", "mnt" };
	struct bfs_opts bad = { 0 };
	struct fuse_args rest;
	struct bfs_opts o;
	char err[256];

	(void)state;
	assert_int_equal(parse(&o, &rest, 3, none), 0);
	assert_true(o.gzip_index); /* decoded by default */
	assert_int_equal(o.gzip_span, 1u << 20);
	assert_null(o.index_cache); /* the default place */
	assert_false(o.index_cache_off);
	assert_int_equal(o.index_cache_size, 1u << 30);
	assert_int_equal(o.spill_size, BFS_DEFAULT_SPILL_SIZE);
	assert_int_equal(o.spill_size, 1u << 30);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 5, on), 0);
	assert_true(o.gzip_index);
	assert_int_equal(o.gzip_span, 4u << 20);
	assert_string_equal(o.index_cache, "/var/cache/x");
	assert_false(o.index_cache_off);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 5, off), 0);
	assert_false(o.gzip_index);
	assert_null(o.index_cache);
	assert_true(o.index_cache_off);
	assert_int_equal(o.index_cache_size, 0);
	assert_int_equal(o.spill_size, 0);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	assert_int_equal(parse(&o, &rest, 5, dot_off), 0);
	assert_string_equal(o.index_cache, "./off"); /* a directory called off */
	assert_false(o.index_cache_off);
	assert_int_equal(o.index_cache_size, 2ull << 30);
	assert_int_equal(o.spill_size, 64u << 20);
	bfs_opts_release(&o);
	fuse_opt_free_args(&rest);
	expect_refused("index_cache_size=");
	expect_refused("index_cache_size=lots");
	expect_refused("index_cache_size=-1");
	expect_refused("spill_size=");
	expect_refused("spill_size=big");
	expect_refused("spill_size=-1");
	expect_refused("gzip=yes");
	expect_refused("gzip_span=63K");
	expect_refused("gzip_span=33M");
	expect_refused("gzip_span=1X");
	expect_refused("index_cache=");
	assert_int_equal(bfs_opts_give(&bad, "gzip_span", "100M"), 0);
	assert_int_equal(bfs_opts_check(&bad, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "bad value '100M' for option gzip_span: expected a size from 64K "
				 "to 32M such as 1M");
	bfs_opts_release(&bad);
}

static void test_check_message_names_option(void **state)
{
	struct bfs_opts o = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(bfs_opts_give(&o, "readpath", "sideways"), 0);
	assert_int_equal(bfs_opts_check(&o, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "bad value 'sideways' for option readpath: expected pread, mmap "
				 "or auto");
	/* not an option, or a flag: nothing to give */
	assert_int_equal(bfs_opts_give(&o, "readpaths", "pread"), -EINVAL);
	assert_int_equal(bfs_opts_give(&o, "nonempty", "1"), -EINVAL);
	bfs_opts_release(&o);
}

static void test_parse_size(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(bfs_parse_size("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(bfs_parse_size("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(bfs_parse_size("64K", &v), 0);
	assert_int_equal(v, 64 << 10);
	assert_int_equal(bfs_parse_size("256m", &v), 0);
	assert_int_equal(v, 256 << 20);
	assert_int_equal(bfs_parse_size("2G", &v), 0);
	assert_int_equal(v, 2ull << 30);
	assert_int_equal(bfs_parse_size("", &v), -EINVAL);
	assert_int_equal(bfs_parse_size("M", &v), -EINVAL);
	assert_int_equal(bfs_parse_size("-1", &v), -EINVAL);
	assert_int_equal(bfs_parse_size(" 1", &v), -EINVAL);
	assert_int_equal(bfs_parse_size("1T", &v), -EINVAL);
	assert_int_equal(bfs_parse_size("1KB", &v), -EINVAL);
	assert_int_equal(bfs_parse_size("12x", &v), -EINVAL);
	assert_int_equal(bfs_parse_size("18446744073709551616", &v), -ERANGE);
	assert_int_equal(bfs_parse_size("17179869184G", &v), -ERANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_ours_taken_fuse_kept),
		cmocka_unit_test(test_bad_values_refused),
		cmocka_unit_test(test_readpath_and_populate),
		cmocka_unit_test(test_cache_size),
		cmocka_unit_test(test_kernel_readahead),
		cmocka_unit_test(test_readahead_workers_advice),
		cmocka_unit_test(test_max_inodes),
		cmocka_unit_test(test_readdirplus),
		cmocka_unit_test(test_loop_and_busy_poll),
		cmocka_unit_test(test_timeouts),
		cmocka_unit_test(test_willneed),
		cmocka_unit_test(test_kernel_open),
		cmocka_unit_test(test_suid_dev_taken_last_wins),
		cmocka_unit_test(test_max_read_checked_and_kept),
		cmocka_unit_test(test_third_argument_refused),
		cmocka_unit_test(test_gzip_and_index_cache),
		cmocka_unit_test(test_check_message_names_option),
		cmocka_unit_test(test_parse_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
