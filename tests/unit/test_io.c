// SPDX-License-Identifier: MIT
/*
 * Unit tests of a walk's view of a file (bfs_io_ahead): small reads going
 * forward, jumping ahead and going back read the file's very bytes,
 * whether threads read ahead or not; threads ask for each chunk about
 * once; a failed read ahead fails the walk's read of it with its error.
 * The file is memory behind a read that waits a little, so that threads
 * finish out of order. A file whose reads come back short (as
 * preadv2(RWF_NOWAIT) returns them when only part of a range is in the
 * page cache) gives its bytes at any offset, forward and backward. Threaded: tools/test.sh also runs this under
 * ThreadSanitizer.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockfs/io.h"

#define FILE_SIZE (9u * BFS_IO_AHEAD_CHUNK + 12345u)

struct slow {
	struct bfs_io io; /* first member */
	uint64_t fail_at; /* a read of the chunk holding it fails with EIO; or UINT64_MAX */
};

static ssize_t slow_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	struct slow *s = (struct slow *)io;
	struct timespec ts = { 0, (long)((off / 4096 * 7919) % 3000) * 1000 };

	nanosleep(&ts, NULL); /* 0-3 ms: readers ahead finish in any order */
	if (s->fail_at >= off && s->fail_at - off < len)
		return -EIO;
	return bfs_io_mem_ops.read(io, buf, len, off);
}

static const struct bfs_io_ops slow_ops = { .name = "slow", .read = slow_read };

static uint8_t *data;

static int setup(void **state)
{
	(void)state;
	data = malloc(FILE_SIZE);
	if (!data)
		return -1;
	for (size_t i = 0; i < FILE_SIZE; i++)
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(data);
	return 0;
}

static void slow_init(struct slow *s, uint64_t fail_at)
{
	bfs_io_init_mem(&s->io, data, FILE_SIZE);
	s->io.ops = &slow_ops;
	s->fail_at = fail_at;
}

/* Read @len bytes at @off through @io and compare them with the file's. */
static void expect_at(struct bfs_io *io, uint64_t off, size_t len)
{
	uint8_t buf[64];

	assert_true(len <= sizeof(buf));
	assert_int_equal(bfs_io_read(io, buf, len, off), 0);
	assert_memory_equal(buf, data + off, len);
}

/* Every 64 KiB a 12-byte header, as an LZ4 walk reads: with @depth threads. */
static void walk_forward(unsigned int depth)
{
	struct bfs_io_ahead a;
	struct slow s;
	struct bfs_io *io;
	atomic_uint_fast64_t progress = 0;
	uint64_t chunks = (FILE_SIZE + BFS_IO_AHEAD_CHUNK - 1) / BFS_IO_AHEAD_CHUNK;

	slow_init(&s, UINT64_MAX);
	io = bfs_io_ahead_init(&a, &s.io, &progress, depth);
	assert_ptr_equal(io, &a.io);
	for (uint64_t off = 0; off + 12 <= FILE_SIZE; off += 65536 + 3)
		expect_at(io, off, 12);
	expect_at(io, FILE_SIZE - 20, 20);
	assert_true(depth ? a.pool != NULL : a.pool == NULL); /* threads read ahead, or none */
	bfs_io_ahead_destroy(&a);
	/* the first megabyte in growing requests (4), then a request a chunk */
	assert_true(atomic_load(&s.io.nread) <= 4 + chunks + depth);
	assert_int_equal(atomic_load(&progress), FILE_SIZE);
}

static void test_forward_threads(void **state)
{
	(void)state;
	walk_forward(4);
}

static void test_forward_no_threads(void **state)
{
	(void)state;
	walk_forward(0);
}

/* Jumps ahead past chunks read ahead, back to the start, and on again. */
static void test_jumps(void **state)
{
	static const uint64_t at[] = {
		0,	 70000,	  200000,	  600000,  1100000, 1500000,
		2100000, 5500000, 5500100,	  9000000, 100,	    3000000,
		3000001, 3500000, FILE_SIZE - 64, 4000000, 4100000, 8000000
	};
	struct bfs_io_ahead a;
	struct slow s;
	struct bfs_io *io;

	(void)state;
	slow_init(&s, UINT64_MAX);
	io = bfs_io_ahead_init(&a, &s.io, NULL, 4);
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		expect_at(io, at[i], 64);
	bfs_io_ahead_destroy(&a);
}

/* A chunk whose read ahead failed: the walk's read there fails with its error. */
static void test_error_ahead(void **state)
{
	uint64_t bad = 5u * BFS_IO_AHEAD_CHUNK + 777;
	struct bfs_io_ahead a;
	struct slow s;
	struct bfs_io *io;
	uint8_t buf[16];
	int rc = 0;
	uint64_t off;

	(void)state;
	slow_init(&s, bad);
	io = bfs_io_ahead_init(&a, &s.io, NULL, 4);
	for (off = 0; off + sizeof(buf) <= FILE_SIZE; off += 4096) {
		rc = bfs_io_read(io, buf, sizeof(buf), off);
		if (rc < 0)
			break;
		assert_memory_equal(buf, data + off, sizeof(buf));
	}
	assert_int_equal(rc, -EIO);
	/* the first read that met the failed chunk: within a chunk before @bad */
	assert_true(off <= bad && bad - off < BFS_IO_AHEAD_CHUNK);
	bfs_io_ahead_destroy(&a);
}

/* A read that never gives more than SHORT bytes at a time (and does not wait). */
#define SHORT 4096

static ssize_t short_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	return bfs_io_mem_ops.read(io, buf, len < SHORT ? len : SHORT, off);
}

static const struct bfs_io_ops short_ops = { .name = "short", .read = short_read };

/* Like expect_at(), for reads of any length. */
static void expect_long_at(struct bfs_io *io, uint64_t off, size_t len)
{
	uint8_t *buf = malloc(len);

	assert_non_null(buf);
	assert_int_equal(bfs_io_read(io, buf, len, off), 0);
	assert_memory_equal(buf, data + off, len);
	free(buf);
}

static void short_reads(unsigned int depth)
{
	struct bfs_io under;
	struct bfs_io_ahead a;
	struct bfs_io *io;
	uint8_t b[16];

	bfs_io_init_mem(&under, data, FILE_SIZE);
	under.ops = &short_ops;
	io = bfs_io_ahead_init(&a, &under, NULL, depth);
	assert_ptr_equal(io, &a.io);
	/* a walk from the start: headers, then small hops */
	expect_long_at(io, 0, 100);
	expect_long_at(io, 5000, 12);
	expect_long_at(io, 300000, 3);
	/* an index read from the end, backwards */
	expect_long_at(io, FILE_SIZE - 12, 12);
	expect_long_at(io, FILE_SIZE - 5000, 4988);
	expect_long_at(io, FILE_SIZE - 200000, 64);
	expect_long_at(io, FILE_SIZE - 400000, 4);
	/* a big read, past the buffer */
	expect_long_at(io, 1 << 20, 3 << 20);
	/* past the end: the file ended */
	assert_int_equal(bfs_io_read(io, b, sizeof(b), FILE_SIZE - 8), -EIO);
	bfs_io_ahead_destroy(&a);
}

static void test_short_reads_no_threads(void **state)
{
	(void)state;
	short_reads(0);
}

static void test_short_reads_threads(void **state)
{
	(void)state;
	short_reads(4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forward_threads),
		cmocka_unit_test(test_forward_no_threads),
		cmocka_unit_test(test_jumps),
		cmocka_unit_test(test_error_ahead),
		cmocka_unit_test(test_short_reads_no_threads),
		cmocka_unit_test(test_short_reads_threads),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
