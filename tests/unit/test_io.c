// SPDX-License-Identifier: MIT
/*
 * io.c: the read-ahead reader of walks (bfs_io_ahead) over a file whose
 * reads come back short, as preadv2(RWF_NOWAIT) returns them when only
 * part of a range is in the page cache: every read at any offset, forward
 * and backward (an xz index read from the end), gives the file's bytes.
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

#include "blockfs/io.h"

#define FILE_LEN (10u << 20)
#define SHORT 4096		/* the most one read of the file under test gives */

static uint8_t *file;

/* Like the memory reader, but never more than SHORT bytes at a time. */
static ssize_t short_read(struct bfs_io *io, void *buf, size_t len, uint64_t off)
{
	(void)io;
	if (off >= FILE_LEN)
		return 0;
	if (len > FILE_LEN - off)
		len = FILE_LEN - off;
	if (len > SHORT)
		len = SHORT;
	memcpy(buf, file + off, len);
	return (ssize_t)len;
}

static const struct bfs_io_ops short_ops = { .name = "short", .read = short_read };

static void check_at(struct bfs_io *io, uint64_t off, size_t len)
{
	uint8_t *buf = malloc(len);

	assert_non_null(buf);
	assert_int_equal(bfs_io_read(io, buf, len, off), 0);
	assert_memory_equal(buf, file + off, len);
	free(buf);
}

static void test_short_reads_forward_and_back(void **state)
{
	struct bfs_io under = { .ops = &short_ops, .fd = -1, .size = FILE_LEN };
	struct bfs_io_ahead a;
	struct bfs_io *io;

	(void)state;
	file = malloc(FILE_LEN);
	assert_non_null(file);
	for (size_t i = 0; i < FILE_LEN; i++)
		file[i] = (uint8_t)(i * 2654435761u >> 13);
	io = bfs_io_ahead_init(&a, &under, NULL);
	assert_ptr_not_equal(io, &under);
	/* a walk from the start: headers, then small hops */
	check_at(io, 0, 100);
	check_at(io, 5000, 12);
	check_at(io, 300000, 3);
	/* an index read from the end, backwards */
	check_at(io, FILE_LEN - 12, 12);
	check_at(io, FILE_LEN - 5000, 4988);
	check_at(io, FILE_LEN - 200000, 64);
	check_at(io, FILE_LEN - 400000, 4);
	/* a big read, past the buffer */
	check_at(io, 1 << 20, 3 << 20);
	/* past the end: the file ended */
	{
		uint8_t b[16];

		assert_int_equal(bfs_io_read(io, b, sizeof(b), FILE_LEN - 8), -EIO);
	}
	bfs_io_ahead_destroy(&a);
	free(file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_short_reads_forward_and_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
